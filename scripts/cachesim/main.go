// Command cachesim measures how the history's trim keeps the prompt cacheable: it plays a conversation of
// 200 turns (about 150 tokens a message, a tool exchange every 5th turn) assembled each turn into a budget
// of 4,000 tokens, with the history cut a turn at a time ("turns") and in steps ("steps", at several
// floors, and with older tool results cleared), and prints for each: the turns whose first kept history
// message changes, the mean share of each turn's prompt that the turn before's starts with (cacheable),
// and the mean share of the history's budget that the kept history uses on the turns that trim it.
//
// Usage:
//
//	go run ./scripts/cachesim [-turns 200] [-tokens 150] [-tool-every 5] [-budget 4000] [-seeds 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/internal/cachesim"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cachesim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cachesim", flag.ContinueOnError)
	turns := fs.Int("turns", 200, "turns of the conversation")
	tokens := fs.Int("tokens", 150, "tokens a message, about")
	toolEvery := fs.Int("tool-every", 5, "a tool exchange every this many turns")
	budget := fs.Int("budget", 4000, "the prompt's budget in tokens")
	seeds := fs.Int("seeds", 3, "conversations to average over")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *turns < 2 || *tokens < 1 || *toolEvery < 1 || *budget < 1 || *seeds < 1 {
		return fmt.Errorf("-turns must be at least 2, and -tokens, -tool-every, -budget and -seeds at least 1")
	}
	rows := []struct {
		name   string
		policy *loom.Policy
	}{
		{"turns", &loom.Policy{HistoryTrim: loom.HistoryTrimTurns}},
		{"steps, floor 0.2", &loom.Policy{HistoryFloor: 0.2}},
		{"steps, floor 0.3 (default)", nil},
		{"steps, floor 0.4", &loom.Policy{HistoryFloor: 0.4}},
		{"steps, floor 0.5", &loom.Policy{HistoryFloor: 0.5}},
		{"steps, floor 0.7", &loom.Policy{HistoryFloor: 0.7}},
		{"turns, keep_tool_results 1", &loom.Policy{HistoryTrim: loom.HistoryTrimTurns, KeepToolResults: 1}},
		{"steps, keep_tool_results 1", &loom.Policy{KeepToolResults: 1}},
		{"steps, clear_tool_results_over 100", &loom.Policy{ClearToolResultsOver: 100}},
	}
	fmt.Fprintf(stdout, "%d turns, ~%d tokens a message, a tool exchange every %d turns, %d-token budget, mean of %d conversations\n\n",
		*turns, *tokens, *toolEvery, *budget, *seeds)
	first, err := cachesim.Run(ctx, cachesim.Config{Turns: *turns, MessageTokens: *tokens, ToolEvery: *toolEvery, Budget: *budget,
		Policy: &loom.Policy{HistoryTrim: loom.HistoryTrimTurns}})
	if err != nil {
		return err
	}
	// Between two changes of its first message, a kept history of at most H tokens grows by g a turn: k
	// turns apart, it holds at most H-(k-1)g after the change, and uses at most 1-(k-1)g/2H of H on average.
	// Ten times fewer changes than cutting by turns is k = 10 x trimmed turns / their changes.
	h, g := first.HistoryBudget, first.TurnTokens
	k := 10 * float64(first.Trimmed) / float64(max(first.PrefixChanges, 1))
	fmt.Fprintf(stdout, "History budget H = %.0f tokens; a turn adds g = %.0f. A trim whose first message changes every k turns keeps at most\n"+
		"H-(k-1)g after a change and uses at most 1-(k-1)g/2H of H on average. Ten times fewer changes than by turns\n"+
		"(%d in %d trimmed turns) is k = %.1f: at most %.0f%% used, whatever the rule (and no rule reaches k > H/g+1 = %.1f).\n\n",
		h, g, first.PrefixChanges, first.Trimmed, k, 100*(1-(k-1)*g/(2*h)), h/g+1)
	fmt.Fprintln(stdout, "| trim | turns trimmed | first kept message changes | cacheable prefix | history budget used |")
	fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: | ---: |")
	for _, row := range rows {
		var sum cachesim.Figures
		for seed := range *seeds {
			f, err := cachesim.Run(ctx, cachesim.Config{Turns: *turns, MessageTokens: *tokens, ToolEvery: *toolEvery, Budget: *budget,
				Seed: uint64(seed), Policy: row.policy})
			if err != nil {
				return err
			}
			sum.Trimmed += f.Trimmed
			sum.PrefixChanges += f.PrefixChanges
			sum.Cacheable += f.Cacheable
			sum.HistoryUsed += f.HistoryUsed
		}
		n := float64(*seeds)
		fmt.Fprintf(stdout, "| %s | %.1f | %.1f | %.1f%% | %.1f%% |\n", row.name, float64(sum.Trimmed)/n, float64(sum.PrefixChanges)/n,
			100*sum.Cacheable/n, 100*sum.HistoryUsed/n)
	}
	return nil
}
