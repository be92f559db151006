// Command cachesim measures how the history's trim keeps the prompt cacheable: it plays a conversation of
// 200 turns (about 150 tokens a message, a tool exchange every 5th turn) assembled each turn into a budget
// of 4,000 tokens, with the history cut a turn at a time ("turns") and in steps ("steps", at several
// floors, and with older tool results cleared), and prints for each: the turns whose first kept history
// message changes, the mean share of each turn's prompt that the turn before's starts with (cacheable),
// and the mean share of the history's budget that the kept history uses on the turns that trim it.
//
// With -formats, it plays the conversation instead in each format (openai, responses, anthropic, gemini,
// text, and the cookbook preset's messages), with the default policy and a tool that the history calls,
// and prints for each: the most cache breakpoints a turn's request carries (anthropic's cache_control;
// never above 4), the turns whose kept history starts elsewhere than the turn before's (cut moves), the
// share of the other turns whose previous prompt, up to its cache point (its last breakpoint, or for the
// formats that cache automatically the end of its history), starts the turn's prompt byte for byte, the
// mean of that share in tokens, and how often Loom's own cache report (Result.Cache) agrees with the
// bytes; -per-turn FILE writes every turn of every format as CSV.
//
// Usage:
//
//	go run ./scripts/cachesim [-turns 200] [-tokens 150] [-tool-every 5] [-budget 4000] [-seeds 3]
//	go run ./scripts/cachesim -formats [-per-turn FILE.csv] [-turns 200] [-tokens 150] [-tool-every 5] [-budget 4000]
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

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
	formats := fs.Bool("formats", false, "measure each format's cache stability instead")
	perTurn := fs.String("per-turn", "", "with -formats, write every turn to this CSV `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *turns < 2 || *tokens < 1 || *toolEvery < 1 || *budget < 1 || *seeds < 1 {
		return fmt.Errorf("-turns must be at least 2, and -tokens, -tool-every, -budget and -seeds at least 1")
	}
	if *formats {
		return runFormats(ctx, cachesim.Config{Turns: *turns, MessageTokens: *tokens, ToolEvery: *toolEvery, Budget: *budget}, *perTurn, stdout)
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

// runFormats prints the -formats table, and writes the turns to perTurn if it is not "".
func runFormats(ctx context.Context, c cachesim.Config, perTurn string, stdout io.Writer) error {
	figs, err := cachesim.RunFormats(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d turns, ~%d tokens a message, a tool exchange every %d turns, %d-token budget, the default policy\n\n",
		orDefault(c.Turns, 200), orDefault(c.MessageTokens, 150), orDefault(c.ToolEvery, 5), orDefault(c.Budget, 4000))
	fmt.Fprintln(stdout, "| format | most breakpoints a turn | cut moves | turns fully stable between cut moves | mean share of the cached prefix kept | Loom's report agrees |")
	fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, f := range figs {
		fmt.Fprintf(stdout, "| %s | %d | %d | %.1f%% | %.1f%% | %.1f%% |\n", f.Format, f.MaxBreakpoints, f.CutMoves, 100*f.Stable, 100*f.MeanShare, 100*f.ReportAgrees)
	}
	if perTurn == "" {
		return nil
	}
	file, err := os.Create(perTurn)
	if err != nil {
		return err
	}
	w := csv.NewWriter(file)
	_ = w.Write([]string{"format", "turn", "breakpoints", "cached_tokens", "shared_tokens", "share", "cut_moved", "report_shared_tokens", "report_region", "report_reason"})
	for _, f := range figs {
		for _, t := range f.Turns {
			_ = w.Write([]string{f.Format, strconv.Itoa(t.Turn), strconv.Itoa(t.Breakpoints), strconv.Itoa(t.CachedTokens), strconv.Itoa(t.SharedTokens),
				strconv.FormatFloat(t.Share, 'f', 4, 64), strconv.FormatBool(t.CutMoved), strconv.Itoa(t.Report.SharedTokens), t.Report.Region, t.Report.Reason})
		}
	}
	w.Flush()
	return errors.Join(w.Error(), file.Close())
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
