package assembler

import (
	"context"
	"errors"
	"strconv"
	"strings"
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

// TestPromptBudget_MaxTokensWithinTheWindow: an explicit max_tokens may not be more than a known model's
// window leaves after the reserved output; a model without a window (not from the registry) takes any.
func TestPromptBudget_MaxTokensWithinTheWindow(t *testing.T) {
	t.Parallel()
	m, err := tokenizer.ForModel("gpt-4") // a window of 8192; 2048 (a quarter) reserved by default
	if err != nil {
		t.Fatal(err)
	}
	limit := m.ContextWindow - min(m.MaxOutputTokens, m.ContextWindow/4)
	if b, err := PromptBudget(m, limit, 0, 0); err != nil || b != limit {
		t.Errorf("max_tokens %d, the most the window leaves: %d %v", limit, b, err)
	}
	_, err = PromptBudget(m, 1_000_000, 0, 0)
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "1000000") || !strings.Contains(err.Error(), strconv.Itoa(limit)) {
		t.Errorf("max_tokens 1000000 for gpt-4: %v, want an invalid request naming 1000000 and %d", err, limit)
	}
	if _, err := PromptBudget(m, limit+1, 0, 0); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("max_tokens %d: %v", limit+1, err)
	}
	// An explicit reservation moves the limit.
	if b, err := PromptBudget(m, m.ContextWindow-1000, 1000, 0); err != nil || b != m.ContextWindow-1000 {
		t.Errorf("max_tokens with reserve_output 1000: %d %v", b, err)
	}
	if _, err := PromptBudget(m, m.ContextWindow-999, 1000, 0); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("max_tokens past reserve_output 1000: %v", err)
	}
	// A model not from the registry, without a window: today's behaviour.
	if b, err := PromptBudget(tokenizer.Model{Name: "custom"}, 1_000_000, 0, 0); err != nil || b != 1_000_000 {
		t.Errorf("a model without a window: %d %v", b, err)
	}
	// The request's error says the same.
	_, err = AssembleRequest(context.Background(), &Request{Model: "gpt-4", MaxTokens: 1_000_000, Message: "Hi"})
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "1000000") {
		t.Errorf("AssembleRequest with max_tokens 1000000 for gpt-4: %v", err)
	}
}
