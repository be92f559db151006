package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/tokenizer"
)

// seedScenario writes seed 003's "Putting It Together" state into s, through the store's API.
func seedScenario(t *testing.T, s *store.Store, tenant string) {
	t.Helper()
	ctx := t.Context()
	if err := s.PutAgent(ctx, tenant, store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant.",
		Constraints: "Be concise and accurate.", OutputFormat: "Plain text."}); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"name", "Bob"}, {"preferred_language", "English"}, {"tier", "free"}} {
		if err := s.SetFact(ctx, tenant, "user_42", store.Fact{Key: kv[0], Value: kv[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AppendMessages(ctx, tenant, "sess_42",
		store.Message{Role: "user", Content: "Hi, I need help with my account"},
		store.Message{Role: "assistant", Content: "Sure! What do you need help with?"},
		store.Message{Role: "user", Content: "I want to upgrade to premium"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendToolOutput(ctx, tenant, "sess_42", store.ToolOutput{Tool: "check_account",
		Result: `{"plan": "free", "eligible_upgrade": true}`}); err != nil {
		t.Fatal(err)
	}
}

// seedMessages is what seed 003's assemble_context returns for the scenario.
var seedMessages = []struct{ role, content string }{
	{"system", "You are a helpful AI assistant.\n\nConstraints: Be concise and accurate.\nFormat: Plain text."},
	{"system", "User context:\n- name: Bob\n- preferred_language: English\n- tier: free"},
	{"user", "Hi, I need help with my account"},
	{"assistant", "Sure! What do you need help with?"},
	{"user", "I want to upgrade to premium"},
	{"system", `Tool 'check_account' returned: {"plan": "free", "eligible_upgrade": true}`},
	{"user", "How much does premium cost?"},
}

// openAICount is the exact count of OpenAI chat messages, computed here from the tokenizer alone.
func openAICount(msgs []assembler.ChatMessage) int {
	enc := tokenizer.O200K()
	n := 3
	for _, m := range msgs {
		n += 3 + enc.Count(m.Role) + enc.Count(m.Content)
	}
	return n
}

// RunScenario runs seed 003's scenario end to end on s: the cookbook preset reproduces the seed's messages,
// Loom's own rendering carries the same state, a tight budget trims history oldest first, and a recorded
// turn is seen by the next assembly.
func RunScenario(t *testing.T, s *store.Store) {
	ctx := loom.WithTenant(t.Context(), "acme")
	seedScenario(t, s, "acme")
	eng, err := testEngine(s)
	if err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Agent: "demo_agent", User: "user_42", Session: "sess_42", Preset: engine.PresetCookbook,
		Request: assembler.Request{Message: "How much does premium cost?", MaxTokens: 4000}}
	res, err := eng.Assemble(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != len(seedMessages) {
		t.Fatalf("%d messages, want %d: %+v", len(res.Messages), len(seedMessages), res.Messages)
	}
	for i, w := range withCookbookDifference(t, seedMessages) {
		if m := res.Messages[i]; m.Role != w.role || m.Content != w.content {
			t.Errorf("message %d = [%s] %q, want [%s] %q", i, m.Role, m.Content, w.role, w.content)
		}
	}
	if want := openAICount(res.Messages); res.TotalTokens != want || len(res.Degraded) != 0 {
		t.Errorf("total_tokens %d, want %d; degraded %v", res.TotalTokens, want, res.Degraded)
	}

	// A budget that holds the system messages, the message and one history message: the oldest go.
	tight := req
	tight.MaxTokens = openAICount(append(append([]assembler.ChatMessage{}, res.Messages[:2]...), res.Messages[4:]...)) + 2
	small, err := eng.Assemble(ctx, tight)
	if err != nil {
		t.Fatal(err)
	}
	if len(small.Messages) != 5 || small.Messages[2].Content != "I want to upgrade to premium" || small.TotalTokens > tight.MaxTokens ||
		small.TotalTokens != openAICount(small.Messages) {
		t.Fatalf("trimmed to %d tokens of %d: %+v", small.TotalTokens, tight.MaxTokens, small.Messages)
	}
	if h := findRegion(small.Result, assembler.RegionHistory); len(h.Dropped) != 2 || h.Dropped[0].ID != "history[0]" || h.Dropped[0].Reason != assembler.ReasonBudget {
		t.Errorf("history report %+v", h)
	}
	tight.MaxTokens = 20
	var be *assembler.BudgetError
	if _, err := eng.Assemble(ctx, tight); !errors.As(err, &be) || be.Available != 20 {
		t.Errorf("a budget below the required items: %v", err)
	}

	// Loom's own rendering of the same state.
	req.Preset, req.MaxTokens = "", 0
	own, err := eng.Assemble(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	all := messagesText(own.Result)
	for _, want := range []string{"You are a helpful AI assistant.", "Constraints: Be concise and accurate.", "Bob", "preferred_language",
		"I want to upgrade to premium", "check_account", "eligible_upgrade"} {
		if !strings.Contains(all, want) {
			t.Errorf("Loom's rendering lacks %q:\n%s", want, all)
		}
	}
	if last := own.Messages[len(own.Messages)-1]; last.Role != "user" || last.Content != "How much does premium cost?" {
		t.Errorf("last message %+v", last)
	}

	// Record the turn; the next assembly sees it.
	if _, err := eng.Record(ctx, engine.Turn{Session: "sess_42", Message: "How much does premium cost?",
		Reply: []store.Message{{Role: "assistant", Content: "Premium is $20 a month."}}}); err != nil {
		t.Fatal(err)
	}
	req.Message = "And yearly?"
	next, err := eng.Assemble(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if all := messagesText(next.Result); !strings.Contains(all, "Premium is $20 a month.") {
		t.Errorf("the recorded reply is not in the next assembly:\n%s", all)
	}
	// Another tenant sees none of it.
	other := req
	other.Agent = ""
	o, err := eng.Assemble(loom.WithTenant(ctx, "globex"), other)
	if err != nil {
		t.Fatal(err)
	}
	if all := messagesText(o.Result); strings.Contains(all, "Bob") || strings.Contains(all, "premium") {
		t.Errorf("tenant globex sees acme's state:\n%s", all)
	}
}

func messagesText(r *assembler.Result) string {
	var b strings.Builder
	for _, m := range r.Messages {
		fmt.Fprintf(&b, "[%s] %s\n", m.Role, m.Content)
	}
	return b.String()
}

func findRegion(r *assembler.Result, name assembler.Region) assembler.RegionReport {
	for _, rr := range r.Report.Regions {
		if rr.Name == name {
			return rr
		}
	}
	return assembler.RegionReport{}
}

func TestScenario_Memory(t *testing.T) {
	t.Parallel()
	s := newMemory()
	defer s.Close()
	RunScenario(t, s)
}

func TestAssemble_MergesInlineParts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newMemory()
	seedScenario(t, s, loom.DefaultTenant)
	if err := s.PutAgent(ctx, loom.DefaultTenant, store.Agent{ID: "tooled", Instructions: "Agent text.", Model: "gpt-4",
		Tools: []assembler.Tool{{Type: "function", Function: assembler.ToolFunction{Name: "lookup", Description: "stored"}},
			{Type: "function", Function: assembler.ToolFunction{Name: "keep", Description: "stored"}}}}); err != nil {
		t.Fatal(err)
	}
	eng, _ := testEngine(s)
	res, err := eng.Assemble(ctx, engine.Request{Agent: "tooled", User: "user_42", Session: "sess_42", Request: assembler.Request{
		Instructions: "Inline text.", Message: "hi",
		Tools:   []assembler.Tool{{Type: "function", Function: assembler.ToolFunction{Name: "lookup", Description: "inline"}}},
		Memory:  []assembler.MemoryFact{{Key: "tier", Value: "premium"}},
		History: []assembler.Message{{Role: "assistant", Content: "inline history"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "gpt-4" || res.Encoding != tokenizer.CL100KBase {
		t.Errorf("model %s encoding %s: the agent's model should apply", res.Model, res.Encoding)
	}
	all := messagesText(res.Result)
	if i, j := strings.Index(all, "Agent text."), strings.Index(all, "Inline text."); i < 0 || j < i {
		t.Errorf("instructions: agent's then inline's, got:\n%s", all)
	}
	if !strings.Contains(all, "premium") || strings.Contains(all, "tier: free") || !strings.Contains(all, "inline history") {
		t.Errorf("inline memory or history not merged:\n%s", all)
	}
	tools := fmt.Sprint(func() []string {
		var out []string
		for _, t := range res.Tools {
			out = append(out, string(t))
		}
		return out
	}())
	if strings.Count(tools, `"lookup"`) != 1 || !strings.Contains(tools, "inline") || !strings.Contains(tools, `"keep"`) {
		t.Errorf("tools: the inline lookup should replace the stored one, keep should stay: %s", tools)
	}
}

func TestAssemble_UnknownAgent(t *testing.T) {
	t.Parallel()
	eng, _ := testEngine(newMemory())
	_, err := eng.Assemble(t.Context(), engine.Request{Agent: "ghost", Request: assembler.Request{Message: "hi"}})
	if !errors.Is(err, engine.ErrAgentNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("got %v, want ErrAgentNotFound", err)
	}
	_, err = eng.Assemble(t.Context(), engine.Request{Session: "bad\nid", Request: assembler.Request{Message: "hi"}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a bad session id: %v", err)
	}
	_, err = eng.Assemble(t.Context(), engine.Request{Preset: "nope", Request: assembler.Request{Message: "hi"}})
	if !errors.Is(err, engine.ErrInvalidRequest) {
		t.Fatalf("an unknown preset: %v", err)
	}
}

// faultyStore is a backend that fails or stalls its Load, or fails one source.
type faultyStore struct {
	*memory.Backend
	fail   error
	stall  bool
	source store.Source
}

func (f *faultyStore) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	if f.stall {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
	if f.fail != nil && f.source == "" {
		return nil, f.fail
	}
	snap, err := f.Backend.Load(ctx, tenant, q)
	if err == nil && f.source != "" {
		snap.Errors[f.source] = f.fail
		if f.source == store.SourceHistory {
			snap.Messages = nil
		}
	}
	return snap, err
}

// TestAssemble_WindowWidenedToTheUserTurn: a history_limit window that begins inside an agent's run of tool
// calls is widened back to the user message that started the run.
func TestAssemble_WindowWidenedToTheUserTurn(t *testing.T) {
	t.Parallel()
	mem := newMemory()
	ctx := t.Context()
	msgs := []store.Message{{Role: "user", Content: "Find the cheapest flight to Oslo."}}
	for i := range 6 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			store.Message{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Function: assembler.ToolCallFunction{Name: "search", Arguments: `{"page":1}`}}}},
			store.Message{Role: "tool", ToolCallID: id, Content: fmt.Sprintf(`{"page": %d}`, i)})
	}
	if _, err := mem.AppendMessages(ctx, loom.DefaultTenant, "run", msgs...); err != nil {
		t.Fatal(err)
	}
	eng, err := testEngine(mem)
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Assemble(ctx, engine.Request{Session: "run", HistoryLimit: 4, Request: assembler.Request{Model: "gpt-4o"}})
	if err != nil {
		t.Fatalf("a window of 4 inside a run of tool calls: %v", err)
	}
	if text := messagesText(res.Result); !strings.Contains(text, "cheapest flight") {
		t.Errorf("the user's message that started the run is not in:\n%s", text)
	}
}

// oddHistory is a backend whose sessions also hold messages Loom's stores would refuse, as seed 003's keys
// written by other code can.
type oddHistory struct{ *memory.Backend }

func (o oddHistory) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	snap, err := o.Backend.Load(ctx, tenant, q)
	if err == nil {
		snap.Messages = append([]store.Message{{Seq: 1, Role: "function", Content: "odd"}, {Seq: 2, Role: "tool", Content: "no call id"}},
			snap.Messages...)
	}
	return snap, err
}

// TestAssemble_SkipsUnusableStoredMessages: a stored message with a role the assembler cannot use is left
// out, and the result says so, rather than failing the whole assembly.
func TestAssemble_SkipsUnusableStoredMessages(t *testing.T) {
	t.Parallel()
	mem := newMemory()
	seedScenario(t, mem, loom.DefaultTenant)
	eng, err := testEngine(over(oddHistory{memoryOf(mem)}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Assemble(t.Context(), engine.Request{Agent: "demo_agent", User: "user_42", Session: "sess_42",
		Request: assembler.Request{Message: "How much does premium cost?"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Degraded) != 1 || res.Degraded[0].Source != "history" || !strings.Contains(res.Degraded[0].Cause, "2 stored messages skipped") {
		t.Errorf("degraded = %+v", res.Degraded)
	}
	text := messagesText(res.Result)
	if strings.Contains(text, "no call id") || !strings.Contains(text, "I want to upgrade") {
		t.Errorf("the odd messages are in, or the good ones out:\n%s", text)
	}
}

func TestAssemble_DegradesOrFailsStrictly(t *testing.T) {
	t.Parallel()
	down := fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	for _, tc := range []struct {
		name  string
		store *faultyStore
		want  string // the degraded source
	}{
		{"store down", &faultyStore{fail: down}, "store"},
		{"store stalls past the deadline", &faultyStore{stall: true}, "store"},
		{"one source fails", &faultyStore{fail: errors.New("corrupt list"), source: store.SourceHistory}, "history"},
		{"the agent fails", &faultyStore{fail: errors.New("corrupt hash"), source: store.SourceAgent}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := newMemory()
			seedScenario(t, mem, loom.DefaultTenant)
			tc.store.Backend = memoryOf(mem)
			// The short deadline is for the store that stalls, which only the deadline ends; with the others
			// the sources that work must not time out on a loaded machine (testEngine's deadline).
			var opts []engine.Option
			if tc.store.stall {
				opts = append(opts, engine.WithSourceTimeout(100*time.Millisecond))
			}
			eng, err := testEngine(over(tc.store), opts...)
			if err != nil {
				t.Fatal(err)
			}
			// With an agent named, its instructions and tools are required: a failure to read it fails
			// the assembly, strict or not.
			req := engine.Request{Agent: "demo_agent", User: "user_42", Session: "sess_42", Request: assembler.Request{Message: "How much does premium cost?"}}
			_, err = eng.Assemble(t.Context(), req)
			if tc.want == "history" {
				if err != nil {
					t.Fatalf("the history failed: %v, want a degraded result", err)
				}
			} else if !errors.Is(err, engine.ErrSourceFailed) {
				t.Fatalf("with the agent unreadable: %v, want ErrSourceFailed", err)
			}
			if tc.want == "" {
				return
			}
			req.Agent, req.Instructions = "", "Be helpful."
			start := time.Now()
			res, err := eng.Assemble(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if elapsed := time.Since(start); tc.store.stall && elapsed > 2*time.Minute { // the store never answers: only the deadline ends it
				t.Errorf("took %v with a 100ms source timeout", elapsed)
			}
			if len(res.Degraded) != 1 || res.Degraded[0].Source != tc.want || res.Degraded[0].Cause == "" {
				t.Fatalf("degraded = %+v, want source %s", res.Degraded, tc.want)
			}
			if last := res.Messages[len(res.Messages)-1]; last.Content != "How much does premium cost?" {
				t.Errorf("the degraded result lacks the message: %+v", last)
			}
			if strings.Contains(messagesText(res.Result), "I want to upgrade") {
				t.Error("the failed history is in the result")
			}
			req.Strict = true
			if _, err := eng.Assemble(t.Context(), req); !errors.Is(err, engine.ErrSourceFailed) {
				t.Fatalf("strict: got %v, want ErrSourceFailed", err)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newMemory()
	eng, _ := testEngine(s)
	stored, err := eng.Record(ctx, engine.Turn{Session: "s", Message: "What is the weather?", Reply: []store.Message{
		{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: "c1", Function: assembler.ToolCallFunction{Name: "weather", Arguments: `{"city":"Oslo"}`}}}},
		{Role: "tool", ToolCallID: "c1", Content: `{"temp": -3}`},
		{Role: "assistant", Content: "It is -3°C in Oslo."},
	}, ToolOutputs: []store.ToolOutput{{Tool: "weather", CallID: "c1", Result: `{"temp": -3}`}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 4 || stored[0].Role != "user" || stored[3].Seq != 4 {
		t.Fatalf("stored %+v", stored)
	}
	outs, _ := s.ToolOutputs(ctx, loom.DefaultTenant, "s")
	if len(outs) != 1 || outs[0].CallID != "c1" {
		t.Fatalf("tool outputs %+v", outs)
	}
	res, err := eng.Assemble(ctx, engine.Request{Session: "s", Request: assembler.Request{Message: "And tomorrow?"}})
	if err != nil {
		t.Fatal(err)
	}
	var sawCall, sawResult bool
	for _, m := range res.Messages {
		sawCall = sawCall || (len(m.ToolCalls) == 1 && m.ToolCalls[0].ID == "c1")
		sawResult = sawResult || (m.Role == "tool" && m.ToolCallID == "c1")
	}
	if !sawCall || !sawResult {
		t.Errorf("the recorded tool exchange is not in the next assembly: %s", messagesText(res.Result))
	}
	for name, turn := range map[string]engine.Turn{
		"empty":           {Session: "s"},
		"user in a reply": {Session: "s", Reply: []store.Message{{Role: "user", Content: "x"}}},
	} {
		if _, err := eng.Record(ctx, turn); !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := eng.Record(ctx, engine.Turn{Message: "x"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no session: got %v", err)
	}
}

func TestAssemble_TenantFromContext(t *testing.T) {
	t.Parallel()
	s := newMemory()
	seedScenario(t, s, "acme")
	eng, _ := testEngine(s)
	ctx := loom.WithTenant(t.Context(), "acme")
	res, err := eng.Assemble(ctx, engine.Request{Agent: "demo_agent", Session: "sess_42", Request: assembler.Request{Message: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(messagesText(res.Result), "I want to upgrade to premium") {
		t.Error("the context's tenant was not used")
	}
	if _, err := eng.Record(ctx, engine.Turn{Session: "sess_42", Message: "more"}); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := s.Messages(t.Context(), "acme", "sess_42", store.MessageQuery{}); len(msgs) != 4 {
		t.Errorf("Record used another tenant: %d messages in acme's session", len(msgs))
	}
	// Without a tenant in the context or the request, the default tenant has no such agent.
	if _, err := eng.Assemble(t.Context(), engine.Request{Agent: "demo_agent", Request: assembler.Request{Message: "hi"}}); !errors.Is(err, engine.ErrAgentNotFound) {
		t.Errorf("the default tenant: %v", err)
	}
}
