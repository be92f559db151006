package main

import (
	"strings"
	"testing"
)

func TestRun_PrintsARowPerTrim(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(t.Context(), []string{"-turns", "30", "-budget", "1500", "-seeds", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| turns |", "| steps, floor 0.3 (default) |", "30 turns, ~150 tokens a message"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if err := run(t.Context(), []string{"-turns", "1"}, &out); err == nil {
		t.Error("-turns 1 is taken")
	}
}
