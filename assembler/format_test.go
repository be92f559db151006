package assembler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/context-loom/loom"
)

// planState writes down everything of a plan that planning decides: the history's turns and where the
// kept ones start, each item's choice, texts and counts, the knowledge's order and markers, the drops.
func planState(a *assembly) string {
	var b strings.Builder
	fmt.Fprintf(&b, "keepFrom %d message %q %v reserve %d instructions %v\n", a.keepFrom, a.message, a.hasMessage, a.reserve, a.instructionIDs)
	for _, g := range a.turns {
		fmt.Fprintf(&b, "turn %d+%d cost %d orphaned %v\n", g.first, g.n, g.cost, g.orphaned)
	}
	for i, p := range a.contents {
		fmt.Fprintf(&b, "content %d %q %d\n", i, p.Text, p.Tokens)
	}
	for _, r := range []Region{RegionMemory, RegionToolOutputs, RegionKnowledge} {
		for _, it := range a.items(r) {
			fmt.Fprintf(&b, "%s %s kept %v required %v dup %q cost %d lower %d raw %v order %d rank %d", r, it.id, it.kept, it.required, it.dup, it.cost, it.lower, it.raw, it.order, it.rank)
			for _, p := range it.parts {
				fmt.Fprintf(&b, " [%q %d]", p.Text, p.Tokens)
			}
			if it.ref != nil {
				fmt.Fprintf(&b, " marker %d", it.ref.Marker)
			}
			b.WriteByte('\n')
		}
	}
	for _, it := range a.cited {
		fmt.Fprintf(&b, "cited %s\n", it.id)
	}
	for r, d := range a.dropped {
		fmt.Fprintf(&b, "dropped %s %v\n", Region(r), d)
	}
	return b.String()
}

// TestFormat_RenderDoesNotChangeThePlan: for every format, once a request is planned (and planned again
// after an item is dropped), rendering the plan changes nothing of it, and gives the same output, to the
// token and to the region.
func TestFormat_RenderDoesNotChangeThePlan(t *testing.T) {
	t.Parallel()
	for i, format := range testFormats {
		t.Run(fmt.Sprint(i, format.Name()), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(31, uint64(i)))
			planned := 0
			for range 150 {
				req := formatRequest(r, format)
				a, err := newAssembly(req)
				if err != nil {
					continue
				}
				func() {
					a.scratch = getScratch()
					defer a.release()
					_, err := a.plan(context.Background())
					var be *BudgetError
					if errors.As(err, &be) || errors.Is(err, ErrInvalidRequest) {
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					planned++
					// Drop one more item and settle the plan again: rendering it then changes nothing.
					if a.dropOne() {
						a.f.settle(a)
					}
					before := planState(a)
					var first *output
					for range 2 {
						again := &output{}
						again.reset(a)
						a.f.render(a, again)
						if after := planState(a); after != before {
							t.Fatalf("rendering changed the plan:\n%s\nto\n%s", before, after)
						}
						if first == nil {
							first = again
							continue
						}
						if !reflect.DeepEqual(again.messages, first.messages) || again.system != first.system || again.text != first.text ||
							again.context != first.context || again.prefix != first.prefix || !reflect.DeepEqual(again.tools, first.tools) {
							t.Fatalf("a second rendering differs:\n%+v\n%+v", again, first)
						}
						if again.total != first.total || again.regionsUsed() != first.regionsUsed() {
							t.Fatalf("a second rendering counts %d %v, the first %d %v", again.total, again.regionsUsed(), first.total, first.regionsUsed())
						}
					}
				}()
			}
			if planned < 50 {
				t.Errorf("only %d of 150 requests planned", planned)
			}
		})
	}
}

// testFormats are the formats every property test covers.
var testFormats = []Format{OpenAI, Anthropic, Text, &Cookbook{}, &Cookbook{Agent: &loom.Agent{Instructions: "You help.", Constraints: "Be brief."}}, Responses, Gemini}

// inFormat makes req a request in format: the cookbook format takes no tools.
func inFormat(req *Request, format Format) {
	req.Format, req.Formatter = "", format
	if _, ok := format.(*Cookbook); ok {
		req.Tools = nil
	}
}

// formatRequest is a varied random request for format.
func formatRequest(r *rand.Rand, format Format) *Request {
	req := variedRandomRequest(r, "")
	inFormat(req, format)
	return req
}
