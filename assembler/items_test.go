package assembler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// itemTexts are texts of knowledge items and tool outputs, chosen for how they end and start: characters
// that a tokenizer joins to the line break after them ('.' and a line break are one token in o200k_base),
// characters that are escaped, digits, letters of several scripts, emoji, a '/' at the start (which
// o200k_base joins to the line break before it), lines, and white space around the text.
var itemTexts = []string{
	"Premium costs $20.", "Is it yearly?", "done!", "(see terms)", `he said "yes"`, "a < b", "rock & roll",
	"it's", "42", "version 1.2.3", "中文", "Привет", "😀", "👍🏽", "/path/to/file", "//comment",
	"line one\nline two.", "tabs\tand  spaces ;", "ends with a colon:", "...", "&amp;", "é", "x", "  padded.  ",
	"\nlines around\n", "}", "</context>", "\"", "word", "a\n\nparagraph.",
}

// itemText is a random text of itemTexts' pieces.
func itemText(r *rand.Rand) string {
	var b strings.Builder
	for i := range 1 + r.IntN(3) {
		if i > 0 {
			b.WriteString([]string{" ", "\n", ""}[r.IntN(3)])
		}
		b.WriteString(itemTexts[r.IntN(len(itemTexts))])
	}
	return b.String()
}

// asRendered is text as a format writes it inside a tag: indented in the text format (see indentLines).
func asRendered(format Format, text string) string {
	if format == Text {
		return textIndent + indentLines(text)
	}
	return text
}

// TestAssemble_ItemsRenderAsTagWritesThem: in every format of Loom's markup, every knowledge item renders
// as "[n] " and the element that XMLTag and Tag write for it, and every tool output as the element that Tag
// writes, "text\n</context>" with nothing of the counting in it (no space before the line break), whatever
// the text ends or starts with, and whether its count was cached by a store or not; the count stays exact.
func TestAssemble_ItemsRenderAsTagWritesThem(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(41, 42))
	cachedKept := 0
	for n := range 300 {
		format := []Format{OpenAI, Anthropic, Text, Responses, Gemini}[n%5]
		req := &Request{Model: []string{"gpt-4o", "gpt-4"}[r.IntN(2)], Instructions: "Answer.", Message: "What now?",
			MaxTokens: 150 + r.IntN(600), Formatter: format}
		cached := map[string]bool{}
		for i := range r.IntN(8) {
			k := Knowledge{ID: fmt.Sprint("k", i), Content: itemText(r), Score: r.Float64(), Type: []string{"", "faq"}[r.IntN(2)],
				Trusted: r.IntN(3) == 0}
			if r.IntN(2) == 0 {
				k.Source = fmt.Sprint("doc", i, ".md")
			}
			if r.IntN(2) == 0 { // as a store writes it
				k.TokenCounts, cached[k.ID] = KnowledgeCounts(k.Content), true
			}
			req.Knowledge = append(req.Knowledge, k)
		}
		for i := range r.IntN(3) {
			req.ToolOutputs = append(req.ToolOutputs, ToolOutput{Tool: "search", CallID: fmt.Sprint("s", i), Result: itemText(r)})
		}
		res, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}

		// The context as Tag writes its elements: the kept tool outputs in order, then the knowledge cited.
		var items []string
		for _, rr := range res.Report.Regions {
			if rr.Name != RegionToolOutputs {
				continue
			}
			for _, o := range req.ToolOutputs {
				for _, id := range rr.Included {
					if id == o.CallID {
						result := strings.TrimSpace(o.Result)
						if result == "" {
							result = "(no output)"
						}
						items = append(items, Tag("tool_output", asRendered(format, result), "tool", o.Tool, "call_id", o.CallID, "trusted", "false"))
					}
				}
			}
		}
		var knowledge []string
		for _, c := range res.Citations {
			for _, k := range req.Knowledge {
				if k.ID != c.ID {
					continue
				}
				attrs := []string{"type", orRag(k.Type)}
				if k.Source != "" {
					attrs = append(attrs, "source", k.Source)
				}
				text := asRendered(format, strings.TrimSpace(k.Content))
				el := Tag("context", text, append(attrs, "trusted", strconv.FormatBool(k.Trusted))...)
				if k.Source == "" && format != Text && el != XMLTag(strings.TrimSpace(k.Content), k.Type, k.Trusted) {
					t.Fatalf("Tag writes %q, XMLTag %q", el, XMLTag(k.Content, k.Type, k.Trusted))
				}
				knowledge = append(knowledge, "["+strconv.Itoa(c.Marker)+"] "+el)
				if cached[k.ID] {
					cachedKept++
				}
			}
		}
		want := strings.Join(append(items, knowledge...), "\n\n")
		if got, want := res.Context, strings.Join(knowledge, "\n\n"); got != want {
			t.Fatalf("%s: Context\n%q\nwant\n%q", format.Name(), got, want)
		}

		var ctx string
		switch format {
		case OpenAI:
			if len(res.Messages) == 3 {
				ctx = res.Messages[1].Content
			}
			if got := openAICount(t, res); got != res.TotalTokens {
				t.Fatalf("openai: TotalTokens %d, recount %d", res.TotalTokens, got)
			}
		case Anthropic:
			if last := res.Messages[len(res.Messages)-1]; len(last.Blocks) == 2 {
				ctx = last.Blocks[0].Text
			}
		case Responses:
			if len(res.Input) == 2 {
				ctx = res.Input[0].Content[0].Text
			}
			if got := responsesCount(t, res); got != res.TotalTokens {
				t.Fatalf("responses: TotalTokens %d, recount %d", res.TotalTokens, got)
			}
		case Gemini:
			if last := res.Contents[len(res.Contents)-1]; len(last.Parts) == 2 {
				ctx = last.Parts[0].Text
			}
			if got := geminiCount(t, res); got != res.TotalTokens {
				t.Fatalf("gemini: TotalTokens %d, recount %d", res.TotalTokens, got)
			}
		case Text:
			body, _ := strings.CutPrefix(res.Text, req.Instructions+"\n\n")
			ctx = strings.TrimSuffix(body[:strings.Index(body, "User: "+req.Message)], "\n\n")
			if got := countWith(t, res.Model, res.Text); got != res.TotalTokens {
				t.Fatalf("text: TotalTokens %d, recount %d", res.TotalTokens, got)
			}
		}
		if ctx != want {
			t.Fatalf("%s: the context\n%q\nwant\n%q", format.Name(), ctx, want)
		}
	}
	if cachedKept < 100 {
		t.Errorf("only %d items with cached counts were kept: the test proves little", cachedKept)
	}
}

// TestAssemble_CachedKnowledgeIsNotCounted: in the openai and anthropic formats, a knowledge item whose
// count a store cached is costed and rendered in its tags without counting its text or any piece of it,
// whatever it ends with: the count of the text with the line break that ends it adds to its tags' counts.
// (A text that starts with '/' is left out: o200k_base joins the '/' to the line break that ends the open
// tag, and the meter counts the few bytes around that join. So is the text format, whose indent after the
// open tag's line break joins the text's first word.)
func TestAssemble_CachedKnowledgeIsNotCounted(t *testing.T) {
	t.Parallel()
	for _, text := range itemTexts {
		if strings.HasPrefix(strings.TrimSpace(text), "/") {
			continue
		}
		for _, format := range []Format{OpenAI, Anthropic} {
			req := &Request{Model: "gpt-4o", Message: "q", Formatter: format,
				Knowledge: []Knowledge{{ID: "k", Content: text, TokenCounts: KnowledgeCounts(text)}}}
			a, err := newAssembly(req)
			if err != nil {
				t.Fatal(err)
			}
			c := &countingCounter{enc: tokenizer.O200K(), seen: map[string]int{}}
			a.m = tokenizer.NewMeter(c)
			res, err := a.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Citations) != 1 {
				t.Fatalf("%q: not kept", text)
			}
			body := "\n" + RenderedKnowledge(text)
			for s := range c.seen {
				if len(s) > 1 && strings.Contains(body, s) {
					t.Errorf("%s: %q counted %q, a piece of its text", format.Name(), text, s)
				}
			}
			if format == OpenAI && openAICount(t, res) != res.TotalTokens {
				t.Errorf("openai: %q: TotalTokens %d, recount %d", text, res.TotalTokens, openAICount(t, res))
			}
		}
	}
}

// TestAssemble_KnowledgeCostsAreTheirCounts: the planner's cost of a knowledge item, when it knows it, is
// the count of the item as it is rendered (its marker, tags and text, escaped and ended by its line break),
// and its lower bound, when it only bounds it, is no more than that; whether the item's count was cached
// or not, in every format of Loom's markup, and for texts that defeat the meter's counting at a join (a
// first line with no place to cut it, a '/' after the open tag's line break, markup past the start).
func TestAssemble_KnowledgeCostsAreTheirCounts(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(43, 44))
	starts := []string{"", "/" + strings.Repeat("x", 80), strings.Repeat("中", 40), strings.Repeat("ab", 50) + "<"}
	costed := 0
	for n := range sweep(300) {
		format := []Format{OpenAI, Anthropic, Text, Responses, Gemini}[n%5]
		req := &Request{Model: []string{"gpt-4o", "gpt-4"}[r.IntN(2)], Message: "q", MaxTokens: 60 + r.IntN(400), Formatter: format}
		for i := range 1 + r.IntN(8) {
			k := Knowledge{ID: fmt.Sprint("k", i), Content: starts[r.IntN(len(starts))] + itemText(r) + " " + itemText(r), Score: r.Float64()}
			if r.IntN(3) > 0 {
				k.TokenCounts = KnowledgeCounts(k.Content)
			}
			req.Knowledge = append(req.Knowledge, k)
		}
		a, err := newAssembly(req)
		if err != nil {
			t.Fatal(err)
		}
		enc := a.model.Counter()
		func() {
			a.scratch = getScratch()
			defer a.release()
			if _, err := a.plan(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, it := range a.knowledge {
				rendered := marker(it.rank+1) + it.parts[1].Text + a.knowledgeBody(strings.TrimSpace(it.know.Content)) + it.parts[3].Text
				want := enc.Count(rendered)
				switch {
				case it.cost >= 0:
					costed++
					if it.cost != want {
						t.Fatalf("%s: cost %d, count %d of %q", format.Name(), it.cost, want, rendered)
					}
				case it.lower > want:
					t.Fatalf("%s: lower bound %d, count %d of %q", format.Name(), it.lower, want, rendered)
				}
			}
		}()
	}
	if costed < sweep(300) {
		t.Errorf("only %d items costed: the test proves little", costed)
	}
}
