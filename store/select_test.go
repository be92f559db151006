package store_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// randomSession is n messages with seqs from 1, some with tool calls, and the seqs a backend could not
// decode (gaps, as in the Valkey cookbook layout).
func randomSession(r *rand.Rand, n int) (msgs []store.Message, gaps map[int64]bool) {
	gaps = map[int64]bool{}
	for i := range n {
		seq := int64(i + 1)
		if r.IntN(7) == 0 {
			gaps[seq] = true
			continue
		}
		m := store.Message{Seq: seq, Role: "user", Content: strings.Repeat("word ", r.IntN(40)) + strings.Repeat(" ", r.IntN(90))}
		if r.IntN(4) == 0 {
			m.Role = "assistant"
			m.ToolCalls = []assembler.ToolCall{{ID: "c", Type: "function", Function: assembler.ToolCallFunction{Name: "f",
				Arguments: `{"a":"` + strings.Repeat("<", r.IntN(900)) + `"}`}}}
		}
		if r.IntN(3) > 0 { // cached counts, as stores keep them; the others are counted when read
			m.TokenCounts = map[string]int{tokenizer.O200KBase: tokenizer.O200K().Count(m.Content)}
		}
		msgs = append(msgs, m)
	}
	return msgs, gaps
}

// TestReadNewest_SelectsAsSelectMessages: whatever the query and wherever the gaps, reading by pages
// returns what SelectMessages returns from the whole session, and the before of the rest, which
// SelectPage returns too; and it never asks for more pages than it needs.
func TestReadNewest_SelectsAsSelectMessages(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 400 {
		n := r.IntN(300)
		msgs, gaps := randomSession(r, n)
		q := store.MessageQuery{Limit: r.IntN(4) * r.IntN(60), MaxTokens: r.IntN(3) * r.IntN(2000),
			Encoding: []string{"", tokenizer.CL100KBase, store.EstimateEncoding}[r.IntN(3)], CountToolCalls: r.IntN(2) == 0}
		if r.IntN(3) == 0 {
			q.Before = int64(r.IntN(n + 20))
		}
		reads := 0
		read := func(before int64, size int) ([]store.Message, int64, error) {
			reads++
			if size < 1 {
				t.Fatalf("round %d: a page of %d", round, size)
			}
			top := int64(n) + 1
			if before > 0 && before < top {
				top = before
			}
			from := int64(1)
			if size < math.MaxInt {
				from = max(top-int64(size), 1)
			}
			var page []store.Message
			for _, m := range msgs {
				if m.Seq >= from && m.Seq < top && !gaps[m.Seq] {
					page = append(page, m)
				}
			}
			if from == 1 {
				return page, 0, nil
			}
			return page, from, nil
		}
		got, next, err := store.ReadNewest(q, read)
		if err != nil {
			t.Fatal(err)
		}
		want, wantNext := store.SelectPage(msgs, q)
		if !slices.EqualFunc(got, want, func(a, b store.Message) bool { return a.Seq == b.Seq }) {
			t.Fatalf("round %d, %+v: %v, want %v", round, q, seqs(got), seqs(want))
		}
		// SelectPage knows no gaps: the before of the rest may differ by gaps, which read nothing.
		if !allGaps(gaps, min(next, wantNext), max(next, wantNext)) {
			t.Fatalf("round %d, %+v: next before %d, want %d", round, q, next, wantNext)
		}
		if q.MaxTokens == 0 && len(gaps) == 0 && reads != 1 {
			t.Fatalf("round %d, %+v: %d reads without MaxTokens", round, q, reads)
		}
	}
}

func allGaps(gaps map[int64]bool, from, to int64) bool {
	for seq := max(from, 1); seq < to; seq++ {
		if !gaps[seq] {
			return false
		}
	}
	return true
}

func seqs(msgs []store.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

// TestMessageTokens_BoundsWhatAssembliesKeep: the messages an assembly keeps of a history cost no more,
// as MessageTokens counts them (in the model's encoding, tool calls counted), than the budget, in every
// format, even at the least budget that keeps them all: so a history read only as far as its budget's
// worth holds every message an assembly can keep.
func TestMessageTokens_BoundsWhatAssembliesKeep(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for round := range sweep(150) {
		format := []string{assembler.FormatOpenAI, assembler.FormatAnthropic, assembler.FormatText}[r.IntN(3)]
		model := []string{"gpt-4o", "gpt-4", "claude-sonnet-4-5"}[r.IntN(3)]
		mdl, _ := tokenizer.ForModel(model)
		enc := mdl.Encoding
		if enc == "" {
			enc = store.EstimateEncoding
		}
		spaces := 10_000 // an estimate prices a run of spaces at a token or two: long ones test its floor
		if enc == store.EstimateEncoding {
			spaces = 100_000
		}
		history := []store.Message{{Role: "user", Content: "hi"}}
		for i := range 1 + r.IntN(4) {
			m := store.Message{Role: []string{"user", "assistant", "system"}[r.IntN(3)], Content: strings.Repeat("é <x> ", r.IntN(40)) + "end"}
			history = append(history, m)
			if m.Role == "assistant" && r.IntN(3) > 0 {
				history[len(history)-1].Content = ""
				id := fmt.Sprint("call_", i)
				// Text that JSON escapes, or runs of spaces, the longest tokens there are.
				args := `{"q":"` + strings.Repeat(`\"\u0001<&>`, r.IntN(1500)) + `"}`
				if r.IntN(2) == 0 {
					args = `{"q":"` + strings.Repeat(" ", r.IntN(spaces)) + `"}`
				}
				history[len(history)-1].ToolCalls = []assembler.ToolCall{{ID: id, Type: "function", Function: assembler.ToolCallFunction{
					Name: "lookup", Arguments: args}}}
				history = append(history, store.Message{Role: "tool", ToolCallID: id, Content: "found"})
			}
		}
		history = append(history, store.Message{Role: "user", Content: "and now?"})
		in := make([]assembler.Message, len(history))
		copy(in, history)
		// kept assembles with the budget and returns it and what MessageTokens counts for the history kept,
		// or -1 if it did not keep all of it.
		kept := func(budget int) (int, int) {
			res, err := assembler.AssembleRequest(t.Context(), &assembler.Request{Model: model, Format: format, MaxTokens: budget, History: in, Message: "ok"})
			if err != nil {
				return budget, -1
			}
			sum, n := 0, 0
			for _, reg := range res.Report.Regions {
				if reg.Name != assembler.RegionHistory {
					continue
				}
				for _, id := range reg.Included {
					var i int
					if _, err := fmt.Sscanf(id, "history[%d]", &i); err != nil {
						t.Fatal(err)
					}
					sum += store.MessageTokens(history[i], enc, true)
					n++
				}
			}
			if n < len(history) {
				return res.Budget, -1
			}
			return res.Budget, sum
		}
		lo, hi := 1, 6000 // the least budget that keeps it all is in (lo, hi]
		if _, sum := kept(hi); sum < 0 {
			continue
		}
		for lo+1 < hi {
			if mid := (lo + hi) / 2; func() bool { _, sum := kept(mid); return sum >= 0 }() {
				hi = mid
			} else {
				lo = mid
			}
		}
		if budget, sum := kept(hi); sum > budget {
			t.Fatalf("round %d, %s, %s: the kept history counts %d, more than the budget of %d", round, format, model, sum, budget)
		}
	}
}
