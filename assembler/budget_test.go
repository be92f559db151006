package assembler

import (
	"errors"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

func TestPromptBudget(t *testing.T) {
	t.Parallel()
	m, err := tokenizer.ForModel("gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := PromptBudget(m, 4000, 0, 0); err != nil || b != 4000 {
		t.Errorf("an explicit budget: %d %v", b, err)
	}
	want := m.ContextWindow - min(m.MaxOutputTokens, m.ContextWindow/4) - m.ContextWindow/100
	if b, err := PromptBudget(m, 0, 0, 0); err != nil || b != want {
		t.Errorf("the window's budget: %d %v, want %d", b, err, want)
	}
	if b, _ := PromptBudget(m, 0, 1000, 10); b != m.ContextWindow-1010 {
		t.Errorf("with a reserve and a margin: %d", b)
	}
	for _, args := range [][3]int{{-1, 0, 0}, {0, -1, 0}, {0, m.ContextWindow, 0}} {
		if _, err := PromptBudget(m, args[0], args[1], args[2]); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("PromptBudget(%v): %v", args, err)
		}
	}
}
