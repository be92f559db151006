package cachesim

import (
	"testing"

	"github.com/context-loom/loom"
)

// TestRun_StepsKeepThePrefix pins the figures of the conversation loosely, so that a change that
// loses the history's cache stability fails: 200 turns (~150 tokens a message, a tool exchange every 5th)
// into 4,000 tokens, where cutting in steps changes the first kept message at least 4 times less often than
// cutting a turn at a time, and into 16,000 tokens, where it meets the goals: 10 times less often,
// at least 80% of each prompt cacheable on average, at least 60% of the history's budget used.
func TestRun_StepsKeepThePrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		budget                  int
		fewer, cacheable, usedX float64
	}{
		{4000, 4, 0.7, 0.6},
		{16000, 10, 0.8, 0.6},
	} {
		turns, err := Run(t.Context(), Config{Budget: tc.budget, Policy: &loom.Policy{HistoryTrim: loom.HistoryTrimTurns}})
		if err != nil {
			t.Fatal(err)
		}
		steps, err := Run(t.Context(), Config{Budget: tc.budget})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d tokens: turns %+v, steps %+v", tc.budget, turns, steps)
		if turns.Trimmed < 100 || turns.PrefixChanges < 100 || turns.HistoryUsed < 0.9 {
			t.Fatalf("%d tokens: cut by turns %+v: the conversation does not fill its budget as it should", tc.budget, turns)
		}
		if float64(steps.PrefixChanges)*tc.fewer > float64(turns.PrefixChanges) {
			t.Errorf("%d tokens: %d changes in steps, %d by turns: want %.0f times fewer", tc.budget, steps.PrefixChanges, turns.PrefixChanges, tc.fewer)
		}
		if steps.Cacheable < tc.cacheable || steps.Cacheable < 2*turns.Cacheable {
			t.Errorf("%d tokens: %.3f cacheable in steps (%.3f by turns), want at least %.2f", tc.budget, steps.Cacheable, turns.Cacheable, tc.cacheable)
		}
		if steps.HistoryUsed < tc.usedX {
			t.Errorf("%d tokens: steps use %.3f of the history's budget, want at least %.2f", tc.budget, steps.HistoryUsed, tc.usedX)
		}
	}
}
