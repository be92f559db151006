package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// randomTurns appends n random turns: a user message, then a reply, some with tool exchanges of one or
// two calls, of random lengths.
func randomTurns(t *testing.T, r *rand.Rand, st *store.Store, session string, n int, next *int) {
	t.Helper()
	words := func() string { return strings.Repeat("word ", 5+r.IntN(120)) }
	for range n {
		*next++
		msgs := []store.Message{{Role: "user", Content: fmt.Sprintf("turn %d <&> %s", *next, words())}}
		for range r.IntN(3) { // tool exchanges
			calls := 1 + r.IntN(2)
			asst := store.Message{Role: "assistant"}
			var results []store.Message
			for c := range calls {
				id := fmt.Sprintf("call_%d_%d_%d", *next, len(msgs), c)
				asst.ToolCalls = append(asst.ToolCalls, loom.ToolCall{ID: id, Type: "function", Function: loom.ToolCallFunction{Name: "lookup", Arguments: `{"q":"x"}`}})
				results = append(results, store.Message{Role: "tool", ToolCallID: id, Content: "result " + words()})
			}
			msgs = append(append(msgs, asst), results...)
		}
		if r.IntN(4) > 0 {
			msgs = append(msgs, store.Message{Role: "assistant", Content: "answer " + words()})
		}
		if _, err := st.AppendMessages(context.Background(), loom.DefaultTenant, session, msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompaction_EveryMessageAccountedFor: for random sessions with tool exchanges, after any sequence
// of appends and compactions, every message an assembly read is verbatim in it, covered by the summary's
// range, or reported dropped with its reason, never two of these; the summary never ends inside a tool
// exchange; and each format's output keeps its provider's turn rules.
func TestCompaction_EveryMessageAccountedFor(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 16))
			st := newMemory()
			e, _ := testEngine(st, engine.WithSummarizer(&recorder{}, engine.SummarizerConfig{}))
			budget := 1500 + r.IntN(3000)
			err := st.PutAgent(context.Background(), loom.DefaultTenant, store.Agent{ID: "a", Instructions: "Help.", MaxTokens: budget,
				Policy: &loom.Policy{Compaction: &loom.Compaction{TriggerTokens: budget / 2, KeepTokens: 100 + r.IntN(budget/2)}}})
			if err != nil {
				t.Fatal(err)
			}
			next, compacted := 0, 0
			defer func() {
				if compacted == 0 {
					t.Error("no step had a summary: the test proves little")
				}
			}()
			for step := range 8 {
				randomTurns(t, r, st, "s", 1+r.IntN(6), &next)
				if r.IntN(2) == 0 {
					if _, err := e.Compact(context.Background(), engine.CompactRequest{Session: "s", Agent: "a", Force: r.IntN(3) == 0}); err != nil {
						t.Fatal(err)
					}
				}
				sum, _ := st.Summary(context.Background(), loom.DefaultTenant, "s")
				all, _ := st.Messages(context.Background(), loom.DefaultTenant, "s", store.MessageQuery{})
				if sum.To > 0 {
					compacted++
					if i := int(sum.To); i < len(all) && all[i].Role != "user" {
						t.Fatalf("step %d: the summary ends at %d, before a %s message", step, sum.To, all[i].Role)
					}
				}
				for _, format := range []string{assembler.FormatOpenAI, assembler.FormatAnthropic, assembler.FormatText} {
					res, err := e.Assemble(context.Background(), engine.Request{Agent: "a", Session: "s",
						Request: assembler.Request{Message: "next", Format: format}})
					if err != nil {
						t.Fatalf("step %d %s: %v", step, format, err)
					}
					checkAccounted(t, res, all, sum)
					checkTurns(t, format, res)
				}
			}
		})
	}
}

// checkAccounted checks that every message of the history an assembly read is included once, or
// dropped once with a reason, and summarized exactly when the summary covers it.
func checkAccounted(t *testing.T, res *engine.Result, all []store.Message, sum store.Summary) {
	t.Helper()
	seen := map[string]string{}
	for _, reg := range res.Report.Regions {
		if reg.Name != assembler.RegionHistory {
			continue
		}
		for _, id := range reg.Included {
			if seen[id] != "" {
				t.Fatalf("%s twice", id)
			}
			seen[id] = "included"
		}
		for _, d := range reg.Dropped {
			if seen[d.ID] != "" {
				t.Fatalf("%s twice (%s, %s)", d.ID, seen[d.ID], d.Reason)
			}
			seen[d.ID] = d.Reason
		}
	}
	window := all[len(all)-len(seen):]
	for i, m := range window {
		why := seen[fmt.Sprintf("history[%d]", i)]
		if why == "" {
			t.Fatalf("seq %d is not accounted for", m.Seq)
		}
		if (why == assembler.ReasonSummarized) != (m.Seq <= sum.To) {
			t.Fatalf("seq %d is %q, the summary covers to %d", m.Seq, why, sum.To)
		}
	}
	if sum.To > 0 && (res.Report.Summary == nil || res.Report.Summary.To != sum.To) {
		t.Fatalf("report's summary %+v, stored to %d", res.Report.Summary, sum.To)
	}
}

// checkTurns checks a format's turns: a tool result answers a call of the message before; the anthropic
// format's turns alternate, starting with the user.
func checkTurns(t *testing.T, format string, res *engine.Result) {
	t.Helper()
	switch format {
	case assembler.FormatOpenAI:
		open := map[string]bool{}
		for i, m := range res.Messages {
			if m.Role == "tool" && !open[m.ToolCallID] {
				t.Fatalf("openai: messages[%d] answers no open call", i)
			}
			if m.Role != "tool" {
				clear(open)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
	case assembler.FormatAnthropic:
		for i, m := range res.Messages {
			want := "user"
			if i%2 == 1 {
				want = "assistant"
			}
			if m.Role != want {
				t.Fatalf("anthropic: messages[%d] is %s", i, m.Role)
			}
		}
	case assembler.FormatText:
		if strings.Count(res.Text, "</conversation_summary>") > 1 {
			t.Fatal("text: the summary's text closed its element")
		}
	}
}
