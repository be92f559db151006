package main

import (
	"os"
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

func TestRun_FormatsPrintsARowPerFormat(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	csv := t.TempDir() + "/turns.csv"
	if err := run(t.Context(), []string{"-formats", "-turns", "20", "-budget", "1500", "-per-turn", csv}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| openai |", "| responses |", "| anthropic |", "| gemini |", "| text |", "| cookbook |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 1+6*20 {
		t.Errorf("the CSV has %d lines, want a header and 120 turns", n)
	}
}
