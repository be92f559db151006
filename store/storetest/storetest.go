// Package storetest holds the conformance suites of package store: [Run] checks a store.Store, the front,
// over a backend (`storetest.Run(t, newStore)`, once for each backend), and [RunBackend] checks a
// store.Backend against the narrower contract the front relies on.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"maps"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// NewStore opens a fresh, empty store (a backend behind its front) with opts for one test. The suite closes it (Close may be called
// twice; the second call's error is ignored).
type NewStore func(t *testing.T, opts store.Options) *store.Store

// Run runs the conformance suite against the stores newStore opens.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, newStore NewStore)
	}{
		{"Agents", testAgents},
		{"Facts", testFacts},
		{"Messages", testMessages},
		{"MessageQuery", testMessageQuery},
		{"MessagePages", func(t *testing.T, newStore NewStore) { MessagePages(t, open(t, newStore, store.Options{}), tenant) }},
		{"MessageValidation", testMessageValidation},
		{"MessageParts", testMessageParts},
		{"ToolOutputsAndKnowledge", testToolOutputsAndKnowledge},
		{"DeleteSession", testDeleteSession},
		{"ConcurrentAppends", testConcurrentAppends},
		{"TenantIsolation", testTenantIsolation},
		{"TTL", testTTL},
		{"LargeValues", testLargeValues},
		{"Unicode", testUnicode},
		{"Load", testLoad},
		{"Summaries", testSummaries},
		{"CacheStates", testCacheStates},
		{"Assemblies", testAssemblies},
		{"AssemblySessions", testAssemblySessions},
		{"BadIDs", testBadIDs},
		{"ContextAndClose", testContextAndClose},
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
			tc.run(t, newStore)
		})
	}
}

func open(t *testing.T, newStore NewStore, opts store.Options) *store.Store {
	t.Helper()
	s := newStore(t, opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// must returns v, or stops the test (through the recover in Run) if err is not nil.
func must[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(mustError{fmt.Errorf("%s:%d: %w", filepath.Base(file), line, err)})
	}
	return v
}

type mustError struct{ err error }

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

const tenant = "acme"

func testAgents(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	_, err := s.GetAgent(ctx, tenant, "support")
	wantErr(t, err, store.ErrNotFound, "GetAgent of a missing agent")
	wantErr(t, s.DeleteAgent(ctx, tenant, "support"), store.ErrNotFound, "DeleteAgent of a missing agent")

	strict := true
	a := store.Agent{
		ID: "support", Instructions: "You are a helpful AI assistant.", Constraints: "Be concise and accurate.",
		OutputFormat: "Plain text.", Model: "gpt-4o", MaxTokens: 4000, CacheBreakpoints: "auto", CacheTTL: "1h+5m",
		Tools: []assembler.Tool{{Type: "function", Function: assembler.ToolFunction{Name: "check_account",
			Description: "Look up the account", Parameters: []byte(`{"type":"object","properties":{"user":{"type":"string"}}}`), Strict: &strict}}},
		Policy: &assembler.Policy{KnowledgeOrder: assembler.OrderLostInTheMiddle, MinScore: 0.25},
	}
	ok(t, s.PutAgent(ctx, tenant, a))
	got := must(s.GetAgent(ctx, tenant, "support"))
	if got.UpdatedAt.IsZero() {
		t.Error("UpdatedAt not set")
	}
	if got.Instructions != a.Instructions || got.Constraints != a.Constraints || got.OutputFormat != a.OutputFormat ||
		got.Model != a.Model || got.MaxTokens != a.MaxTokens || len(got.Tools) != 1 ||
		got.CacheBreakpoints != a.CacheBreakpoints || got.CacheTTL != a.CacheTTL ||
		got.Tools[0].Function.Name != "check_account" || !jsonEqual(got.Tools[0].Function.Parameters, a.Tools[0].Function.Parameters) ||
		got.Tools[0].Function.Strict == nil || !*got.Tools[0].Function.Strict ||
		got.Policy == nil || got.Policy.KnowledgeOrder != assembler.OrderLostInTheMiddle || got.Policy.MinScore != 0.25 {
		t.Fatalf("GetAgent = %+v, want %+v", got, a)
	}
	if want := "You are a helpful AI assistant.\n\nConstraints: Be concise and accurate.\nFormat: Plain text."; got.SystemPrompt() != want {
		t.Errorf("SystemPrompt = %q, want %q", got.SystemPrompt(), want)
	}

	a.Instructions, a.Tools, a.Policy = "You are terse.", nil, nil
	ok(t, s.PutAgent(ctx, tenant, a))
	got = must(s.GetAgent(ctx, tenant, "support"))
	if got.Instructions != "You are terse." || len(got.Tools) != 0 || got.Policy != nil {
		t.Fatalf("after replacing, GetAgent = %+v", got)
	}
	wantErr(t, s.PutAgent(ctx, tenant, store.Agent{ID: "x", Tools: []assembler.Tool{{Function: assembler.ToolFunction{Name: "f", Parameters: []byte("{not json")}}}}), store.ErrInvalid, "a tool with bad JSON")
	wantErr(t, s.PutAgent(ctx, tenant, store.Agent{}), store.ErrInvalid, "an agent without id")
	wantErr(t, s.PutAgent(ctx, tenant, store.Agent{ID: "x", Model: "gpt-4", MaxTokens: 1_000_000}), store.ErrInvalid, "a budget over the model's window")
	wantErr(t, s.PutAgent(ctx, tenant, store.Agent{ID: "x", CacheTTL: "10m"}), store.ErrInvalid, "an unknown cache_ttl")
	wantErr(t, s.PutAgent(ctx, tenant, store.Agent{ID: "x", CacheBreakpoints: "off", CacheTTL: "1h"}), store.ErrInvalid, "a cache_ttl with cache_breakpoints off")
	ok(t, s.PutAgent(ctx, tenant, store.Agent{ID: "y", Model: "a-model-of-its-own", MaxTokens: 1_000_000})) // unknown: the request decides
	ok(t, s.PutAgent(ctx, tenant, store.Agent{ID: "z", Model: "gpt-4o", MaxTokens: 120_000}))               // fits with a smaller reserve_output
	ok(t, s.DeleteAgent(ctx, tenant, "support"))
	_, err = s.GetAgent(ctx, tenant, "support")
	wantErr(t, err, store.ErrNotFound, "GetAgent after DeleteAgent")
}

func jsonEqual(a, b []byte) bool {
	return strings.Join(strings.Fields(string(a)), "") == strings.Join(strings.Fields(string(b)), "")
}

func testFacts(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	if f := must(s.Facts(ctx, tenant, "nobody")); len(f) != 0 {
		t.Fatalf("Facts of an unknown user = %v", f)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ok(t, s.SetFact(ctx, tenant, "user_42", store.Fact{Key: "tier", Value: "free", Source: "billing", UpdatedAt: when}))
	ok(t, s.SetFact(ctx, tenant, "user_42", store.Fact{Key: "name", Value: "Bob", Pinned: true}))
	ok(t, s.SetFact(ctx, tenant, "user_42", store.Fact{Key: "preferred_language", Value: "English"}))
	ok(t, s.SetFact(ctx, tenant, "user_42", store.Fact{Key: "tier", Value: "premium", Source: "billing", UpdatedAt: when.Add(time.Hour)}))
	facts := must(s.Facts(ctx, tenant, "user_42"))
	var keys []string
	for _, f := range facts {
		keys = append(keys, f.Key+"="+f.Value)
		if f.UpdatedAt.IsZero() {
			t.Errorf("fact %q has no UpdatedAt", f.Key)
		}
	}
	if got, want := strings.Join(keys, ","), "name=Bob,preferred_language=English,tier=premium"; got != want {
		t.Fatalf("Facts = %s, want %s (ordered by key, the update replacing)", got, want)
	}
	if !facts[0].Pinned || facts[1].Pinned {
		t.Errorf("pinned flags = %v, %v", facts[0].Pinned, facts[1].Pinned)
	}
	if !facts[2].UpdatedAt.Equal(when.Add(time.Hour)) || facts[2].Source != "billing" {
		t.Errorf("tier fact = %+v", facts[2])
	}
	wantErr(t, s.DeleteFact(ctx, tenant, "user_42", "nope"), store.ErrNotFound, "DeleteFact of a missing key")
	ok(t, s.DeleteFact(ctx, tenant, "user_42", "tier"))
	if n := len(must(s.Facts(ctx, tenant, "user_42"))); n != 2 {
		t.Fatalf("after DeleteFact, %d facts", n)
	}
	wantErr(t, s.SetFact(ctx, tenant, "user_42", store.Fact{Value: "no key"}), store.ErrInvalid, "a fact without key")
}

func testMessages(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	if m := must(s.Messages(ctx, tenant, "new", store.MessageQuery{})); len(m) != 0 {
		t.Fatalf("Messages of an unknown session = %v", m)
	}
	in := []store.Message{
		{Role: "user", Content: "Hi, I need help with my account"},
		{Role: "assistant", Content: "Sure! What do you need help with?"},
		{Role: "user", Content: "I want to upgrade to premium"},
		{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: "call_1", Function: assembler.ToolCallFunction{Name: "check_account", Arguments: `{"user":"user_42"}`}}}},
		{Role: "tool", ToolCallID: "call_1", Name: "check_account", Content: `{"plan": "free", "eligible_upgrade": true}`},
	}
	before := time.Now().Add(-time.Second)
	got := must(s.AppendMessages(ctx, tenant, "sess_42", in[:3]...))
	got = append(got, must(s.AppendMessages(ctx, tenant, "sess_42", in[3:]...))...)
	read := must(s.Messages(ctx, tenant, "sess_42", store.MessageQuery{}))
	for _, list := range [][]store.Message{got, read} {
		if len(list) != len(in) {
			t.Fatalf("%d messages, want %d", len(list), len(in))
		}
		for i, m := range list {
			w := in[i]
			if m.Seq != int64(i+1) || m.Role != w.Role || m.Content != w.Content || m.Name != w.Name || m.ToolCallID != w.ToolCallID {
				t.Errorf("message %d = %+v, want %+v with seq %d", i, m, w, i+1)
			}
			if len(m.ToolCalls) != len(w.ToolCalls) || (len(w.ToolCalls) == 1 && (m.ToolCalls[0].ID != "call_1" ||
				m.ToolCalls[0].Type != "function" || m.ToolCalls[0].Function != w.ToolCalls[0].Function)) {
				t.Errorf("message %d tool calls = %+v", i, m.ToolCalls)
			}
			if m.Time.Before(before) || m.Time.After(time.Now().Add(time.Second)) {
				t.Errorf("message %d time %v", i, m.Time)
			}
			for _, enc := range []*tokenizer.Encoding{tokenizer.O200K(), tokenizer.CL100K()} {
				if n, ok := m.TokenCounts[enc.Name()]; !ok || n != enc.Count(w.Content) {
					t.Errorf("message %d: %s count %d (%v), want %d", i, enc.Name(), n, ok, enc.Count(w.Content))
				}
			}
			// The estimate is cached too, under its rule's key: what the estimator says of the content now.
			if n, ok := m.TokenCounts[tokenizer.EstimateKey]; !ok || n != tokenizer.Estimate(w.Content) {
				t.Errorf("message %d: %s count %d (%v), want %d", i, tokenizer.EstimateKey, n, ok, tokenizer.Estimate(w.Content))
			}
		}
	}
	// A time given by the writer is kept; counts given are not trusted but counted, as read back too.
	when := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	m := must(s.AppendMessages(ctx, tenant, "sess_43", store.Message{Role: "user", Content: "x", Time: when,
		TokenCounts: map[string]int{"o200k_base": 7, "cl100k_base": -3, "made_up": 2, tokenizer.EstimateKey: 9}}))[0]
	if !m.Time.Equal(when) || len(m.TokenCounts) != 3 || m.TokenCounts["o200k_base"] != 1 || m.TokenCounts["cl100k_base"] != 1 ||
		m.TokenCounts[tokenizer.EstimateKey] != 1 {
		t.Errorf("appended %+v", m)
	}
	if got := must(s.Messages(ctx, tenant, "sess_43", store.MessageQuery{})); len(got) != 1 || got[0].TokenCounts["o200k_base"] != 1 ||
		got[0].TokenCounts[tokenizer.EstimateKey] != 1 {
		t.Errorf("read back %+v", got)
	}
}

func testMessageQuery(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	var in []store.Message
	for i := range 30 {
		in = append(in, store.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("message number %d", i)})
	}
	must(s.AppendMessages(ctx, tenant, "s", in...))
	last := must(s.Messages(ctx, tenant, "s", store.MessageQuery{Limit: 4}))
	if len(last) != 4 || last[0].Content != "message number 26" || last[3].Seq != 30 {
		t.Fatalf("Limit 4: %+v", last)
	}
	per := tokenizer.O200K().Count("message number 10") + store.MessageOverhead
	fit := must(s.Messages(ctx, tenant, "s", store.MessageQuery{MaxTokens: 3*per + per/2}))
	if len(fit) != 3 || fit[2].Seq != 30 {
		t.Fatalf("MaxTokens for 3.5 messages: got %d messages", len(fit))
	}
	both := must(s.Messages(ctx, tenant, "s", store.MessageQuery{MaxTokens: 100 * per, Limit: 5, Encoding: tokenizer.CL100KBase}))
	if len(both) != 5 {
		t.Fatalf("Limit 5 with a large budget: %d messages", len(both))
	}
	if n := len(must(s.Messages(ctx, tenant, "s", store.MessageQuery{MaxTokens: 1}))); n != 0 {
		t.Fatalf("MaxTokens 1: %d messages", n)
	}
}

// pagingSession is a session that tells the counts of MessageQuery apart: prose, text whose estimate is far
// from its exact counts (long runs of spaces, CJK), tool calls from tiny to several
// store.ToolCallBytesPerToken long, and a message without content.
func pagingSession() []store.Message {
	var msgs []store.Message
	for i := range 60 {
		var m store.Message
		switch i % 6 {
		case 0:
			m = store.Message{Role: "user", Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("why so? ", i%13))}
		case 1:
			m = store.Message{Role: "assistant", Content: "世界の" + strings.Repeat("ことば ", i%7) + "answer", Name: "helper"}
		case 2:
			args := fmt.Sprintf(`{"q":%q}`, strings.Repeat("<a&b> ", (i*97)%700))
			content := ""
			if i%4 == 0 {
				content = "Let me look."
			}
			m = store.Message{Role: "assistant", Content: content, ToolCalls: []assembler.ToolCall{
				{ID: fmt.Sprint("call_", i), Function: assembler.ToolCallFunction{Name: "search", Arguments: args}},
				{ID: fmt.Sprint("call_", i, "b"), Type: "function", Function: assembler.ToolCallFunction{Name: "fetch", Arguments: `{}`}}}}
		case 3:
			m = store.Message{Role: "tool", ToolCallID: fmt.Sprint("call_", i-1), Content: `{"hits": ` + fmt.Sprint(i) + `}`}
		case 4:
			m = store.Message{Role: "user", Content: "a" + strings.Repeat(" ", 50+i*11) + "b"}
		case 5:
			m = store.Message{Role: "system", Content: "Note: " + strings.Repeat("x", i)}
		}
		msgs = append(msgs, m)
	}
	// Tool calls whose JSON is one byte short of two ToolCallBytesPerToken, and exactly two.
	for _, size := range []int{2*store.ToolCallBytesPerToken - 1, 2 * store.ToolCallBytesPerToken} {
		calls := []assembler.ToolCall{{ID: "call_exact", Type: "function", Function: assembler.ToolCallFunction{Name: "f"}}}
		calls[0].Function.Arguments = `{"q":""}`
		pad := size - store.ToolCallsLen(calls)
		calls[0].Function.Arguments = `{"q":"` + strings.Repeat("z", pad) + `"}`
		msgs = append(msgs, store.Message{Role: "assistant", ToolCalls: calls},
			store.Message{Role: "tool", ToolCallID: "call_exact", Content: "done"})
	}
	return msgs
}

// MessagePages checks on s, an empty store (or one without the session "pages" of tenant), that
// Store.Messages and Store.Load select exactly as store.SelectMessages does for every mix of a
// MessageQuery's fields, and that reading a session page by page with Before returns each message once.
// Run calls it; a backend that holds one tenant only (the Valkey cookbook's key layout) calls it with that
// tenant.
func MessagePages(t *testing.T, s *store.Store, tenant string) {
	ctx := t.Context()
	const sess = "pages"
	in := pagingSession()
	must(s.AppendMessages(ctx, tenant, sess, in[:25]...))
	must(s.AppendMessages(ctx, tenant, sess, in[25:]...))
	all := must(s.Messages(ctx, tenant, sess, store.MessageQuery{}))
	if len(all) != len(in) || all[0].Seq != 1 || all[len(all)-1].Seq != int64(len(in)) {
		t.Fatalf("%d messages read back of %d", len(all), len(in))
	}
	same := func(what string, got, want []store.Message) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d messages, want %d (seqs %v, want %v)", what, len(got), len(want), seqs(got), seqs(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Seq != w.Seq || g.Role != w.Role || g.Content != w.Content || g.Name != w.Name || len(g.ToolCalls) != len(w.ToolCalls) ||
				g.TokenCounts[tokenizer.O200KBase] != w.TokenCounts[tokenizer.O200KBase] {
				t.Fatalf("%s: message %d = %+v, want %+v", what, i, g, w)
			}
		}
	}
	for _, before := range []int64{0, 1, 2, 17, 31, 59, 63, 64, 65, 200} {
		for _, limit := range []int{0, 1, 7, 100} {
			for _, maxTokens := range []int{0, 1, 5, 30, 200, 1500, 1_000_000} {
				for _, enc := range []string{"", tokenizer.CL100KBase, store.EstimateEncoding} {
					for _, calls := range []bool{false, true} {
						q := store.MessageQuery{Before: before, Limit: limit, MaxTokens: maxTokens, Encoding: enc, CountToolCalls: calls}
						same(fmt.Sprintf("%+v", q), must(s.Messages(ctx, tenant, sess, q)), store.SelectMessages(all, q))
					}
				}
			}
		}
	}
	// A message that costs MaxTokens exactly is read; one token less, it is not.
	for _, m := range all {
		for _, enc := range []string{"", tokenizer.CL100KBase, store.EstimateEncoding} {
			for _, calls := range []bool{false, true} {
				q := store.MessageQuery{Before: m.Seq + 1, MaxTokens: store.MessageTokens(m, enc, calls), Encoding: enc, CountToolCalls: calls}
				same(fmt.Sprintf("%+v", q), must(s.Messages(ctx, tenant, sess, q)), []store.Message{m})
				q.MaxTokens--
				same(fmt.Sprintf("%+v", q), must(s.Messages(ctx, tenant, sess, q)), nil)
			}
		}
	}
	// A walk by pages, newest first, returns each message once, whatever bounds a page.
	for _, page := range []store.MessageQuery{{Limit: 7}, {MaxTokens: 2000, CountToolCalls: true}, {Limit: 5, MaxTokens: 3000, Encoding: store.EstimateEncoding}} {
		var walked []store.Message
		for q := page; ; {
			got := must(s.Messages(ctx, tenant, sess, q))
			if len(got) == 0 {
				break
			}
			walked = append(got, walked...)
			q.Before = got[0].Seq
		}
		same(fmt.Sprintf("walk by %+v", page), walked, all)
	}
	// Load reads what its query selects, and says where the rest begins.
	for _, q := range []store.LoadQuery{{}, {MaxMessages: 9}, {MaxTokens: 100}, {MaxMessages: 40, MaxTokens: 400, CountToolCalls: true},
		{MaxTokens: 250, Encoding: store.EstimateEncoding}, {MaxTokens: 1}, {MaxTokens: 1_000_000, Encoding: tokenizer.CL100KBase}} {
		q.Session = sess
		snap := must(s.Load(ctx, tenant, q))
		want, next := store.SelectPage(all, q.History())
		same(fmt.Sprintf("Load %+v", q), snap.Messages, want)
		if snap.NextBefore != next || snap.Errors[store.SourceHistory] != nil {
			t.Fatalf("Load %+v: next before %d (%v), want %d", q, snap.NextBefore, snap.Errors, next)
		}
		rest := store.MessageQuery{Before: snap.NextBefore}
		if next == 0 {
			rest.Limit = 1 // nothing before: Before 0 would read from the newest
			rest.Before = 1
		}
		same(fmt.Sprintf("after Load %+v", q), append(must(s.Messages(ctx, tenant, sess, rest)), snap.Messages...), all)
	}
	for _, q := range []store.MessageQuery{{Before: -1}, {Limit: -1}, {MaxTokens: -1}, {MaxTokens: 10, Encoding: "p50k_base"}} {
		_, err := s.Messages(ctx, tenant, sess, q)
		wantErr(t, err, store.ErrInvalid, fmt.Sprintf("Messages %+v", q))
	}
	_, err := s.Load(ctx, tenant, store.LoadQuery{Session: sess, MaxTokens: 10, Encoding: "nope"})
	wantErr(t, err, store.ErrInvalid, "Load with an unknown encoding")
}

func seqs(msgs []store.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

func testMessageValidation(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	for name, m := range map[string]store.Message{
		"bad role":              {Role: "wizard", Content: "x"},
		"tool without call id":  {Role: "tool", Content: "x"},
		"invalid UTF-8":         {Role: "user", Content: "a\xffb"},
		"user with tool calls":  {Role: "user", ToolCalls: []assembler.ToolCall{{ID: "c", Function: assembler.ToolCallFunction{Name: "f"}}}},
		"call without id":       {Role: "assistant", ToolCalls: []assembler.ToolCall{{Function: assembler.ToolCallFunction{Name: "f"}}}},
		"call with bad JSON":    {Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: "c", Function: assembler.ToolCallFunction{Name: "f", Arguments: "{"}}}},
		"call without function": {Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: "c"}}},
		"call of another type":  {Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: "c", Type: "custom", Function: assembler.ToolCallFunction{Name: "f"}}}},
	} {
		_, err := s.AppendMessages(ctx, tenant, "v", store.Message{Role: "user", Content: "fine"}, m)
		wantErr(t, err, store.ErrInvalid, name)
	}
	_, err := s.AppendMessages(ctx, tenant, "v")
	wantErr(t, err, store.ErrInvalid, "no messages")
	_, err = s.AppendMessages(ctx, tenant, "v", store.Message{Role: "user", Content: "x", Name: strings.Repeat("n", store.DefaultMaxIDBytes+1)})
	wantErr(t, err, store.ErrTooLarge, "a name longer than an id")
	// A rejected batch stores nothing, not even its valid messages.
	if n := len(must(s.Messages(ctx, tenant, "v", store.MessageQuery{}))); n != 0 {
		t.Fatalf("a rejected append stored %d messages", n)
	}
}

// testMessageParts: a user message's content parts (texts, an image's data, an image at a URL with its
// size) are stored and read back as appended, without Content beside them too; the store keeps its own copy
// of an image's data; invalid parts are refused before anything is stored.
func testMessageParts(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	url := loom.ImageURLPart("https://example.com/a.jpg", loom.DetailLow)
	url.Image.Width, url.Image.Height = 1024, 768
	in := []store.Message{
		{Role: "user", Content: "What are these?", Parts: []loom.Part{loom.ImageDataPart(data, loom.DetailHigh), loom.TextPart("and \u00e9 \n this"), url}},
		{Role: "assistant", Content: "Two pictures."},
		{Role: "user", Parts: []loom.Part{{Type: loom.PartImage, Image: &loom.Image{Data: data, MediaType: "image/png"}}}},
	}
	want := make([]store.Message, len(in))
	for i, m := range in {
		want[i] = store.Message{Role: m.Role, Content: m.Content, Parts: store.CloneParts(m.Parts)}
	}
	got := must(s.AppendMessages(ctx, tenant, "parts", in...))
	data[0] = 'X' // the caller's bytes, changed after the append
	read := must(s.Messages(ctx, tenant, "parts", store.MessageQuery{}))
	snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "parts"}))
	for what, list := range map[string][]store.Message{"appended": got, "read": read, "loaded": snap.Messages} {
		if len(list) != len(want) {
			t.Fatalf("%s: %d messages, want %d", what, len(list), len(want))
		}
		for i, m := range list {
			if m.Role != want[i].Role || m.Content != want[i].Content || !reflect.DeepEqual(m.Parts, want[i].Parts) {
				t.Errorf("%s message %d: %q %q %+v, want %+v", what, i, m.Role, m.Content, m.Parts, want[i].Parts)
			}
		}
	}
	if read[0].Parts[0].Image.Data[0] == 'X' {
		t.Error("the store kept the caller's image data, not a copy")
	}
	for name, c := range map[string]struct {
		m    store.Message
		want error
	}{
		"an assistant's parts": {store.Message{Role: "assistant", Content: "x", Parts: []loom.Part{loom.TextPart("y")}}, store.ErrInvalid},
		"not an image":         {store.Message{Role: "user", Parts: []loom.Part{loom.ImageDataPart([]byte("nope"), "")}}, store.ErrInvalid},
		"a file URL":           {store.Message{Role: "user", Parts: []loom.Part{loom.ImageURLPart("file:///etc/passwd", "")}}, store.ErrInvalid},
		"a bad detail":         {store.Message{Role: "user", Parts: []loom.Part{loom.ImageURLPart("https://a/b.png", "ultra")}}, store.ErrInvalid},
		"too many parts":       {store.Message{Role: "user", Parts: make([]loom.Part, loom.MaxParts+1)}, store.ErrTooLarge},
		"a blank text part":    {store.Message{Role: "user", Parts: []loom.Part{loom.TextPart(" ")}}, store.ErrInvalid},
	} {
		_, err := s.AppendMessages(ctx, tenant, "parts_bad", store.Message{Role: "user", Content: "fine"}, c.m)
		wantErr(t, err, c.want, name)
	}
	if n := len(must(s.Messages(ctx, tenant, "parts_bad", store.MessageQuery{}))); n != 0 {
		t.Fatalf("a rejected append stored %d messages", n)
	}
}

func testToolOutputsAndKnowledge(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	if o := must(s.ToolOutputs(ctx, tenant, "s")); len(o) != 0 {
		t.Fatalf("ToolOutputs of an unknown session = %v", o)
	}
	for i := range 12 {
		o := must(s.AppendToolOutput(ctx, tenant, "s", store.ToolOutput{Tool: "check_account", CallID: fmt.Sprintf("call_%d", i), Args: `{"user":"user_42"}`, Result: fmt.Sprintf(`{"step": %d}`, i)}))
		if o.Seq != int64(i+1) || o.Time.IsZero() {
			t.Fatalf("step %d: %+v", i, o)
		}
	}
	outs := must(s.ToolOutputs(ctx, tenant, "s"))
	if len(outs) != 12 {
		t.Fatalf("%d tool outputs", len(outs))
	}
	for i, o := range outs { // in order, step 10 after step 9
		if o.Seq != int64(i+1) || o.Result != fmt.Sprintf(`{"step": %d}`, i) || o.Tool != "check_account" || o.Args != `{"user":"user_42"}` || o.CallID != fmt.Sprintf("call_%d", i) {
			t.Fatalf("tool output %d = %+v", i, o)
		}
	}
	_, err := s.AppendToolOutput(ctx, tenant, "s", store.ToolOutput{Result: "x"})
	wantErr(t, err, store.ErrInvalid, "a tool output without a tool")

	kb := []store.Knowledge{
		{ID: "k1", DocumentID: "pricing", Content: "Premium costs $20/month.", Score: 0.92, Source: "Pricing", Type: "rag", StartOffset: 10, EndOffset: 34, Metadata: map[string]string{"title": "Pricing"}},
		{ID: "k2", Content: " Free plan: 5 projects & <3 seats>.\n", Score: 0.5, Trusted: true,
			TokenCounts: map[string]int{assembler.KnowledgeCountKey(tokenizer.EstimateKey): 99, "made_up": 2}},
	}
	ok(t, s.SetKnowledge(ctx, tenant, "s", kb))
	got := must(s.Knowledge(ctx, tenant, "s"))
	if len(got) != 2 || got[0].ID != "k1" || got[0].Content != kb[0].Content || got[0].Score != 0.92 || got[0].Source != "Pricing" ||
		got[0].DocumentID != "pricing" || got[0].StartOffset != 10 || got[0].EndOffset != 34 || got[0].Metadata["title"] != "Pricing" ||
		got[1].ID != "k2" || !got[1].Trusted {
		t.Fatalf("Knowledge = %+v", got)
	}
	// Each item's counts are of its text as the assembler renders it, counted by the store whatever was
	// given: in the two encodings, and the estimate under its rule's key.
	for _, k := range got {
		rendered := assembler.RenderedKnowledge(k.Content)
		want := map[string]int{assembler.KnowledgeCountKey(tokenizer.O200KBase): tokenizer.O200K().Count(rendered),
			assembler.KnowledgeCountKey(tokenizer.CL100KBase):  tokenizer.CL100K().Count(rendered),
			assembler.KnowledgeCountKey(tokenizer.EstimateKey): tokenizer.Estimate(rendered)}
		if !maps.Equal(k.TokenCounts, want) {
			t.Errorf("knowledge %s: counts %v, want %v", k.ID, k.TokenCounts, want)
		}
	}
	ok(t, s.SetKnowledge(ctx, tenant, "s", kb[1:]))
	if got := must(s.Knowledge(ctx, tenant, "s")); len(got) != 1 || got[0].ID != "k2" {
		t.Fatalf("after replacing, Knowledge = %+v", got)
	}
	ok(t, s.SetKnowledge(ctx, tenant, "s", nil))
	if got := must(s.Knowledge(ctx, tenant, "s")); len(got) != 0 {
		t.Fatalf("after clearing, Knowledge = %+v", got)
	}
	wantErr(t, s.SetKnowledge(ctx, tenant, "s", []store.Knowledge{{Content: "\xc3"}}), store.ErrInvalid, "knowledge with invalid UTF-8")
}

func testDeleteSession(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	wantErr(t, s.DeleteSession(ctx, tenant, "s"), store.ErrNotFound, "DeleteSession of an unknown session")
	must(s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "hello"}))
	must(s.AppendToolOutput(ctx, tenant, "s", store.ToolOutput{Tool: "t", Result: "r"}))
	ok(t, s.SetKnowledge(ctx, tenant, "s", []store.Knowledge{{Content: "k"}}))
	must(s.AppendMessages(ctx, tenant, "other", store.Message{Role: "user", Content: "stay"}))
	ok(t, s.DeleteSession(ctx, tenant, "s"))
	if n := len(must(s.Messages(ctx, tenant, "s", store.MessageQuery{}))) + len(must(s.ToolOutputs(ctx, tenant, "s"))) + len(must(s.Knowledge(ctx, tenant, "s"))); n != 0 {
		t.Fatalf("%d items left after DeleteSession", n)
	}
	wantErr(t, s.DeleteSession(ctx, tenant, "s"), store.ErrNotFound, "DeleteSession twice")
	if n := len(must(s.Messages(ctx, tenant, "other", store.MessageQuery{}))); n != 1 {
		t.Fatalf("another session lost its messages: %d", n)
	}
	// A deleted session starts again from seq 1.
	m := must(s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "again"}))
	if m[0].Seq != 1 {
		t.Errorf("first message after delete has seq %d", m[0].Seq)
	}
	// Knowledge alone makes a session.
	ok(t, s.SetKnowledge(ctx, tenant, "kb-only", []store.Knowledge{{Content: "k"}}))
	ok(t, s.DeleteSession(ctx, tenant, "kb-only"))
}

func testConcurrentAppends(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	const writers, batches = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				_, err := s.AppendMessages(ctx, tenant, "busy",
					store.Message{Role: "user", Content: fmt.Sprintf("w%d b%d q", w, b)},
					store.Message{Role: "assistant", Content: fmt.Sprintf("w%d b%d a", w, b)})
				if err != nil {
					errs <- err
					return
				}
				if _, err := s.AppendToolOutput(ctx, tenant, "busy", store.ToolOutput{Tool: "t", Result: fmt.Sprintf("w%d b%d", w, b)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	msgs := must(s.Messages(ctx, tenant, "busy", store.MessageQuery{}))
	if len(msgs) != writers*batches*2 {
		t.Fatalf("%d messages, want %d", len(msgs), writers*batches*2)
	}
	next := map[int]int{}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
		var w, b int
		var part string
		if _, err := fmt.Sscanf(m.Content, "w%d b%d %s", &w, &b, &part); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if part != "q" || b != next[w] {
				t.Fatalf("message %d %q: batch out of order or split", i, m.Content)
			}
		} else {
			if want := fmt.Sprintf("w%d b%d a", w, b); part != "a" || msgs[i-1].Content != fmt.Sprintf("w%d b%d q", w, b) {
				t.Fatalf("message %d %q does not follow its question (want %q)", i, m.Content, want)
			}
			next[w]++
		}
	}
	outs := must(s.ToolOutputs(ctx, tenant, "busy"))
	if len(outs) != writers*batches {
		t.Fatalf("%d tool outputs, want %d", len(outs), writers*batches)
	}
	for i, o := range outs {
		if o.Seq != int64(i+1) {
			t.Fatalf("tool output %d has seq %d", i, o.Seq)
		}
	}
}

func testTenantIsolation(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	for _, tn := range []string{"acme", "globex"} {
		ok(t, s.PutAgent(ctx, tn, store.Agent{ID: "bot", Instructions: "agent of " + tn}))
		ok(t, s.SetFact(ctx, tn, "u", store.Fact{Key: "name", Value: "user of " + tn}))
		must(s.AppendMessages(ctx, tn, "s", store.Message{Role: "user", Content: "message of " + tn}))
		must(s.AppendToolOutput(ctx, tn, "s", store.ToolOutput{Tool: "t", Result: "output of " + tn}))
		ok(t, s.SetKnowledge(ctx, tn, "s", []store.Knowledge{{Content: "knowledge of " + tn}}))
	}
	// Ids that look like another tenant's keys stay inside the tenant.
	// (Without escaping, "acme" + "q:s:y" and "acme:s:q" + "y" would both be "t:acme:s:q:s:y".)
	must(s.AppendMessages(ctx, "acme", "q:s:y", store.Message{Role: "user", Content: "tricky"}))
	must(s.AppendMessages(ctx, "acme", "}:msgs", store.Message{Role: "user", Content: "tricky"}))
	ok(t, s.SetFact(ctx, "acme", "q}:mem", store.Fact{Key: "k", Value: "tricky"}))
	for _, tn := range []string{"acme", "globex"} {
		a := must(s.GetAgent(ctx, tn, "bot"))
		f := must(s.Facts(ctx, tn, "u"))
		m := must(s.Messages(ctx, tn, "s", store.MessageQuery{}))
		o := must(s.ToolOutputs(ctx, tn, "s"))
		k := must(s.Knowledge(ctx, tn, "s"))
		if a.Instructions != "agent of "+tn || len(f) != 1 || f[0].Value != "user of "+tn || len(m) != 1 || m[0].Content != "message of "+tn ||
			len(o) != 1 || o[0].Result != "output of "+tn || len(k) != 1 || k[0].Content != "knowledge of "+tn {
			t.Fatalf("tenant %s sees %+v %+v %+v %+v %+v", tn, a, f, m, o, k)
		}
	}
	if m := must(s.Messages(ctx, "acme:s:q", "y", store.MessageQuery{})); len(m) != 0 {
		t.Fatalf("a crafted tenant id reads %+v", m)
	}
	if f := must(s.Facts(ctx, "acme:u:q", "mem")); len(f) != 0 {
		t.Fatalf("a crafted tenant id reads facts %+v", f)
	}
	ok(t, s.DeleteSession(ctx, "acme", "s"))
	ok(t, s.DeleteAgent(ctx, "acme", "bot"))
	ok(t, s.DeleteFact(ctx, "acme", "u", "name"))
	if len(must(s.Messages(ctx, "globex", "s", store.MessageQuery{}))) != 1 || len(must(s.Facts(ctx, "globex", "u"))) != 1 {
		t.Fatal("deleting in one tenant deleted in another")
	}
	must(s.GetAgent(ctx, "globex", "bot"))
	_, err := s.GetAgent(ctx, "initech", "bot")
	wantErr(t, err, store.ErrNotFound, "an agent of another tenant")
}

func testTTL(t *testing.T, newStore NewStore) {
	// Expiry is wall-clock time on the store's side, so each check must land inside the window it checks. A
	// loaded machine can make a read late, and a late read proves nothing either way: the test then runs
	// again with a longer TTL rather than fail.
	for ttl := 800 * time.Millisecond; !ttlOnce(t, newStore, ttl); ttl *= 2 {
		if ttl >= 20*time.Second {
			t.Fatal("no check of the TTL landed in its window: the machine is too slow to tell")
		}
		t.Logf("a check landed outside its window with a TTL of %v; trying a longer one", ttl)
	}
}

// ttlOnce checks the store's session TTL once with ttl, and reports whether every check landed in its
// window (false: inconclusive, nothing was wrong).
func ttlOnce(t *testing.T, newStore NewStore, ttl time.Duration) bool {
	s := open(t, newStore, store.Options{SessionTTL: ttl})
	ctx := t.Context()
	start := time.Now() // every first write expires no sooner than start+ttl
	must(s.AppendMessages(ctx, tenant, "short", store.Message{Role: "user", Content: "first"}))
	must(s.AppendToolOutput(ctx, tenant, "short", store.ToolOutput{Tool: "t", Result: "r"}))
	ok(t, s.SetKnowledge(ctx, tenant, "short", []store.Knowledge{{Content: "k"}}))
	summaries := s.Summaries()   // a running summary lives and dies with its session
	assemblies := s.Assemblies() // so do its assembly records
	if assemblies {
		must(s.RecordAssembly(ctx, tenant, "short", []byte(`{"first":true}`), 0, 0))
	}
	if summaries {
		if _, done := swap(t, s, tenant, "short", store.Summary{}, store.Summary{Claim: "c", ClaimExpires: time.Now().Add(time.Hour)}); !done {
			t.Fatal("the first summary of a session was not written")
		}
	}
	firstDone := time.Now() // the first writes expire by firstDone+ttl
	ok(t, s.SetFact(ctx, tenant, "u", store.Fact{Key: "k", Value: "memory does not expire"}))
	time.Sleep(ttl / 2)
	refreshed := time.Now()                                                                      // the session expires no sooner than refreshed+ttl
	must(s.AppendMessages(ctx, tenant, "short", store.Message{Role: "user", Content: "second"})) // refreshes the TTL
	refreshDone := time.Now()
	if refreshDone.After(start.Add(ttl)) {
		return false // the refreshing write may have come after the session expired: it then starts a new one
	}
	time.Sleep(time.Until(firstDone.Add(ttl + ttl/8)))
	// Past the first writes' expiry, within the refreshed one: everything is there.
	m := must(s.Messages(ctx, tenant, "short", store.MessageQuery{}))
	n := len(must(s.ToolOutputs(ctx, tenant, "short"))) + len(must(s.Knowledge(ctx, tenant, "short")))
	if time.Now().After(refreshed.Add(ttl)) {
		return false
	}
	if len(m) != 2 {
		t.Fatalf("after a refreshing write, %d messages", len(m))
	}
	if n != 2 {
		t.Fatalf("after a refreshing write, %d tool outputs and knowledge items, want 2", n)
	}
	if summaries {
		if _, err := s.Summary(ctx, tenant, "short"); err != nil {
			t.Fatalf("after a refreshing write, the summary: %v", err)
		}
	}
	if assemblies && len(must(s.AssemblyRecords(ctx, tenant, "short"))) != 1 {
		t.Fatal("after a refreshing write, the assembly record is gone")
	}
	if assemblies && len(must(s.AssemblySessions(ctx, tenant, 0))) != 1 {
		t.Fatal("after a refreshing write, the session is not listed as one of records")
	}
	time.Sleep(time.Until(refreshDone.Add(ttl + ttl/8)))
	if n := len(must(s.Messages(ctx, tenant, "short", store.MessageQuery{}))) + len(must(s.ToolOutputs(ctx, tenant, "short"))) + len(must(s.Knowledge(ctx, tenant, "short"))); n != 0 {
		t.Fatalf("%d items outlived the session's TTL", n)
	}
	snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "short"}))
	if len(snap.Messages) != 0 {
		t.Fatal("Load reads an expired session")
	}
	if summaries {
		_, err := s.Summary(ctx, tenant, "short")
		wantErr(t, err, store.ErrNotFound, "the summary of an expired session")
	}
	if assemblies && len(must(s.AssemblyRecords(ctx, tenant, "short"))) != 0 {
		t.Fatal("an assembly record outlived its session's TTL")
	}
	if assemblies {
		if l := must(s.AssemblySessions(ctx, tenant, 0)); len(l) != 0 {
			t.Fatalf("an expired session is listed as one of records: %+v", l)
		}
	}
	if len(must(s.Facts(ctx, tenant, "u"))) != 1 {
		t.Fatal("memory expired with the session")
	}
	// An expired session starts again.
	if m := must(s.AppendMessages(ctx, tenant, "short", store.Message{Role: "user", Content: "new"})); m[0].Seq != 1 {
		t.Errorf("first message of a new session has seq %d", m[0].Seq)
	}
	if summaries {
		_, err := s.Summary(ctx, tenant, "short")
		wantErr(t, err, store.ErrNotFound, "the summary of a session started again")
	}
	return true
}

func testLargeValues(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{Limits: store.Limits{MaxValueBytes: 2 << 20}})
	ctx := t.Context()
	big := strings.Repeat("All work and no play makes Jack a dull boy. ", (1<<20)/45+1) // > 1 MiB
	m := must(s.AppendMessages(ctx, tenant, "big", store.Message{Role: "user", Content: big}))
	if m[0].TokenCounts["o200k_base"] != tokenizer.O200K().Count(big) {
		t.Error("count of a large message is wrong")
	}
	got := must(s.Messages(ctx, tenant, "big", store.MessageQuery{}))
	if len(got) != 1 || got[0].Content != big {
		t.Fatal("a 1 MiB message did not come back whole")
	}
	ok(t, s.SetFact(ctx, tenant, "u", store.Fact{Key: "essay", Value: big}))
	if f := must(s.Facts(ctx, tenant, "u")); len(f) != 1 || f[0].Value != big {
		t.Fatal("a 1 MiB fact did not come back whole")
	}
	huge := strings.Repeat("x", 2<<20+1)
	_, err := s.AppendMessages(ctx, tenant, "big", store.Message{Role: "user", Content: huge})
	wantErr(t, err, store.ErrTooLarge, "a message over the limit")
	wantErr(t, s.SetFact(ctx, tenant, "u", store.Fact{Key: "k", Value: huge}), store.ErrTooLarge, "a fact over the limit")
	_, err = s.AppendToolOutput(ctx, tenant, "big", store.ToolOutput{Tool: "t", Result: huge})
	wantErr(t, err, store.ErrTooLarge, "a tool output over the limit")
	wantErr(t, s.SetKnowledge(ctx, tenant, "big", []store.Knowledge{{Content: huge}}), store.ErrTooLarge, "knowledge over the limit")
	_, err = s.AppendMessages(ctx, tenant, strings.Repeat("s", 257), store.Message{Role: "user", Content: "x"})
	wantErr(t, err, store.ErrTooLarge, "a session id over 256 bytes")
}

func testUnicode(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	const tn, user, sess = "テナント", "用户🙂", "séance/1 {x}"
	text := "Привет, 世界! 🧵 nul:\x00 tab:\t crlf:\r\n combining: e\u0301 rtl: שלום"
	ok(t, s.PutAgent(ctx, tn, store.Agent{ID: "агент", Instructions: text}))
	ok(t, s.SetFact(ctx, tn, user, store.Fact{Key: "名前", Value: text}))
	must(s.AppendMessages(ctx, tn, sess, store.Message{Role: "user", Content: text, Name: "ボブ"}))
	must(s.AppendToolOutput(ctx, tn, sess, store.ToolOutput{Tool: "kensaku", Result: text})) // a tool's name is ASCII (store.CheckToolName)
	ok(t, s.SetKnowledge(ctx, tn, sess, []store.Knowledge{{Content: text, Source: "源", Metadata: map[string]string{"ключ": text}}}))
	a := must(s.GetAgent(ctx, tn, "агент"))
	f := must(s.Facts(ctx, tn, user))
	m := must(s.Messages(ctx, tn, sess, store.MessageQuery{}))
	o := must(s.ToolOutputs(ctx, tn, sess))
	k := must(s.Knowledge(ctx, tn, sess))
	if a.Instructions != text || len(f) != 1 || f[0].Key != "名前" || f[0].Value != text || len(m) != 1 || m[0].Content != text ||
		m[0].Name != "ボブ" || len(o) != 1 || o[0].Tool != "kensaku" || o[0].Result != text || len(k) != 1 || k[0].Content != text ||
		k[0].Source != "源" || k[0].Metadata["ключ"] != text {
		t.Fatalf("unicode did not round-trip: %+v %+v %+v %+v %+v", a, f, m, o, k)
	}
}

func testLoad(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	ok(t, s.PutAgent(ctx, tenant, store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant."}))
	ok(t, s.SetFact(ctx, tenant, "user_42", store.Fact{Key: "name", Value: "Bob"}))
	ok(t, s.SetFact(ctx, tenant, "user_42", store.Fact{Key: "tier", Value: "free"}))
	var msgs []store.Message
	for i := range 50 {
		msgs = append(msgs, store.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("turn %d", i)})
	}
	must(s.AppendMessages(ctx, tenant, "sess_42", msgs...))
	must(s.AppendToolOutput(ctx, tenant, "sess_42", store.ToolOutput{Tool: "check_account", Result: `{"plan":"free"}`}))
	ok(t, s.SetKnowledge(ctx, tenant, "sess_42", []store.Knowledge{{ID: "k", Content: "Premium is $20."}}))

	snap := must(s.Load(ctx, tenant, store.LoadQuery{Agent: "demo_agent", User: "user_42", Session: "sess_42", MaxMessages: 20}))
	if len(snap.Errors) != 0 {
		t.Fatalf("Load errors: %v", snap.Errors)
	}
	if snap.Agent == nil || snap.Agent.Instructions != "You are a helpful AI assistant." || len(snap.Facts) != 2 || snap.Facts[0].Key != "name" ||
		len(snap.Messages) != 20 || snap.Messages[0].Content != "turn 30" || snap.Messages[19].Seq != 50 ||
		snap.Messages[19].TokenCounts["o200k_base"] == 0 || len(snap.ToolOutputs) != 1 || len(snap.Knowledge) != 1 {
		t.Fatalf("Load = %+v", snap)
	}
	all := must(s.Load(ctx, tenant, store.LoadQuery{Session: "sess_42"}))
	if len(all.Messages) != 50 || all.Agent != nil || len(all.Facts) != 0 {
		t.Fatalf("Load of the session alone: %d messages, agent %v, %d facts", len(all.Messages), all.Agent, len(all.Facts))
	}
	missing := must(s.Load(ctx, tenant, store.LoadQuery{Agent: "ghost", User: "nobody", Session: "none"}))
	wantErr(t, missing.Errors[store.SourceAgent], store.ErrNotFound, "Load of a missing agent")
	if missing.Agent != nil || len(missing.Facts)+len(missing.Messages)+len(missing.ToolOutputs)+len(missing.Knowledge) != 0 {
		t.Fatalf("Load of nothing = %+v", missing)
	}
	if other := must(s.Load(ctx, "globex", store.LoadQuery{Agent: "demo_agent", User: "user_42", Session: "sess_42"})); other.Agent != nil || len(other.Facts)+len(other.Messages) != 0 {
		t.Fatal("Load crosses tenants")
	}
	_, err := s.Load(ctx, tenant, store.LoadQuery{Session: "bad\x01id"})
	wantErr(t, err, store.ErrInvalid, "Load with a bad id")
}

func testBadIDs(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	for name, id := range map[string]string{"empty": "", "control": "a\nb", "invalid UTF-8": "a\xff"} {
		_, err := s.AppendMessages(ctx, tenant, id, store.Message{Role: "user", Content: "x"})
		wantErr(t, err, store.ErrInvalid, "session id "+name)
		_, err = s.Messages(ctx, id, "s", store.MessageQuery{})
		wantErr(t, err, store.ErrInvalid, "tenant id "+name)
		wantErr(t, s.SetFact(ctx, tenant, id, store.Fact{Key: "k", Value: "v"}), store.ErrInvalid, "user id "+name)
		_, err = s.GetAgent(ctx, tenant, id)
		wantErr(t, err, store.ErrInvalid, "agent id "+name)
	}
}

func testContextAndClose(t *testing.T, newStore NewStore) {
	s := newStore(t, store.Options{})
	ok(t, s.Ping(t.Context()))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "x"}); err == nil {
		t.Error("AppendMessages with a cancelled context succeeded")
	}
	if _, err := s.Load(ctx, tenant, store.LoadQuery{Session: "s"}); err == nil {
		t.Error("Load with a cancelled context succeeded")
	}
	ok(t, s.Close())
	_, err := s.Messages(t.Context(), tenant, "s", store.MessageQuery{})
	wantErr(t, err, store.ErrClosed, "Messages after Close")
	_, err = s.AppendMessages(t.Context(), tenant, "s", store.Message{Role: "user", Content: "x"})
	wantErr(t, err, store.ErrClosed, "AppendMessages after Close")
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close succeeded")
	}
}
