package storetest

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// NewBackend opens a fresh, empty backend with opts for one test. The suite closes it.
type NewBackend func(t *testing.T, opts store.Options) store.Backend

// BackendOptions say what RunBackend may expect of a backend.
type BackendOptions struct {
	// Tenant, if set, is the one tenant the backend holds (the Valkey cookbook's key layout holds
	// "default" alone): the suite writes only it, and does not check that tenants are kept apart.
	Tenant string
}

// RunBackend runs the backend conformance suite against the backends newBackend opens: the raw contract
// of store.Backend, called as a store.Store calls it (valid ids, prepared values), and of the optional
// interfaces the backend implements (store.MessageSelector and store.Loader must answer as the Store
// would from the Backend's own methods). It checks what every backend keeps: a fact's key and value, a
// knowledge item's ids, content and score; Run checks the rest through the front.
func RunBackend(t *testing.T, newBackend NewBackend, opts BackendOptions) {
	tn := opts.Tenant
	if tn == "" {
		tn = tenant
	}
	tests := []struct {
		name string
		run  func(t *testing.T, b store.Backend, tn string)
	}{
		{"Agents", testBackendAgents},
		{"Facts", testBackendFacts},
		{"Messages", testBackendMessages},
		{"ReadMessages", testBackendReadMessages},
		{"SelectMessages", testBackendSelectMessages},
		{"ToolOutputsAndKnowledge", testBackendSession},
		{"Load", testBackendLoad},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if r := recover(); r != nil {
					if e, ok := r.(mustError); ok {
						t.Fatal(e.err)
					}
					panic(r)
				}
			}()
			tc.run(t, openBackend(t, newBackend), tn)
		})
	}
	if opts.Tenant == "" {
		t.Run("TenantIsolation", func(t *testing.T) {
			t.Parallel()
			testBackendTenants(t, openBackend(t, newBackend))
		})
	}
}

func openBackend(t *testing.T, newBackend NewBackend) store.Backend {
	t.Helper()
	b := newBackend(t, store.Options{})
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// now is a prepared time: in UTC, to the microsecond (what every backend keeps).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// prepared are msgs as a Store hands them to AppendMessages: Time set, token counts counted.
func prepared(msgs ...store.Message) []store.Message {
	out := slices.Clone(msgs)
	at := now()
	for i := range out {
		out[i].Time = at
		out[i].TokenCounts = store.MessageCounts(out[i].Content)
	}
	return out
}

func testBackendAgents(t *testing.T, b store.Backend, tn string) {
	ctx := t.Context()
	_, err := b.GetAgent(ctx, tn, "support")
	wantErr(t, err, store.ErrNotFound, "GetAgent of a missing agent")
	wantErr(t, b.DeleteAgent(ctx, tn, "support"), store.ErrNotFound, "DeleteAgent of a missing agent")
	a := store.Agent{ID: "support", Instructions: "You are a helpful AI assistant.", Constraints: "Be brief.", OutputFormat: "Plain text.",
		Model: "gpt-4o", MaxTokens: 4000, CacheBreakpoints: "auto", CacheTTL: "1h+5m", UpdatedAt: now(),
		Tools:  []assembler.Tool{{Type: "function", Function: assembler.ToolFunction{Name: "check_account", Parameters: []byte(`{"type":"object"}`)}}},
		Policy: &assembler.Policy{MinScore: 0.5}}
	ok(t, b.PutAgent(ctx, tn, a))
	got := must(b.GetAgent(ctx, tn, "support"))
	if got.ID != a.ID || got.Instructions != a.Instructions || got.Constraints != a.Constraints || got.OutputFormat != a.OutputFormat ||
		got.Model != a.Model || got.MaxTokens != a.MaxTokens || !got.UpdatedAt.Equal(a.UpdatedAt) || len(got.Tools) != 1 ||
		got.CacheBreakpoints != a.CacheBreakpoints || got.CacheTTL != a.CacheTTL ||
		got.Tools[0].Function.Name != "check_account" || got.Policy == nil || got.Policy.MinScore != 0.5 {
		t.Fatalf("GetAgent = %+v, want %+v", got, a)
	}
	a.Instructions, a.Tools, a.Policy = "You are terse.", nil, nil
	ok(t, b.PutAgent(ctx, tn, a))
	if got := must(b.GetAgent(ctx, tn, "support")); got.Instructions != "You are terse." || len(got.Tools) != 0 || got.Policy != nil {
		t.Fatalf("after replacing, GetAgent = %+v", got)
	}
	ok(t, b.DeleteAgent(ctx, tn, "support"))
	_, err = b.GetAgent(ctx, tn, "support")
	wantErr(t, err, store.ErrNotFound, "GetAgent after DeleteAgent")
}

// factValues are facts by key.
func factValues(facts []store.Fact) map[string]string {
	m := make(map[string]string, len(facts))
	for _, f := range facts {
		m[f.Key] = f.Value
	}
	return m
}

func testBackendFacts(t *testing.T, b store.Backend, tn string) {
	ctx := t.Context()
	if f := must(b.Facts(ctx, tn, "nobody")); len(f) != 0 {
		t.Fatalf("facts of an unknown user: %+v", f)
	}
	for _, kv := range [][2]string{{"tier", "free"}, {"name", "Bob"}, {"city", "Oslo"}, {"tier", "premium"}} {
		ok(t, b.SetFact(ctx, tn, "user_42", store.Fact{Key: kv[0], Value: kv[1], UpdatedAt: now()}))
	}
	want := map[string]string{"tier": "premium", "name": "Bob", "city": "Oslo"}
	if got := factValues(must(b.Facts(ctx, tn, "user_42"))); !maps.Equal(got, want) {
		t.Fatalf("Facts = %v, want %v (in any order)", got, want)
	}
	ok(t, b.DeleteFact(ctx, tn, "user_42", "city"))
	wantErr(t, b.DeleteFact(ctx, tn, "user_42", "city"), store.ErrNotFound, "DeleteFact of a deleted fact")
	delete(want, "city")
	if got := factValues(must(b.Facts(ctx, tn, "user_42"))); !maps.Equal(got, want) {
		t.Fatalf("after DeleteFact, Facts = %v, want %v", got, want)
	}
}

// sameMessage reports whether got is want as read back.
func sameMessage(got, want store.Message) bool {
	return got.Seq == want.Seq && got.Role == want.Role && got.Content == want.Content && got.Name == want.Name &&
		got.ToolCallID == want.ToolCallID && got.Time.Equal(want.Time) && slices.EqualFunc(got.ToolCalls, want.ToolCalls, func(a, b assembler.ToolCall) bool {
		return a.ID == b.ID && a.Function == b.Function
	}) && got.TokenCounts[tokenizer.O200KBase] == want.TokenCounts[tokenizer.O200KBase] &&
		got.TokenCounts[tokenizer.CL100KBase] == want.TokenCounts[tokenizer.CL100KBase] &&
		got.TokenCounts[tokenizer.EstimateKey] == want.TokenCounts[tokenizer.EstimateKey]
}

func sameMessages(t *testing.T, what string, got, want []store.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d (seqs %v, want %v)", what, len(got), len(want), seqs(got), seqs(want))
	}
	for i := range got {
		if !sameMessage(got[i], want[i]) {
			t.Fatalf("%s: message %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

func testBackendMessages(t *testing.T, b store.Backend, tn string) {
	ctx := t.Context()
	call := []assembler.ToolCall{{ID: "c1", Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: `{"q":"x"}`}}}
	first := must(b.AppendMessages(ctx, tn, "s", prepared(store.Message{Role: "user", Content: "Hi"},
		store.Message{Role: "assistant", ToolCalls: call}, store.Message{Role: "tool", ToolCallID: "c1", Content: `{"ok":true}`})))
	second := must(b.AppendMessages(ctx, tn, "s", prepared(store.Message{Role: "assistant", Content: "Done.", Name: "helper"})))
	stored := append(first, second...)
	for i, m := range stored {
		if m.Seq != int64(i+1) {
			t.Fatalf("AppendMessages: message %d has seq %d, want %d", i, m.Seq, i+1)
		}
	}
	page, next := must2(b.ReadMessages(ctx, tn, "s", 0, math.MaxInt))
	sameMessages(t, "ReadMessages of all", page, stored)
	if next != 0 {
		t.Fatalf("ReadMessages of all: next %d, want 0", next)
	}
	if page, next := must2(b.ReadMessages(ctx, tn, "unknown", 0, math.MaxInt)); len(page) != 0 || next != 0 {
		t.Fatalf("ReadMessages of an unknown session: %d messages, next %d", len(page), next)
	}
	ok(t, b.DeleteSession(ctx, tn, "s"))
	wantErr(t, b.DeleteSession(ctx, tn, "s"), store.ErrNotFound, "DeleteSession of a deleted session")
	if again := must(b.AppendMessages(ctx, tn, "s", prepared(store.Message{Role: "user", Content: "again"}))); again[0].Seq != 1 {
		t.Fatalf("a session deleted starts again at seq %d, want 1", again[0].Seq)
	}
}

// fill appends pagingSession to the session sess and returns the messages as stored.
func fill(t *testing.T, b store.Backend, tn, sess string) []store.Message {
	in := prepared(pagingSession()...)
	stored := must(b.AppendMessages(t.Context(), tn, sess, in[:25]))
	return append(stored, must(b.AppendMessages(t.Context(), tn, sess, in[25:]))...)
}

func testBackendReadMessages(t *testing.T, b store.Backend, tn string) {
	ctx := t.Context()
	all := fill(t, b, tn, "pages")
	total := int64(len(all))
	for _, before := range []int64{0, 1, 2, 17, total, total + 1, total + 50} {
		for _, n := range []int{1, 3, 16, len(all), math.MaxInt} {
			hi := total // the newest seq read
			if before > 0 && before <= total {
				hi = before - 1
			}
			lo := max(hi-int64(min(n, len(all))), 0) // the seq before the oldest read
			want, wantNext := all[lo:hi], lo+1
			if lo == 0 || hi == 0 {
				wantNext = 0
			}
			page, next := must2(b.ReadMessages(ctx, tn, "pages", before, n))
			what := fmt.Sprintf("ReadMessages(before %d, n %d)", before, n)
			sameMessages(t, what, page, want)
			if next != wantNext {
				t.Fatalf("%s: next %d, want %d", what, next, wantNext)
			}
		}
	}
}

// queries are MessageQuerys that tell the bounds apart on pagingSession.
func queries() []store.MessageQuery {
	var out []store.MessageQuery
	for _, before := range []int64{0, 1, 31, 64, 200} {
		for _, limit := range []int{0, 1, 7} {
			for _, maxTokens := range []int{0, 1, 30, 1500} {
				for _, enc := range []string{"", tokenizer.CL100KBase, store.EstimateEncoding} {
					for _, calls := range []bool{false, true} {
						out = append(out, store.MessageQuery{Before: before, Limit: limit, MaxTokens: maxTokens, Encoding: enc, CountToolCalls: calls})
					}
				}
			}
		}
	}
	return out
}

func testBackendSelectMessages(t *testing.T, b store.Backend, tn string) {
	sel, isSelector := b.(store.MessageSelector)
	if !isSelector {
		t.Skip("the backend is no store.MessageSelector")
	}
	ctx := t.Context()
	all := fill(t, b, tn, "pages")
	for _, q := range queries() {
		got, next := must2(sel.SelectMessages(ctx, tn, "pages", q))
		want, wantNext := store.SelectPage(all, q)
		sameMessages(t, fmt.Sprintf("SelectMessages(%+v)", q), got, want)
		if next != wantNext {
			t.Fatalf("SelectMessages(%+v): next %d, want %d", q, next, wantNext)
		}
	}
	if got, next := must2(sel.SelectMessages(ctx, tn, "unknown", store.MessageQuery{MaxTokens: 100})); len(got) != 0 || next != 0 {
		t.Fatalf("SelectMessages of an unknown session: %d messages, next %d", len(got), next)
	}
}

// sameKnowledge reports whether got has want's ids, content and score, in order.
func sameKnowledge(got, want []store.Knowledge) bool {
	return slices.EqualFunc(got, want, func(g, w store.Knowledge) bool {
		return g.ID == w.ID && g.DocumentID == w.DocumentID && g.Content == w.Content && g.Score == w.Score
	})
}

func testBackendSession(t *testing.T, b store.Backend, tn string) {
	ctx := t.Context()
	o1 := must(b.AppendToolOutput(ctx, tn, "s", store.ToolOutput{Tool: "check_account", CallID: "c1", Args: "{}", Result: `{"plan":"free"}`, Time: now()}))
	o2 := must(b.AppendToolOutput(ctx, tn, "s", store.ToolOutput{Tool: "search", Result: "[]", Time: now()}))
	if o1.Seq != 1 || o2.Seq != 2 {
		t.Fatalf("tool output seqs %d, %d, want 1, 2", o1.Seq, o2.Seq)
	}
	outs := must(b.ToolOutputs(ctx, tn, "s"))
	if len(outs) != 2 || outs[0].Seq != 1 || outs[0].Tool != "check_account" || outs[0].CallID != "c1" || outs[0].Args != "{}" ||
		outs[0].Result != `{"plan":"free"}` || !outs[0].Time.Equal(o1.Time) || outs[1].Tool != "search" {
		t.Fatalf("ToolOutputs = %+v", outs)
	}
	items := []store.Knowledge{{ID: "k1", DocumentID: "pricing", Content: "Premium is $20.", Score: 0.9}, {ID: "k2", Content: "Free is free.", Score: 0.5}}
	ok(t, b.SetKnowledge(ctx, tn, "kb", items))
	if got := must(b.Knowledge(ctx, tn, "kb")); !sameKnowledge(got, items) {
		t.Fatalf("Knowledge = %+v, want %+v", got, items)
	}
	ok(t, b.SetKnowledge(ctx, tn, "kb", items[1:]))
	if got := must(b.Knowledge(ctx, tn, "kb")); !sameKnowledge(got, items[1:]) {
		t.Fatalf("after replacing, Knowledge = %+v", got)
	}
	// A session with knowledge alone is a session: it can be deleted, once.
	ok(t, b.DeleteSession(ctx, tn, "kb"))
	wantErr(t, b.DeleteSession(ctx, tn, "kb"), store.ErrNotFound, "DeleteSession of a deleted session")
	ok(t, b.SetKnowledge(ctx, tn, "s", nil))
	if got := must(b.Knowledge(ctx, tn, "s")); len(got) != 0 {
		t.Fatalf("after clearing, Knowledge = %+v", got)
	}
	ok(t, b.DeleteSession(ctx, tn, "s"))
	if outs := must(b.ToolOutputs(ctx, tn, "s")); len(outs) != 0 {
		t.Fatalf("after DeleteSession, %d tool outputs", len(outs))
	}
	wantErr(t, b.DeleteSession(ctx, tn, "never"), store.ErrNotFound, "DeleteSession of an unknown session")
	ok(t, b.Ping(ctx))
}

func testBackendLoad(t *testing.T, b store.Backend, tn string) {
	l, isLoader := b.(store.Loader)
	if !isLoader {
		t.Skip("the backend is no store.Loader")
	}
	ctx := t.Context()
	agent := store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant.", UpdatedAt: now()}
	ok(t, b.PutAgent(ctx, tn, agent))
	for _, kv := range [][2]string{{"name", "Bob"}, {"tier", "free"}} {
		ok(t, b.SetFact(ctx, tn, "user_42", store.Fact{Key: kv[0], Value: kv[1], UpdatedAt: now()}))
	}
	all := fill(t, b, tn, "sess_42")
	must(b.AppendToolOutput(ctx, tn, "sess_42", store.ToolOutput{Tool: "check_account", Result: "{}", Time: now()}))
	items := []store.Knowledge{{ID: "k", Content: "Premium is $20."}}
	ok(t, b.SetKnowledge(ctx, tn, "sess_42", items))
	for _, q := range []store.LoadQuery{{MaxMessages: 9}, {MaxTokens: 100}, {MaxMessages: 40, MaxTokens: 400, CountToolCalls: true},
		{MaxTokens: 250, Encoding: store.EstimateEncoding}, {MaxTokens: 1}, {}} {
		q.Agent, q.User, q.Session = "demo_agent", "user_42", "sess_42"
		snap := must(l.Load(ctx, tn, q))
		if len(snap.Errors) != 0 {
			t.Fatalf("Load %+v: errors %v", q, snap.Errors)
		}
		want, next := store.SelectPage(all, q.History())
		sameMessages(t, fmt.Sprintf("Load %+v", q), snap.Messages, want)
		if snap.NextBefore != next {
			t.Fatalf("Load %+v: next before %d, want %d", q, snap.NextBefore, next)
		}
		if snap.Agent == nil || snap.Agent.Instructions != agent.Instructions || !maps.Equal(factValues(snap.Facts), map[string]string{"name": "Bob", "tier": "free"}) ||
			len(snap.ToolOutputs) != 1 || snap.ToolOutputs[0].Tool != "check_account" || !sameKnowledge(snap.Knowledge, items) {
			t.Fatalf("Load %+v = %+v", q, snap)
		}
	}
	missing := must(l.Load(ctx, tn, store.LoadQuery{Agent: "ghost", User: "nobody", Session: "none"}))
	if err := missing.Errors[store.SourceAgent]; !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load of a missing agent: %v, want ErrNotFound", err)
	}
	if missing.Agent != nil || len(missing.Facts)+len(missing.Messages)+len(missing.ToolOutputs)+len(missing.Knowledge) != 0 || missing.NextBefore != 0 {
		t.Fatalf("Load of nothing = %+v", missing)
	}
	if only := must(l.Load(ctx, tn, store.LoadQuery{User: "user_42"})); only.Agent != nil || len(only.Facts) != 2 || len(only.Messages) != 0 {
		t.Fatalf("Load of the user alone = %+v", only)
	}
}

func testBackendTenants(t *testing.T, b store.Backend) {
	ctx := t.Context()
	ok(t, b.PutAgent(ctx, "globex", store.Agent{ID: "bot", Instructions: "globex's", UpdatedAt: now()}))
	ok(t, b.SetFact(ctx, "globex", "u", store.Fact{Key: "k", Value: "globex's", UpdatedAt: now()}))
	must(b.AppendMessages(ctx, "globex", "s", prepared(store.Message{Role: "user", Content: "globex's"})))
	ok(t, b.SetKnowledge(ctx, "globex", "s", []store.Knowledge{{Content: "globex's"}}))
	_, err := b.GetAgent(ctx, "initech", "bot")
	wantErr(t, err, store.ErrNotFound, "an agent of another tenant")
	page, _ := must2(b.ReadMessages(ctx, "initech", "s", 0, math.MaxInt))
	if len(page)+len(must(b.Facts(ctx, "initech", "u")))+len(must(b.Knowledge(ctx, "initech", "s"))) != 0 {
		t.Fatal("a tenant reads another tenant's state")
	}
	wantErr(t, b.DeleteSession(ctx, "initech", "s"), store.ErrNotFound, "DeleteSession of another tenant's session")
	if m := must(b.AppendMessages(ctx, "initech", "s", prepared(store.Message{Role: "user", Content: "initech's"}))); m[0].Seq != 1 {
		t.Fatalf("another tenant's session of the same id: seq %d, want 1", m[0].Seq)
	}
}

// must2 is must for two results.
func must2[A, B any](a A, b B, err error) (A, B) {
	must(0, err)
	return a, b
}
