package assembler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// estimateCounter is the estimator, recording each text it counts.
type estimateCounter struct{ seen map[string]int }

func (c *estimateCounter) Count(s string) int {
	c.seen[s]++
	return tokenizer.Estimate(s)
}

func (c *estimateCounter) CountUpTo(s string, limit int) (int, bool) {
	c.seen[s]++
	return tokenizer.Estimator{}.CountUpTo(s, limit)
}

func (c *estimateCounter) SplitsAt(s string, p int) bool { return tokenizer.Estimator{}.SplitsAt(s, p) }

// estimateRequest is a request whose counts are estimated (the gemini format whatever the model, or a
// model without a public tokenizer), of history and knowledge whose texts defeat the estimator's joins
// (markup, line breaks, digits and CJK at the ends), each carrying the counts a store keeps.
func estimateRequest(model string, format Format) *Request {
	req := &Request{Model: model, Formatter: format, MaxTokens: 700, Instructions: "Answer from the context.", Message: "What now?"}
	for i, text := range itemTexts {
		content := fmt.Sprintf("%s %d %s", text, i, strings.Repeat(itemTexts[(i+7)%len(itemTexts)]+" ", i%5))
		req.Knowledge = append(req.Knowledge, Knowledge{ID: fmt.Sprint("k", i), Content: content, Score: float64(i%7) / 7,
			TokenCounts: KnowledgeCounts(content)})
		role := []string{"user", "assistant"}[i%2]
		req.History = append(req.History, Message{Role: role, Content: content, TokenCounts: map[string]int{
			tokenizer.O200KBase: tokenizer.O200K().Count(content), tokenizer.EstimateKey: tokenizer.Estimate(content)}})
	}
	return req
}

// TestAssemble_CachedEstimatesAreTrusted: an assembly whose counts are estimated takes the estimates that a
// store cached under tokenizer.EstimateKey instead of counting the texts again, and its result is the one
// it makes when it counts every text itself: the same output, the same counts, the same report.
func TestAssemble_CachedEstimatesAreTrusted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model  string
		format Format
	}{{"gpt-4o", Gemini}, {"claude-sonnet-4-5", Anthropic}, {"claude-sonnet-4-5", OpenAI}, {"gemini-2.5-pro", Gemini}, {"claude-sonnet-4-5", Text}} {
		t.Run(tc.model+"/"+tc.format.Name(), func(t *testing.T) {
			t.Parallel()
			fresh := estimateRequest(tc.model, tc.format)
			fresh.DropTokenCounts()
			want, err := AssembleRequest(context.Background(), fresh)
			if err != nil {
				t.Fatal(err)
			}
			req := estimateRequest(tc.model, tc.format)
			a, err := newAssembly(req)
			if err != nil {
				t.Fatal(err)
			}
			c := &estimateCounter{seen: map[string]int{}}
			a.m = tokenizer.NewMeter(c)
			got, err := a.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if g, w := resultJSON(t, got), resultJSON(t, want); g != w {
				t.Fatalf("with cached estimates:\n%s\nall counted:\n%s", g, w)
			}
			if len(got.Citations) == 0 || len(got.Citations) == len(req.Knowledge) {
				t.Fatalf("%d of %d knowledge items kept: the budget does not choose", len(got.Citations), len(req.Knowledge))
			}
			if tc.format == Text { // it indents a text of several lines, which its cached count is not of
				return
			}
			for _, h := range req.History {
				if strings.Contains(h.Content, "\n") {
					continue // written by the format otherwise than given in some formats
				}
				if c.seen[h.Content] > 0 {
					t.Errorf("history %.40q counted, with its estimate cached", h.Content)
				}
			}
			for _, k := range req.Knowledge {
				if c.seen[RenderedKnowledge(k.Content)] > 0 || c.seen[strings.TrimSpace(k.Content)] > 0 {
					t.Errorf("knowledge %.40q counted, with its estimate cached", k.Content)
				}
			}
		})
	}
}

// TestAssemble_EstimatesOfAnotherRuleAreNotTaken: counts cached under another key than
// tokenizer.EstimateKey (an earlier rule's, an encoding's) are not taken for estimates, however wrong:
// the texts are estimated again, and the result is the one made with no counts cached.
func TestAssemble_EstimatesOfAnotherRuleAreNotTaken(t *testing.T) {
	t.Parallel()
	fresh := estimateRequest("gpt-4o", Gemini)
	fresh.DropTokenCounts()
	want, err := AssembleRequest(context.Background(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	req := estimateRequest("gpt-4o", Gemini)
	for i := range req.History {
		req.History[i].TokenCounts = map[string]int{"estimate/0": 1, "estimate": 1, tokenizer.O200KBase: 1}
	}
	for i := range req.Knowledge {
		req.Knowledge[i].TokenCounts = map[string]int{KnowledgeCountKey("estimate/0"): 1, KnowledgeCountKey(tokenizer.O200KBase): 1,
			tokenizer.EstimateKey: 1} // an estimate of the content, not of its rendering
	}
	got, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := resultJSON(t, got), resultJSON(t, want); g != w {
		t.Fatalf("with counts of other rules:\n%s\nall counted:\n%s", g, w)
	}
}

func resultJSON(t *testing.T, res *Result) string {
	t.Helper()
	b, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
