package cachesim

import (
	"testing"

	"github.com/context-loom/loom"

	"github.com/context-loom/loom/assembler"
)

// TestRunFormats_StableBetweenCutMoves pins the formats' figures of the conversation loosely: in
// every format, no request carries more than 4 breakpoints, the anthropic format places some once the
// history reaches the model's minimum, at least 90% of the turns whose cut did not move find the previous
// turn's cached prefix again byte for byte, the cut does move on a budget too small for the whole history,
// and Loom's own cache report says what the bytes show on every turn.
func TestRunFormats_StableBetweenCutMoves(t *testing.T) {
	t.Parallel()
	figs, err := RunFormats(t.Context(), Config{Turns: 60, Budget: 3000})
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != len(Formats) {
		t.Fatalf("%d formats measured, want %d", len(figs), len(Formats))
	}
	for _, f := range figs {
		t.Logf("%s: breakpoints %d, cut moves %d, stable %.3f, share %.3f, report agrees %.3f", f.Format, f.MaxBreakpoints, f.CutMoves, f.Stable, f.MeanShare, f.ReportAgrees)
		if f.MaxBreakpoints > assembler.MaxCacheBreakpoints {
			t.Errorf("%s: %d breakpoints on a turn", f.Format, f.MaxBreakpoints)
		}
		if (f.MaxBreakpoints > 0) != (f.Format == assembler.FormatAnthropic) {
			t.Errorf("%s: at most %d breakpoints a turn", f.Format, f.MaxBreakpoints)
		}
		if f.CutMoves == 0 {
			t.Errorf("%s: the cut never moved: the test does not trim", f.Format)
		}
		if f.Format != "cookbook" && f.Stable < 0.9 {
			t.Errorf("%s: %.3f of the turns between cut moves fully stable, want at least 0.9", f.Format, f.Stable)
		}
		if f.ReportAgrees != 1 {
			for _, turn := range f.Turns {
				t.Logf("%+v", turn)
			}
			t.Errorf("%s: the report agrees with the bytes on %.3f of the turns", f.Format, f.ReportAgrees)
		}
	}
}

// TestRunFormats_ReportSeesClearedResults: with older tool results cleared, the history is rewritten
// without its cut moving (in the openai format, on some turns); Loom's report says what the bytes show on
// every turn of every format.
func TestRunFormats_ReportSeesClearedResults(t *testing.T) {
	t.Parallel()
	figs, err := RunFormats(t.Context(), Config{Turns: 40, Budget: 3000, Policy: &loom.Policy{KeepToolResults: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figs {
		rewritten := 0
		for _, turn := range f.Turns {
			if turn.Report.Reason == assembler.CacheHistoryRewritten {
				rewritten++
			}
		}
		if f.Format == assembler.FormatOpenAI && rewritten == 0 { // elsewhere a clearing may come with a cut

			t.Errorf("%s: no turn's history rewritten by clearing", f.Format)
		}
		if f.ReportAgrees != 1 {
			t.Errorf("%s: the report agrees with the bytes on %.3f of the turns", f.Format, f.ReportAgrees)
		}
	}
}
