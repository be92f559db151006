package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/tokenizer"
)

// readCounter is a backend that counts the messages it hands out, by Load, SelectMessages (what a Store's
// Messages calls) and ReadMessages.
type readCounter struct {
	*memory.Backend
	read, calls atomic.Int64
}

func (r *readCounter) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	snap, err := r.Backend.Load(ctx, tenant, q)
	if err == nil {
		r.read.Add(int64(len(snap.Messages)))
		r.calls.Add(1)
	}
	return snap, err
}

func (r *readCounter) SelectMessages(ctx context.Context, tenant, session string, q store.MessageQuery) ([]store.Message, int64, error) {
	msgs, next, err := r.Backend.SelectMessages(ctx, tenant, session, q)
	r.read.Add(int64(len(msgs)))
	r.calls.Add(1)
	return msgs, next, err
}

func (r *readCounter) ReadMessages(ctx context.Context, tenant, session string, before int64, n int) ([]store.Message, int64, error) {
	msgs, next, err := r.Backend.ReadMessages(ctx, tenant, session, before, n)
	r.read.Add(int64(len(msgs)))
	r.calls.Add(1)
	return msgs, next, err
}

// take returns the messages read and the reads made since the last take.
func (r *readCounter) take() (read, calls int64) { return r.read.Swap(0), r.calls.Swap(0) }

// TestAssemble_ReadsWhatTheBudgetCanUse: an assembly with a 500-token budget of a session of 3,000
// messages reads only the newest messages whose least cost fits 500 tokens, in the one Load, not the
// 1,000 newest; with the budget given by the stored agent, the first assembly reads a first page of a few
// thousand tokens, the next ones what the budget can use.
func TestAssemble_ReadsWhatTheBudgetCanUse(t *testing.T) {
	t.Parallel()
	ctx := loom.WithTenant(t.Context(), "acme")
	mem := newMemory()
	var msgs []store.Message
	for i := range 3000 {
		msgs = append(msgs, store.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("message %d: %s", i, strings.Repeat("and so on ", i%9))})
	}
	for i := 0; i < len(msgs); i += store.DefaultMaxBatch {
		if _, err := mem.AppendMessages(ctx, "acme", "long", msgs[i:i+store.DefaultMaxBatch]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := mem.PutAgent(ctx, "acme", store.Agent{ID: "small", Model: "gpt-4o", MaxTokens: 500}); err != nil {
		t.Fatal(err)
	}
	all, _ := mem.Messages(ctx, "acme", "long", store.MessageQuery{})
	fits := func(tokens int) int64 {
		return int64(len(store.SelectMessages(all, store.MessageQuery{MaxTokens: tokens, Encoding: tokenizer.O200KBase, CountToolCalls: true})))
	}
	counter := &readCounter{Backend: memoryOf(mem)}
	eng, err := testEngine(over(counter))
	if err != nil {
		t.Fatal(err)
	}
	assemble := func(req engine.Request) {
		t.Helper()
		req.Session, req.Message = "long", "What now?"
		res, err := eng.Assemble(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.TotalTokens > 500 || !strings.Contains(messagesText(res.Result), "message 2999:") {
			t.Fatalf("%d tokens, without the newest message", res.TotalTokens)
		}
	}

	assemble(engine.Request{Request: assembler.Request{Model: "gpt-4o", MaxTokens: 500}})
	if read, calls := counter.take(); read != fits(500) || calls != 1 {
		t.Errorf("budget in the request: %d messages read in %d reads, want %d in one", read, calls, fits(500))
	}
	assemble(engine.Request{Agent: "small"})
	if read, calls := counter.take(); read > fits(8192) || calls != 1 {
		t.Errorf("budget of the agent, first assembly: %d messages read in %d reads, want at most %d in one", read, calls, fits(8192))
	}
	assemble(engine.Request{Agent: "small"})
	if read, calls := counter.take(); read != fits(500) || calls != 1 {
		t.Errorf("budget of the agent, next assembly: %d messages read in %d reads, want %d in one", read, calls, fits(500))
	}
	// An agent whose budget is larger than the first page reads on, once.
	if err := mem.PutAgent(ctx, "acme", store.Agent{ID: "large", Model: "gpt-4o", MaxTokens: 20_000}); err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Session: "long", Agent: "large", Request: assembler.Request{Message: "What now?"}}
	if _, err := eng.Assemble(ctx, req); err != nil {
		t.Fatal(err)
	}
	if read, calls := counter.take(); read != fits(20_000) || calls != 2 {
		t.Errorf("a large budget of the agent: %d messages read in %d reads, want %d in two", read, calls, fits(20_000))
	}
	// A history limit bounds the read too.
	assemble(engine.Request{HistoryLimit: 3, Request: assembler.Request{Model: "gpt-4o", MaxTokens: 500}})
	if read, _ := counter.take(); read != 3 {
		t.Errorf("history_limit 3: %d messages read", read)
	}
}

// randomHistory is a session of n messages: prose of several scripts, system notes, and tool exchanges
// whose calls and results are small or large.
func randomHistory(r *rand.Rand, n int) []store.Message {
	var msgs []store.Message
	for len(msgs) < n {
		switch r.IntN(5) {
		case 0, 1:
			msgs = append(msgs, store.Message{Role: "user", Content: strings.Repeat("Где мой заказ? ", 1+r.IntN(20))})
		case 2:
			msgs = append(msgs, store.Message{Role: "assistant", Content: strings.Repeat("Let me check that for you. ", 1+r.IntN(30))})
		case 3:
			msgs = append(msgs, store.Message{Role: "system", Content: "Note " + strings.Repeat("日本語 ", r.IntN(10))})
		case 4:
			id := fmt.Sprint("call_", len(msgs))
			args := `{"q":"` + strings.Repeat("<order> ", r.IntN(2000)) + `"}`
			msgs = append(msgs,
				store.Message{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Function: assembler.ToolCallFunction{Name: "lookup", Arguments: args}}}},
				store.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat(`{"status":"shipped"} `, 1+r.IntN(200))})
		}
	}
	return msgs
}

// TestAssemble_WindowChangesNothing: an assembly that reads only what its budget can use returns what the
// same assembly returns from the session's 1,000 newest messages, for any mix of session, budget, format,
// model, policy (one that clears tool results too) and where the budget comes from.
func TestAssemble_WindowChangesNothing(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	ctx := loom.WithTenant(t.Context(), "acme")
	for round := range engine.Sweep(150) {
		mem := newMemory()
		session := randomHistory(r, 20+r.IntN(1300))
		for i := 0; i < len(session); i += store.DefaultMaxBatch {
			if _, err := mem.AppendMessages(ctx, "acme", "s", session[i:min(i+store.DefaultMaxBatch, len(session))]...); err != nil {
				t.Fatal(err)
			}
		}
		eng, err := testEngine(mem)
		if err != nil {
			t.Fatal(err)
		}
		historyLimit := 0
		if r.IntN(3) == 0 {
			historyLimit = 1 + r.IntN(20)
		}
		byAgent := r.IntN(2) == 0
		// Twice: the second time, an agent's budget has changed since the engine learned it.
		for range 2 {
			model := []string{"gpt-4o", "gpt-4", "claude-sonnet-4-5", "gemini-2.5-pro"}[r.IntN(4)]
			maxTokens := []int{120, 500, 2000, 6000}[r.IntN(4)]
			format := []string{"", assembler.FormatAnthropic, assembler.FormatText}[r.IntN(3)]
			// The policy, when there is one, cuts by turns, or clears tool results, which then cost less than
			// their counts.
			policy := []*assembler.Policy{nil, nil, {HistoryTrim: assembler.HistoryTrimTurns}, {KeepToolResults: 1}, {ClearToolResultsOver: 50}}[r.IntN(5)]
			req := engine.Request{Session: "s", HistoryLimit: historyLimit, Request: assembler.Request{Message: "And now?", Format: format}}
			if !byAgent {
				req.Model, req.MaxTokens, req.Policy = model, maxTokens, policy
			} else {
				req.Agent = "a"
				if err := mem.PutAgent(ctx, "acme", store.Agent{ID: "a", Model: model, MaxTokens: maxTokens, Policy: policy}); err != nil {
					t.Fatal(err)
				}
			}
			got, gotErr := eng.Assemble(ctx, req)

			// As before windows: the 1,000 newest, or the newest history_limit widened back to a user turn.
			newest, _ := mem.Messages(ctx, "acme", "s", store.MessageQuery{Limit: store.DefaultLoadMessages})
			if l := req.HistoryLimit; l > 0 && l < len(newest) {
				userTurn := func(m store.Message) bool { return m.Role == "user" && strings.TrimSpace(m.Content) != "" }
				from := len(newest) - l
				if !slices.ContainsFunc(newest[from:], userTurn) {
					for i := from - 1; i >= 0; i-- {
						if userTurn(newest[i]) {
							from = i
							break
						}
					}
				}
				newest = newest[from:]
			}
			whole := req.Request
			whole.Model, whole.MaxTokens, whole.Policy = model, maxTokens, policy
			whole.History = append(whole.History, newest...)
			want, wantErr := assembler.AssembleRequest(ctx, &whole)

			what := fmt.Sprintf("round %d (%d messages, %s, %d tokens, format %q, agent %q, history limit %d)", round, len(session), model, maxTokens, format, req.Agent, req.HistoryLimit)
			var wantBE, gotBE *assembler.BudgetError
			switch {
			case errors.As(wantErr, &wantBE):
				// The required items do not fit: the same error, which says at least how many tokens they need
				// when they go back further than the budget reaches (the window does not read them all).
				if !errors.As(gotErr, &gotBE) || gotBE.Available != wantBE.Available || gotBE.Required <= gotBE.Available || gotBE.Required > wantBE.Required {
					t.Fatalf("%s: %v, want %v", what, gotErr, wantErr)
				}
			case wantErr != nil || gotErr != nil:
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("%s: error %v, want %v", what, gotErr, wantErr)
				}
			default:
				g, _ := json.Marshal(got.Messages)
				w, _ := json.Marshal(want.Messages)
				if string(g) != string(w) || got.TotalTokens != want.TotalTokens || got.Text != want.Text {
					t.Fatalf("%s: %d tokens, want %d:\n%s\nwant\n%s", what, got.TotalTokens, want.TotalTokens, g, w)
				}
			}
		}
	}
}

// TestAssemble_NoUserTurnWithinTheBudget: when an agent's run of tool calls goes back further than the
// budget reaches, the user message that started it is not read: the required items cannot fit, and the
// assembly fails with a budget error, as it would having read them all; a budget that reaches it
// assembles the run. A run that fits but has no user message before it is ErrNoUserTurn, as ever.
func TestAssemble_NoUserTurnWithinTheBudget(t *testing.T) {
	t.Parallel()
	ctx := loom.WithTenant(t.Context(), "acme")
	mem := newMemory()
	msgs := []store.Message{{Role: "user", Content: "Old question."}, {Role: "assistant", Content: "Old answer."},
		{Role: "user", Content: "Find the cheapest flight to Oslo."}}
	for i := range 40 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			store.Message{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Function: assembler.ToolCallFunction{Name: "search", Arguments: `{"page":1}`}}}},
			store.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat(`{"flight": "SK4021", "price": 129} `, 5)})
	}
	if _, err := mem.AppendMessages(ctx, "acme", "run", msgs...); err != nil {
		t.Fatal(err)
	}
	counter := &readCounter{Backend: memoryOf(mem)}
	eng, err := testEngine(over(counter))
	if err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Session: "run", HistoryLimit: 4, Request: assembler.Request{Model: "gpt-4o", MaxTokens: 1000}}
	_, err = eng.Assemble(ctx, req)
	var be *assembler.BudgetError
	if !errors.As(err, &be) || be.Available != 1000 || be.Required <= 1000 {
		t.Fatalf("a run of tool calls longer than the budget: %v, want a budget error", err)
	}
	if read, _ := counter.take(); read > 1000/store.MessageOverhead {
		t.Errorf("%d messages read for a budget of 1000 tokens", read)
	}
	req.MaxTokens = 8000
	res, err := eng.Assemble(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if text := messagesText(res.Result); !strings.Contains(text, "cheapest flight") || strings.Contains(text, "Old question") {
		t.Errorf("the window is not widened to the user turn that started the run, and no further:\n%s", text)
	}
	if _, err := mem.AppendMessages(ctx, "acme", "headless", msgs[3:]...); err != nil {
		t.Fatal(err)
	}
	req.Session = "headless"
	if _, err := eng.Assemble(ctx, req); !errors.Is(err, assembler.ErrNoUserTurn) {
		t.Errorf("a run without a user message before it: %v, want ErrNoUserTurn", err)
	}
}

// TestAssemble_ClearedResultsWidenTheWindow: with a policy that clears tool results, a session's history
// that fits once they are cleared goes back further than a budget's worth of their counts; the assembly
// reads it, and returns what it returns from the session's 1,000 newest messages, by request and by
// agent.
func TestAssemble_ClearedResultsWidenTheWindow(t *testing.T) {
	t.Parallel()
	ctx := loom.WithTenant(t.Context(), "acme")
	mem := newMemory()
	var session []store.Message
	for i := range 80 {
		session = append(session, store.Message{Role: "user", Content: fmt.Sprintf("Where is order %d?", i)})
		if i%2 == 0 {
			id := fmt.Sprint("call_", i)
			session = append(session,
				store.Message{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: "{}"}}}},
				store.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat(`{"status":"shipped","carrier":"DHL"} `, 40)})
		}
		session = append(session, store.Message{Role: "assistant", Content: fmt.Sprintf("Order %d has shipped.", i)})
	}
	if _, err := mem.AppendMessages(ctx, "acme", "s", session...); err != nil {
		t.Fatal(err)
	}
	eng, err := testEngine(mem)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := mem.Messages(ctx, "acme", "s", store.MessageQuery{})
	for _, policy := range []*assembler.Policy{{KeepToolResults: 1}, {ClearToolResultsOver: 100}} {
		whole := assembler.Request{Model: "gpt-4o", MaxTokens: 3000, Message: "And now?", Policy: policy, History: stored}
		want, err := assembler.AssembleRequest(ctx, &whole)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.PutAgent(ctx, "acme", store.Agent{ID: "a", Model: "gpt-4o", MaxTokens: 3000, Policy: policy}); err != nil {
			t.Fatal(err)
		}
		for _, req := range []engine.Request{
			{Session: "s", Request: assembler.Request{Model: "gpt-4o", MaxTokens: 3000, Message: "And now?", Policy: policy}},
			{Session: "s", Agent: "a", Request: assembler.Request{Message: "And now?"}},
		} {
			got, err := eng.Assemble(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(got.Messages)
			w, _ := json.Marshal(want.Messages)
			if string(g) != string(w) {
				t.Fatalf("policy %+v, agent %q: %d messages, want %d", *policy, req.Agent, len(got.Messages), len(want.Messages))
			}
		}
	}
}
