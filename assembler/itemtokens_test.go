package assembler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// itemTokens is the tokens the report gives each item of a region, kept or dropped, by its id.
func itemTokens(r RegionReport) map[string]int {
	m := make(map[string]int, len(r.Included)+len(r.Dropped))
	for i, id := range r.Included {
		m[id] = r.IncludedTokens[i]
	}
	return m
}

// TestReport_ItemTokens: every kept item has its tokens, counting the dropped ones changes nothing that
// is sent, every dropped candidate is counted when asked, and an item costs the same whether it is kept
// or dropped: an assembly that keeps it reports the tokens another reported it dropped with.
func TestReport_ItemTokens(t *testing.T) {
	t.Parallel()
	for fi, format := range testFormats {
		t.Run(fmt.Sprint(fi, format.Name()), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(29, uint64(fi)))
			compared, counted := 0, 0
			for range 120 {
				req := formatRequest(rng, format)
				res := assembleIfItFits(t, req)
				if res == nil {
					continue
				}
				counting := *req
				counting.CountDropped = true
				all, err := AssembleRequest(context.Background(), &counting)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(all.Messages, res.Messages) || !reflect.DeepEqual(all.Contents, res.Contents) ||
					all.System != res.System || all.TotalTokens != res.TotalTokens {
					t.Fatalf("counting the dropped items changed the output: %d tokens against %d", all.TotalTokens, res.TotalTokens)
				}
				// Without a budget of its own, the request keeps what it can of the window.
				roomy := counting
				roomy.MaxTokens = 0
				wide, err := AssembleRequest(context.Background(), &roomy)
				if err != nil {
					t.Fatal(err)
				}
				for ri := range all.Report.Regions {
					r, plain := &all.Report.Regions[ri], &res.Report.Regions[ri]
					if len(r.IncludedTokens) != len(r.Included) || !reflect.DeepEqual(r.IncludedTokens, plain.IncludedTokens) {
						t.Fatalf("%s: included %v with tokens %v (without counting the dropped: %v)", r.Name, r.Included, r.IncludedTokens, plain.IncludedTokens)
					}
					for i, n := range r.IncludedTokens {
						if n < 0 || (n == 0 && r.Name != RegionMessage) {
							t.Errorf("%s: %s kept with %d tokens", r.Name, r.Included[i], n)
						}
					}
					for i, d := range r.Dropped {
						if p := plain.Dropped[i]; p.ID != d.ID || p.Reason != d.Reason || (p.Tokens >= 0 && p.Tokens != d.Tokens) || p.Tokens < -1 {
							t.Errorf("%s: dropped %+v when counting, %+v when not", r.Name, d, p)
						}
						switch {
						case d.Reason == ReasonMinScore:
							if d.Tokens != -1 {
								t.Errorf("%s: %+v: an item below the minimum score is never counted", r.Name, d)
							}
						case d.Reason == ReasonEmpty && d.Tokens != 0, d.Tokens < 0:
							t.Errorf("%s: %+v not counted, with CountDropped", r.Name, d)
						}
						if d.Reason != ReasonBudget && d.Reason != ReasonStep {
							continue
						}
						counted++
						wr := findReport(wide, r.Name)
						if n, ok := itemTokens(wr)[d.ID]; ok {
							compared++
							if n != d.Tokens {
								t.Errorf("%s: %s dropped with %d tokens, kept with %d", r.Name, d.ID, d.Tokens, n)
							}
						}
					}
				}
			}
			if compared < 20 {
				t.Errorf("only %d of %d items dropped for the budget were kept by a wider budget", compared, counted)
			}
		})
	}
}

// TestReport_ItemTokensAddUp: in the openai format, the history's messages add up to the region's used
// tokens, and a tool alone costs what the tools region holds less the rule's overhead.
func TestReport_ItemTokensAddUp(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(31, 0))
	for range 100 {
		res := assembleIfItFits(t, formatRequest(rng, OpenAI))
		if res == nil {
			continue
		}
		h, sum := findReport(res, RegionHistory), 0
		for _, n := range h.IncludedTokens {
			sum += n
		}
		if sum != h.Used {
			t.Fatalf("history: %v add up to %d, used %d", h.IncludedTokens, sum, h.Used)
		}
	}

	req := seed003()
	req.Instructions = ""
	tool := Tool{Type: "function", Function: ToolFunction{Name: "upgrade", Description: "Upgrade the plan to another.",
		Parameters: []byte(`{"type":"object","properties":{"plan":{"type":"string","enum":["free","premium"]}}}`)}}
	req.Tools = []Tool{tool}
	res, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	model, _ := tokenizer.ForModel(res.Model)
	tools := findReport(res, RegionTools)
	hasSystem := slices.ContainsFunc(res.Messages, func(m ChatMessage) bool { return m.Role == "system" }) // the context's
	if want := tools.Used - model.Tools.DefinitionOverhead(hasSystem); len(tools.IncludedTokens) != 1 || tools.IncludedTokens[0] != want {
		t.Fatalf("one tool: %v tokens, the region %d less the overhead = %d", tools.IncludedTokens, tools.Used, want)
	}
	// Two tools: each its own, the longer the more; and a caller's change of the report is its own.
	long := tool
	long.Function.Name, long.Function.Description = "downgrade", "Downgrade the plan to another, at the end of the month that has been paid for."
	req.Tools = []Tool{tool, long}
	res, err = AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := itemTokens(findReport(res, RegionTools))
	if got["upgrade"] != tools.IncludedTokens[0] || got["downgrade"] <= got["upgrade"] {
		t.Fatalf("two tools: %v, upgrade alone %d", got, tools.IncludedTokens[0])
	}
	findReport(res, RegionTools).IncludedTokens[0] = -5
	again, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(itemTokens(findReport(again, RegionTools)), got) {
		t.Fatalf("a changed report changed the next: %v", findReport(again, RegionTools).IncludedTokens)
	}
}
