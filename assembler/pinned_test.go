package assembler

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestPlan_CostsMemoryWrappers: the planner costs the <user_memory> wrappers (and the blank line before
// pinned memory) with the items, so that the items it chooses render within the budget before the
// verification has anything to drop, for memory of many small items, pinned and not, in every format of
// Loom's markup and at every budget.
func TestPlan_CostsMemoryWrappers(t *testing.T) {
	t.Parallel()
	var mem []MemoryFact
	for i := range 120 {
		mem = append(mem, MemoryFact{Key: fmt.Sprint("k", i), Value: "v", Pinned: i%3 != 0})
	}
	for _, format := range []string{FormatOpenAI, FormatAnthropic, FormatText, FormatResponses, FormatGemini} {
		for _, instructions := range []string{"", "Be brief."} {
			for maxTokens := 40; maxTokens < 1400; maxTokens += 13 {
				req := &Request{Format: format, Model: "gpt-4o", MaxTokens: maxTokens, ReserveOutput: 1, Instructions: instructions, Memory: mem, Message: "hi"}
				a, err := newAssembly(req)
				if err != nil {
					t.Fatal(err)
				}
				a.scratch = getScratch()
				out, err := a.choose(context.Background())
				var be *BudgetError
				switch {
				case errors.As(err, &be):
				case err != nil:
					t.Fatal(err)
				case out.total > a.budget:
					t.Fatalf("%s, %q, max_tokens %d: the plan renders %d tokens, over the budget of %d", format, instructions, maxTokens, out.total, a.budget)
				}
				a.release()
			}
		}
	}
}
