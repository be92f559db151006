package assembler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// reportOverhead is, counted independently of the assembler, what a result's regions do not account for
// (see Report): the format's reply priming (the text format's closing "Assistant:") and, when the context
// (memory that is not pinned, tool outputs, knowledge) opens a message of its own, that message's frame
// (in the cookbook format, each message is its region's).
func reportOverhead(t *testing.T, req *Request, res *Result) int {
	t.Helper()
	model, err := tokenizer.ForModel(res.Model)
	if err != nil {
		t.Fatal(err)
	}
	c := model.Counter()
	if res.Format == FormatGemini {
		c = tokenizer.Estimator{}
	}
	if _, ok := req.Formatter.(*Cookbook); ok {
		return model.ReplyPriming
	}
	if res.Format == FormatText {
		return c.Count(res.Text) - c.Count(strings.TrimSuffix(res.Text, "Assistant:"))
	}
	pinned := map[string]bool{}
	for _, f := range req.Memory {
		if f.Pinned {
			pinned[f.Key] = true
		}
	}
	context := false
	for _, r := range res.Report.Regions {
		for _, id := range r.Included {
			context = context || r.Name == RegionKnowledge || r.Name == RegionToolOutputs || r.Name == RegionMemory && !pinned[id]
		}
	}
	n := model.ReplyPriming
	if !context {
		return n
	}
	if res.Format == FormatOpenAI || res.Format == FormatResponses { // a system message after the history
		return n + model.TokensPerMessage + c.Count("system")
	}
	if res.Format == FormatGemini { // as Anthropic's, below
		last := res.Contents[len(res.Contents)-1]
		at := len(last.Parts) - 1
		if len(res.Report.Regions[2].Included) > 0 {
			at--
		}
		if at == 0 {
			n += model.TokensPerMessage + c.Count("user")
		}
		return n
	}
	// Anthropic: the context is the last user message's last block, or the one before the current message;
	// it opens the message if it is its first block.
	last := res.Messages[len(res.Messages)-1]
	at := len(last.Blocks) - 1
	if res.Report.Regions[2].Name != RegionMessage {
		t.Fatalf("region 2 is %q", res.Report.Regions[2].Name)
	}
	if len(res.Report.Regions[2].Included) > 0 {
		at--
	}
	if at == 0 {
		n += model.TokensPerMessage + c.Count("user")
	}
	return n
}

// checkReportSums checks that every token of the result is counted in exactly one region, or in the
// format's overhead: the regions' used tokens add up to TotalTokens less the overhead.
// assembleIfItFits assembles a random request: nil when its required items do not fit its budget or it
// is invalid (as a random request may be), the test failed on any other error.
func assembleIfItFits(t *testing.T, req *Request) *Result {
	t.Helper()
	res, err := AssembleRequest(context.Background(), req)
	var be *BudgetError
	if errors.As(err, &be) || errors.Is(err, ErrInvalidRequest) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func checkReportSums(t *testing.T, req *Request, res *Result) {
	t.Helper()
	sum := 0
	var regions []string
	for _, r := range res.Report.Regions {
		sum += r.Used
		regions = append(regions, r.Name.String()+":"+strconv.Itoa(r.Used))
		if len(r.Included) > 0 && r.Used <= 0 && r.Name != RegionMessage {
			t.Errorf("%s: region %s includes %v but used %d tokens", res.Format, r.Name, r.Included, r.Used)
		}
	}
	if over := reportOverhead(t, req, res); sum != res.TotalTokens-over {
		t.Errorf("%s: the regions used %d tokens (%s), want total %d less overhead %d = %d",
			res.Format, sum, strings.Join(regions, " "), res.TotalTokens, over, res.TotalTokens-over)
	}
}

// TestReport_RegionsAddUpToTheTotal: in every format, the regions' used tokens add up to total_tokens less
// the format's fixed overhead, so no token is counted twice (pinned memory was, in the instructions and in
// memory) or not at all (the text format's instructions, tools and message were reported as using none).
func TestReport_RegionsAddUpToTheTotal(t *testing.T) {
	t.Parallel()
	withPinned := func() *Request {
		req := seed003()
		req.Memory[0].Pinned = true
		req.Tools = []Tool{{Type: "function", Function: ToolFunction{Name: "upgrade", Description: "Upgrade the plan."}}}
		req.Knowledge = []Knowledge{{ID: "k1", Content: "Premium costs $20 a month.", Score: 0.9, Source: "pricing.md"}}
		return req
	}
	for fi, format := range testFormats {
		_, cookbook := format.(*Cookbook)
		t.Run(fmt.Sprint(fi, format.Name()), func(t *testing.T) {
			t.Parallel()
			req := withPinned()
			inFormat(req, format)
			res, err := AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			checkReportSums(t, req, res)
			// Mid task: for Anthropic, the context joins the user message of the tool results.
			mid := midTask()
			inFormat(mid, format)
			midRes, err := AssembleRequest(context.Background(), mid)
			if err != nil {
				t.Fatal(err)
			}
			checkReportSums(t, mid, midRes)
			model, _ := tokenizer.ForModel(res.Model)
			c := model.Counter()
			if format == Gemini {
				c = tokenizer.Estimator{}
			}
			for _, r := range res.Report.Regions {
				switch r.Name {
				case RegionInstructions:
					// The instructions alone, without the pinned memory that follows them.
					want := model.TokensPerMessage + c.Count(req.Instructions)
					switch f := format.(type) {
					case openAI, responses:
						want += c.Count("system")
					case textFormat:
						want = c.Count(req.Instructions + "\n\n")
					case *Cookbook:
						want += c.Count("system")
						if f.Agent != nil { // the agent's prompt, a system message of its own
							want += model.TokensPerMessage + c.Count("system") + c.Count(cookbookPrompt(f.Agent))
						}
					}
					if r.Used != want {
						t.Errorf("instructions used %d, want %d", r.Used, want)
					}
				case RegionTools, RegionMessage, RegionMemory:
					if r.Used == 0 && !(cookbook && r.Name == RegionTools) {
						t.Errorf("%s used 0 tokens, with %v included", r.Name, r.Included)
					}
				}
			}

			// Random requests, of every shape, many trimmed.
			rng := rand.New(rand.NewPCG(11, uint64(fi)))
			fits := 0
			for range 150 {
				req := formatRequest(rng, format)
				res := assembleIfItFits(t, req)
				if res == nil {
					continue
				}
				fits++
				checkReportSums(t, req, res)
			}
			if fits < 75 {
				t.Errorf("only %d of 150 requests fit", fits)
			}
		})
	}
}
