package cookbook_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storetest"
	"github.com/context-loom/loom/store/valkey"
	"github.com/context-loom/loom/store/valkey/cookbook"
	"github.com/context-loom/loom/tokenizer"
)

func do(t testing.TB, addr string, args ...string) []string {
	t.Helper()
	r, err := valkeytest.Do(addr, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

// putTogether writes seed 003's "Putting It Together" data as its Python does (json.dumps spacing, ts from
// time.time(), the EXPIREs).
func putTogether(t testing.TB, addr string) {
	do(t, addr, "HSET", "agent:config:demo_agent", "role", "You are a helpful AI assistant.",
		"constraints", "Be concise and accurate.", "output_format", "Plain text.")
	do(t, addr, "HSET", "memory:user_42", "name", "Bob", "preferred_language", "English", "tier", "free")
	for i, m := range [][2]string{
		{"user", "Hi, I need help with my account"},
		{"assistant", "Sure! What do you need help with?"},
		{"user", "I want to upgrade to premium"},
	} {
		do(t, addr, "RPUSH", "chat:sess_42", fmt.Sprintf(`{"role": %q, "content": %q, "ts": 1718000000.12345%d}`, m[0], m[1], i))
	}
	do(t, addr, "EXPIRE", "chat:sess_42", "1800")
	do(t, addr, "HSET", "tool:sess_42:step_1", "tool", "check_account",
		"result", `{"plan": "free", "eligible_upgrade": true}`, "timestamp", "1718000001.5")
	do(t, addr, "EXPIRE", "tool:sess_42:step_1", "3600")
}

// open opens a store on addrs, closed when the test ends.
func open(t testing.TB, opts cookbook.Options, addrs ...string) *store.Store {
	t.Helper()
	opts.Client.InitAddress = addrs
	if opts.Timeout == 0 {
		// A bound only a hang breaks: the default (2 s) is for a healthy server, and a loaded machine can
		// take longer to answer.
		opts.Timeout = 2 * time.Minute
	}
	s, err := cookbook.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openCookbook opens a store on the server at addr.
func openCookbook(t testing.TB, addr string, opts cookbook.Options) *store.Store {
	t.Helper()
	return open(t, opts, addr)
}

// TestCookbook_BackendConformance runs the backend suite on the cookbook layout, which holds the one tenant
// "default": each backend on a database of its own of one server (its keys have no prefix).
func TestCookbook_BackendConformance(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	var db atomic.Int32
	storetest.RunBackend(t, func(t *testing.T, opts store.Options) store.Backend {
		return openCookbook(t, addr, cookbook.Options{Options: opts, Client: valkeygo.ClientOption{SelectDB: int(db.Add(1))}}).Backend()
	}, storetest.BackendOptions{Tenant: cookbook.DefaultTenant})
}

func TestCookbook_ReadsTheSeedsData(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	putTogether(t, addr)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()

	a, err := s.GetAgent(ctx, "default", "demo_agent")
	if err != nil {
		t.Fatal(err)
	}
	// The seed's system prompt, exactly.
	if want := "You are a helpful AI assistant.\n\nConstraints: Be concise and accurate.\nFormat: Plain text."; a.SystemPrompt() != want {
		t.Errorf("SystemPrompt = %q, want %q", a.SystemPrompt(), want)
	}
	facts, err := s.Facts(ctx, "default", "user_42")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range facts {
		got = append(got, f.Key+"="+f.Value)
	}
	if strings.Join(got, ",") != "name=Bob,preferred_language=English,tier=free" {
		t.Errorf("Facts = %v", got)
	}
	msgs, err := s.Messages(ctx, "default", "sess_42", store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[0].Role != "user" || msgs[0].Content != "Hi, I need help with my account" || msgs[2].Seq != 3 ||
		msgs[1].Role != "assistant" || !msgs[0].Time.Equal(time.Unix(1718000000, 123450000)) {
		t.Fatalf("Messages = %+v", msgs)
	}
	for _, m := range msgs {
		if m.TokenCounts[tokenizer.O200KBase] != tokenizer.O200K().Count(m.Content) || m.TokenCounts[tokenizer.CL100KBase] != tokenizer.CL100K().Count(m.Content) {
			t.Errorf("counts of %q: %v", m.Content, m.TokenCounts)
		}
	}
	outs, err := s.ToolOutputs(ctx, "default", "sess_42")
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].Tool != "check_account" || outs[0].Result != `{"plan": "free", "eligible_upgrade": true}` ||
		outs[0].Seq != 1 || !outs[0].Time.Equal(time.Unix(1718000001, 5e8)) {
		t.Fatalf("ToolOutputs = %+v", outs)
	}

	snap, err := s.Load(ctx, "default", store.LoadQuery{Agent: "demo_agent", User: "user_42", Session: "sess_42", MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Errors) != 0 || snap.Agent == nil || snap.Agent.Instructions != a.Instructions || len(snap.Facts) != 3 ||
		snap.Facts[0].Key != "name" || len(snap.Messages) != 3 || snap.Messages[0].Seq != 1 || len(snap.ToolOutputs) != 1 || len(snap.Knowledge) != 0 {
		t.Fatalf("Load = %+v", snap)
	}
	last, err := s.Load(ctx, "default", store.LoadQuery{Session: "sess_42", MaxMessages: 2})
	if err != nil || len(last.Messages) != 2 || last.Messages[0].Seq != 2 {
		t.Fatalf("Load of the newest 2 = %+v, %v", last, err)
	}
	missing, err := s.Load(ctx, "default", store.LoadQuery{Agent: "ghost"})
	if err != nil || !errors.Is(missing.Errors[store.SourceAgent], store.ErrNotFound) {
		t.Fatalf("Load of a missing agent = %+v, %v", missing, err)
	}
}

func TestCookbook_OrderOfFactsAndSteps(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	// The hash's own order, not sorted: what the seed's hgetall shows.
	do(t, addr, "HSET", "memory:u", "zeta", "1", "alpha", "2", "mid", "3")
	facts, err := s.Facts(ctx, "default", "u")
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 3 || facts[0].Key != "zeta" || facts[1].Key != "alpha" || facts[2].Key != "mid" {
		t.Errorf("Facts = %+v, want the hash's order zeta, alpha, mid", facts)
	}
	// Steps by number: step_2 before step_10 (the seed's sorted() puts step_10 first).
	for _, n := range []int{10, 2, 1, 11} {
		do(t, addr, "HSET", fmt.Sprintf("tool:s:step_%d", n), "tool", "t", "result", strconv.Itoa(n), "timestamp", "1718000000")
	}
	do(t, addr, "HSET", "tool:s:step_x", "tool", "t", "result", "not a numbered step")
	do(t, addr, "HSET", "tool:s*:step_3", "tool", "t", "result", "another session whose id is a glob")
	outs, err := s.ToolOutputs(ctx, "default", "s")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, o := range outs {
		order = append(order, o.Result)
	}
	if strings.Join(order, ",") != "1,2,10,11" {
		t.Errorf("steps in order %v, want 1,2,10,11", order)
	}
	// A session id with glob characters matches only its own steps.
	outs, err = s.ToolOutputs(ctx, "default", "s*")
	if err != nil || len(outs) != 1 || outs[0].Seq != 3 {
		t.Errorf("ToolOutputs of s* = %+v, %v", outs, err)
	}
	// The next step continues after the highest.
	o, err := s.AppendToolOutput(ctx, "default", "s", store.ToolOutput{Tool: "t", Result: "12"})
	if err != nil || o.Seq != 12 {
		t.Fatalf("AppendToolOutput = %+v, %v", o, err)
	}
}

func TestCookbook_WritesTheSeedsShapes(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{Options: store.Options{SessionTTL: 30 * time.Minute}})
	ctx := context.Background()
	if err := s.PutAgent(ctx, "default", store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant.",
		Constraints: "Be concise and accurate.", OutputFormat: "Plain text.", Model: "gpt-4o", MaxTokens: 4000}); err != nil {
		t.Fatal(err)
	}
	if r := do(t, addr, "HMGET", "agent:config:demo_agent", "role", "constraints", "output_format", "model", "max_tokens"); strings.Join(r, "|") !=
		"You are a helpful AI assistant.|Be concise and accurate.|Plain text.|gpt-4o|4000" {
		t.Errorf("agent hash = %q", r)
	}
	if a, err := s.GetAgent(ctx, "default", "demo_agent"); err != nil || a.Model != "gpt-4o" || a.MaxTokens != 4000 || a.UpdatedAt.IsZero() {
		t.Errorf("GetAgent = %+v, %v", a, err)
	}
	for _, kv := range [][2]string{{"tier", "free"}, {"name", "Bob"}} {
		if err := s.SetFact(ctx, "default", "user_42", store.Fact{Key: kv[0], Value: kv[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if r := do(t, addr, "HGET", "memory:user_42", "name"); r[0] != "Bob" {
		t.Errorf("HGET memory:user_42 name = %q", r)
	}
	when := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)
	stored, err := s.AppendMessages(ctx, "default", "sess_42", store.Message{Role: "user", Content: "Hi", Time: when},
		store.Message{Role: "assistant", Content: "Hello!"})
	if err != nil {
		t.Fatal(err)
	}
	if stored[0].Seq != 1 || stored[1].Seq != 2 {
		t.Errorf("seqs %d, %d", stored[0].Seq, stored[1].Seq)
	}
	raw := do(t, addr, "LRANGE", "chat:sess_42", "0", "-1")
	var seed struct {
		Role    string   `json:"role"`
		Content string   `json:"content"`
		TS      *float64 `json:"ts"`
	}
	if err := json.Unmarshal([]byte(raw[0]), &seed); err != nil || seed.Role != "user" || seed.Content != "Hi" || seed.TS == nil ||
		*seed.TS != 1748779200.123456 {
		t.Errorf("chat JSON %s: %+v, %v", raw[0], seed, err)
	}
	read, err := s.Messages(ctx, "default", "sess_42", store.MessageQuery{})
	if err != nil || len(read) != 2 || !read[0].Time.Equal(stored[0].Time) || !read[0].Time.Equal(when.Truncate(time.Microsecond)) {
		t.Errorf("Messages = %+v, %v (stored %+v)", read, err, stored)
	}
	o, err := s.AppendToolOutput(ctx, "default", "sess_42", store.ToolOutput{Tool: "check_account", CallID: "call_1", Result: `{"plan": "free"}`})
	if err != nil || o.Seq != 1 {
		t.Fatalf("AppendToolOutput = %+v, %v", o, err)
	}
	if r := do(t, addr, "HMGET", "tool:sess_42:step_1", "tool", "result", "call_id"); strings.Join(r, "|") != `check_account|{"plan": "free"}|call_1` {
		t.Errorf("step hash = %q", r)
	}
	if ts := do(t, addr, "HGET", "tool:sess_42:step_1", "timestamp")[0]; ts == "" {
		t.Error("a step without timestamp")
	} else if _, err := strconv.ParseFloat(ts, 64); err != nil {
		t.Errorf("timestamp %q is not Python's str(time.time())", ts)
	}
	if err := s.SetKnowledge(ctx, "default", "sess_42", []store.Knowledge{{Source: "Pricing", Content: "Premium costs $20/month.", Score: 0.9}}); err != nil {
		t.Fatal(err)
	}
	var kb struct{ Title, Content string }
	if err := json.Unmarshal([]byte(do(t, addr, "LINDEX", "kb:results:sess_42", "0")[0]), &kb); err != nil || kb.Title != "Pricing" || kb.Content != "Premium costs $20/month." {
		t.Errorf("kb JSON: %+v, %v", kb, err)
	}
	for _, key := range []string{"chat:sess_42", "tool:sess_42:step_1", "kb:results:sess_42"} {
		if ms, _ := strconv.Atoi(do(t, addr, "PTTL", key)[0]); ms <= 0 || ms > int(30*time.Minute/time.Millisecond) {
			t.Errorf("PTTL %s = %d", key, ms)
		}
	}
	if err := s.DeleteSession(ctx, "default", "sess_42"); err != nil {
		t.Fatal(err)
	}
	if n := do(t, addr, "EXISTS", "chat:sess_42", "tool:sess_42:step_1", "kb:results:sess_42"); n[0] != "0" {
		t.Errorf("%s keys left after DeleteSession", n[0])
	}
	if err := s.DeleteSession(ctx, "default", "sess_42"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSession twice: %v", err)
	}
}

func TestCookbook_Knowledge(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	do(t, addr, "RPUSH", "kb:results:s", `{"title": "Pricing", "content": "Premium costs $20/month.", "url": "https://example.com"}`,
		`{"content": "No title."}`)
	kb, err := s.Knowledge(ctx, "default", "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(kb) != 2 || kb[0].Source != "Pricing" || kb[0].Metadata["title"] != "Pricing" || kb[0].Content != "Premium costs $20/month." ||
		kb[1].Source != "" || kb[1].Content != "No title." {
		t.Fatalf("Knowledge = %+v", kb)
	}
	in := []store.Knowledge{{ID: "k1", DocumentID: "d", Source: "Doc", Content: "c", Score: 0.5, Trusted: true, StartOffset: 1, EndOffset: 2, Metadata: map[string]string{"lang": "en"}}}
	if err := s.SetKnowledge(ctx, "default", "s", in); err != nil {
		t.Fatal(err)
	}
	kb, err = s.Knowledge(ctx, "default", "s")
	if err != nil || len(kb) != 1 || kb[0].ID != "k1" || kb[0].DocumentID != "d" || kb[0].Source != "Doc" || kb[0].Score != 0.5 || !kb[0].Trusted ||
		kb[0].StartOffset != 1 || kb[0].EndOffset != 2 || kb[0].Metadata["lang"] != "en" || kb[0].Metadata["title"] != "Doc" {
		t.Fatalf("Knowledge after SetKnowledge = %+v, %v", kb, err)
	}
}

func TestCookbook_SingleTenant(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	if _, err := s.GetAgent(ctx, "acme", "a"); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("GetAgent of tenant acme: %v, want ErrUnsupported", err)
	}
	if _, err := s.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "x"}); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("AppendMessages of tenant acme: %v", err)
	}
	if _, err := s.Load(ctx, "acme", store.LoadQuery{Session: "s"}); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("Load of tenant acme: %v", err)
	}
	if _, err := s.Messages(ctx, "a\nb", "s", store.MessageQuery{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a bad tenant id: %v", err)
	}
}

// TestCookbook_ConcurrentSteps: writers racing for the next step number each get one of their own.
func TestCookbook_ConcurrentSteps(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	const writers, each = 6, 5
	var wg sync.WaitGroup
	seqs := make(chan int64, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				o, err := s.AppendToolOutput(ctx, "default", "busy", store.ToolOutput{Tool: "t", Result: fmt.Sprintf("w%d i%d", w, i)})
				if err != nil {
					t.Error(err)
					return
				}
				seqs <- o.Seq
			}
		})
	}
	wg.Wait()
	close(seqs)
	seen := map[int64]bool{}
	for n := range seqs {
		if seen[n] {
			t.Fatalf("step %d given twice", n)
		}
		seen[n] = true
	}
	outs, err := s.ToolOutputs(ctx, "default", "busy")
	if err != nil || len(outs) != writers*each {
		t.Fatalf("%d steps, %v", len(outs), err)
	}
}

// TestCookbook_Cluster: the seed's keys spread over a cluster's nodes are found and read.
func TestCookbook_Cluster(t *testing.T) {
	t.Parallel()
	c := valkeytest.StartCluster(t, 3)
	s := open(t, cookbook.Options{}, c.Addrs()...)
	ctx := context.Background()
	if err := s.PutAgent(ctx, "default", store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant."}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFact(ctx, "default", "user_42", store.Fact{Key: "name", Value: "Bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendMessages(ctx, "default", "sess_42", store.Message{Role: "user", Content: "Hi"}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := s.AppendToolOutput(ctx, "default", "sess_42", store.ToolOutput{Tool: "t", Result: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetKnowledge(ctx, "default", "sess_42", []store.Knowledge{{Source: "t", Content: "k"}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(ctx, "default", store.LoadQuery{Agent: "demo_agent", User: "user_42", Session: "sess_42"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Errors) != 0 || snap.Agent == nil || len(snap.Facts) != 1 || len(snap.Messages) != 1 || len(snap.ToolOutputs) != 6 || len(snap.Knowledge) != 1 {
		t.Fatalf("Load = %+v", snap)
	}
	for i, o := range snap.ToolOutputs {
		if o.Seq != int64(i+1) || o.Result != strconv.Itoa(i) {
			t.Errorf("step %d = %+v", i, o)
		}
	}
	if err := s.DeleteSession(ctx, "default", "sess_42"); err != nil {
		t.Fatal(err)
	}
}

// TestCookbook_LenientKnowledge: entries written by other tools (FT.SEARCH's string scores, metadata that
// is not all strings, no title, no content) are read, and an entry that is not a JSON object is skipped
// without costing the others; a Load reports no error for the source.
func TestCookbook_LenientKnowledge(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	do(t, addr, "RPUSH", "kb:results:s",
		`{"title": "Pricing", "content": "Premium costs $20/month.", "score": "0.9"}`,
		`"a string, not an entry"`,
		`{"title": "Manual", "content": "Page three.", "metadata": {"page": 3, "ratio": 1.50, "draft": false, "tags": ["a", "b"], "loc": {"x": 1, "y": [2]}, "gone": null, "lang": "en"}}`,
		`[1, 2]`,
		`null`,
		`not JSON at all`,
		`{"title": "Offsets", "content": "Offsets.", "score": 0.5, "start": "4", "end": 9.5}`,
		`{"title": "No content"}`,
		`{"content": "Odd types.", "score": "high", "trusted": "true", "token_counts": "many", "metadata": "none", "id": 7}`,
	)
	type want struct {
		content, source string
		score           float64
		start, end      int
		meta            map[string]string
	}
	wants := []want{
		{"Premium costs $20/month.", "Pricing", 0.9, 0, 0, map[string]string{"title": "Pricing"}},
		{"Page three.", "Manual", 0, 0, 0, map[string]string{"title": "Manual", "page": "3", "ratio": "1.50", "draft": "false",
			"tags": `["a","b"]`, "loc": `{"x":1,"y":[2]}`, "lang": "en"}},
		{"Offsets.", "Offsets", 0.5, 4, 0, map[string]string{"title": "Offsets"}},
		{"", "No content", 0, 0, 0, map[string]string{"title": "No content"}},
		{"Odd types.", "", 0, 0, 0, nil},
	}
	check := func(what string, kb []store.Knowledge) {
		t.Helper()
		if len(kb) != len(wants) {
			t.Fatalf("%s: %d items, want %d: %+v", what, len(kb), len(wants), kb)
		}
		for i, w := range wants {
			k := kb[i]
			if k.Content != w.content || k.Source != w.source || k.Score != w.score || k.StartOffset != w.start || k.EndOffset != w.end ||
				k.Trusted || k.TokenCounts != nil || fmt.Sprint(k.Metadata) != fmt.Sprint(w.meta) {
				t.Errorf("%s: item %d = %+v, want %+v", what, i, k, w)
			}
		}
		if kb[4].ID != "7" {
			t.Errorf("%s: a numeric id read as %q", what, kb[4].ID)
		}
	}
	kb, err := s.Knowledge(ctx, "default", "s")
	if err != nil {
		t.Fatal(err)
	}
	check("Knowledge", kb)
	snap, err := s.Load(ctx, "default", store.LoadQuery{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Errors) != 0 {
		t.Errorf("Load errors %v", snap.Errors)
	}
	check("Load", snap.Knowledge)

	// Nothing readable is no knowledge, not an error.
	do(t, addr, "RPUSH", "kb:results:junk", `"x"`, `[]`, `1`)
	if kb, err := s.Knowledge(ctx, "default", "junk"); err != nil || kb != nil {
		t.Errorf("Knowledge of junk = %+v, %v", kb, err)
	}
}

// TestCookbook_KnowledgeTitles: an item is written with the title the cookbook preset shows for it, its
// Source under "source" when that differs, and read back as it was.
func TestCookbook_KnowledgeTitles(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	in := []store.Knowledge{
		{Source: "manual.md", Content: "a", Metadata: map[string]string{"title": "Intro"}},
		{Source: "Pricing", Content: "b"},
		{Content: "c"},
		{Content: "d", Metadata: map[string]string{"title": ""}},
	}
	if err := s.SetKnowledge(ctx, "default", "s", in); err != nil {
		t.Fatal(err)
	}
	raw := do(t, addr, "LRANGE", "kb:results:s", "0", "-1")
	wantRaw := []struct {
		title  *string
		source string
	}{{ptr("Intro"), "manual.md"}, {ptr("Pricing"), ""}, {nil, ""}, {ptr(""), ""}}
	for i, w := range wantRaw {
		var e struct {
			Title  *string `json:"title"`
			Source string  `json:"source"`
		}
		if err := json.Unmarshal([]byte(raw[i]), &e); err != nil {
			t.Fatal(err)
		}
		if (e.Title == nil) != (w.title == nil) || e.Title != nil && *e.Title != *w.title || e.Source != w.source {
			t.Errorf("entry %d: %s, want title %v source %q", i, raw[i], w.title, w.source)
		}
	}
	kb, err := s.Knowledge(ctx, "default", "s")
	if err != nil || len(kb) != 4 {
		t.Fatalf("Knowledge = %+v, %v", kb, err)
	}
	if kb[0].Source != "manual.md" || kb[0].Metadata["title"] != "Intro" || kb[1].Source != "Pricing" || kb[1].Metadata["title"] != "Pricing" ||
		kb[2].Source != "" || kb[2].Metadata != nil || kb[3].Source != "" || kb[3].Metadata == nil || kb[3].Metadata["title"] != "" {
		t.Errorf("Knowledge = %+v", kb)
	}
}

func ptr(s string) *string { return &s }

// TestCookbook_ForeignTitles: entries written by other tools are read so that the cookbook preset shows
// their titles as the seed's d.get('title', 'Doc') does: an entry's title, even empty, is Metadata["title"]
// (over one in its metadata); an entry without one (or with a null one) has none, and no Source, so that
// the preset shows [Doc]; its "source" is kept in Metadata["source"].
func TestCookbook_ForeignTitles(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	do(t, addr, "RPUSH", "kb:results:s",
		`{"content": "Untitled.", "source": "a.md"}`,
		`{"content": "Untitled, with sources.", "source": "a.md", "metadata": {"source": "b.md", "title": "M"}}`,
		`{"title": "", "content": "An empty title.", "metadata": {"title": "M"}}`,
		`{"title": null, "content": "A null title.", "metadata": {"title": "M"}}`,
		`{"title": "T", "content": "Two titles.", "source": "a.md", "metadata": {"title": "M"}}`,
		`{"title": 3, "content": "A number for a title."}`,
	)
	kb, err := s.Knowledge(ctx, "default", "s")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`"" map[source:a.md]`,
		`"" map[source:b.md]`,
		`"" map[title:]`,
		`"" map[]`,
		`"a.md" map[title:T]`,
		`"3" map[title:3]`,
	}
	var got []string
	for _, k := range kb {
		got = append(got, fmt.Sprintf("%q %v", k.Source, k.Metadata))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Knowledge (source, metadata):\n got %q\nwant %q", got, want)
	}
}

// TestCookbook_LenientChat: a string ts, a ts that is no time, a null content and fields of the wrong type
// do not cost the history; entries without a string role or without content are skipped, and the rest keep
// their seqs.
func TestCookbook_LenientChat(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	do(t, addr, "RPUSH", "chat:s",
		`{"role": "user", "content": "Hi", "ts": "1764529200.1"}`,
		`{"role": "assistant", "content": "Hello", "ts": "yesterday", "token_counts": {"o200k_base": 900, "cl100k_base": 900}}`,
		`{"role": "user"}`,
		`{"content": "no role"}`,
		`{"role": 1, "content": "a number for a role"}`,
		`"oops"`,
		`{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}`,
		`{"role": "user", "content": "last", "ts": 1e300, "name": 5, "tool_calls": "none", "token_counts": "x"}`,
	)
	check := func(what string, msgs []store.Message) {
		t.Helper()
		var got []string
		for _, m := range msgs {
			got = append(got, fmt.Sprintf("%d %s %q", m.Seq, m.Role, m.Content))
		}
		if want := []string{`1 user "Hi"`, `2 assistant "Hello"`, `7 assistant ""`, `8 user "last"`}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s = %q, want %q", what, got, want)
		}
		if msgs[1].TokenCounts[tokenizer.O200KBase] != tokenizer.O200K().Count("Hello") {
			t.Errorf("%s: the entry's own token_counts were trusted: %v", what, msgs[1].TokenCounts)
		}
		if !msgs[0].Time.Equal(time.Unix(1764529200, 1e8)) || !msgs[1].Time.IsZero() || !msgs[3].Time.IsZero() {
			t.Errorf("%s: times %v, %v, %v", what, msgs[0].Time, msgs[1].Time, msgs[3].Time)
		}
		if len(msgs[2].ToolCalls) != 1 || msgs[2].ToolCalls[0].Function.Name != "f" || msgs[3].ToolCalls != nil || msgs[3].Name != "" {
			t.Errorf("%s: %+v, %+v", what, msgs[2], msgs[3])
		}
		if msgs[3].TokenCounts[tokenizer.O200KBase] != tokenizer.O200K().Count("last") {
			t.Errorf("%s: counts %v", what, msgs[3].TokenCounts)
		}
	}
	msgs, err := s.Messages(ctx, "default", "s", store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	check("Messages", msgs)
	snap, err := s.Load(ctx, "default", store.LoadQuery{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Errors) != 0 {
		t.Errorf("Load errors %v", snap.Errors)
	}
	check("Load", snap.Messages)
}

// TestCookbook_LenientSteps: a step whose timestamp is not a number costs neither itself nor the others.
func TestCookbook_LenientSteps(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	do(t, addr, "HSET", "tool:s:step_1", "tool", "a", "result", "x", "timestamp", "soon")
	do(t, addr, "HSET", "tool:s:step_2", "tool", "b", "result", "y", "timestamp", "1718000001.5")
	do(t, addr, "HSET", "tool:s:step_3", "tool", "c", "result", "z", "timestamp", "1e300")
	check := func(what string, outs []store.ToolOutput) {
		t.Helper()
		if len(outs) != 3 || outs[0].Result != "x" || outs[1].Result != "y" || outs[2].Result != "z" {
			t.Fatalf("%s = %+v", what, outs)
		}
		if !outs[0].Time.IsZero() || !outs[1].Time.Equal(time.Unix(1718000001, 5e8)) || !outs[2].Time.IsZero() {
			t.Errorf("%s: times %v, %v, %v", what, outs[0].Time, outs[1].Time, outs[2].Time)
		}
	}
	outs, err := s.ToolOutputs(ctx, "default", "s")
	if err != nil {
		t.Fatal(err)
	}
	check("ToolOutputs", outs)
	snap, err := s.Load(ctx, "default", store.LoadQuery{Session: "s"})
	if err != nil || len(snap.Errors) != 0 {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
	check("Load", snap.ToolOutputs)
}

// TestCookbook_StepsAsTheSeedReadsThem: a step without tool or result reads as the seed's defaults
// ("unknown", "{}"), fields that are there are taken as they are, even empty, and a timestamp that is not a
// number costs nothing.
func TestCookbook_StepsAsTheSeedReadsThem(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := context.Background()
	do(t, addr, "HSET", "tool:s:step_1", "tool", "a", "result", "", "timestamp", "soon")
	do(t, addr, "HSET", "tool:s:step_2", "args", "{}")
	do(t, addr, "HSET", "tool:s:step_3", "tool", "", "result", "r", "timestamp", "1718000001.5")
	check := func(what string, outs []store.ToolOutput) {
		t.Helper()
		var got []string
		for _, o := range outs {
			got = append(got, fmt.Sprintf("%d %q %q", o.Seq, o.Tool, o.Result))
		}
		if want := []string{`1 "a" ""`, `2 "unknown" "{}"`, `3 "" "r"`}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s = %q, want %q", what, got, want)
		}
		if !outs[0].Time.IsZero() || !outs[2].Time.Equal(time.Unix(1718000001, 5e8)) {
			t.Errorf("%s: times %v, %v", what, outs[0].Time, outs[2].Time)
		}
	}
	outs, err := s.ToolOutputs(ctx, "default", "s")
	if err != nil {
		t.Fatal(err)
	}
	check("ToolOutputs", outs)
	snap, err := s.Load(ctx, "default", store.LoadQuery{Session: "s"})
	if err != nil || len(snap.Errors) != 0 {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
	check("Load", snap.ToolOutputs)
}

// TestCookbook_MessagePages runs the paged queries of the conformance suite on the cookbook's keys.
func TestCookbook_MessagePages(t *testing.T) {
	t.Parallel()
	storetest.MessagePages(t, openCookbook(t, valkeytest.Start(t), cookbook.Options{}), cookbook.DefaultTenant)
}

// TestCookbook_PagesSkipWhatTheCookbookCannotRead: entries the cookbook layout cannot read (another program's)
// leave gaps in the seqs; a page that holds some reads on, so a query still selects as SelectMessages does
// from the entries that can be read.
func TestCookbook_PagesSkipWhatTheCookbookCannotRead(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	for i := range 80 {
		v := fmt.Sprintf(`{"role": "user", "content": "entry %d %s"}`, i, strings.Repeat("la ", i%9))
		if i%3 == 1 || (i >= 40 && i < 70) {
			v = "not an entry"
		}
		do(t, addr, "RPUSH", "chat:s", v)
	}
	s := openCookbook(t, addr, cookbook.Options{})
	ctx := t.Context()
	all, err := s.Messages(ctx, cookbook.DefaultTenant, "s", store.MessageQuery{})
	if err != nil || len(all) != 26+7 {
		t.Fatalf("%d entries read (%v), want 33", len(all), err)
	}
	for _, q := range []store.MessageQuery{{Limit: 5}, {Limit: 12}, {MaxTokens: 60}, {MaxTokens: 200, Limit: 9}, {Before: 71, Limit: 3}, {Before: 75, MaxTokens: 100}} {
		got, err := s.Messages(ctx, cookbook.DefaultTenant, "s", q)
		if err != nil {
			t.Fatal(err)
		}
		want := store.SelectMessages(all, q)
		if fmt.Sprint(seqsOf(got)) != fmt.Sprint(seqsOf(want)) {
			t.Errorf("%+v: seqs %v, want %v", q, seqsOf(got), seqsOf(want))
		}
	}
}

func seqsOf(msgs []store.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

// TestCookbook_LoadReadsWhatTheBudgetCanUse: a Load bounded by 500 tokens of a session of 2,000 messages
// of about 1 KB reads its first page of 16 entries, not the megabyte of its 1,000 newest.
func TestCookbook_LoadReadsWhatTheBudgetCanUse(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 22) // ~1 KB, ~220 tokens
	addr := valkeytest.Start(t)
	bytes := &byteCounter{}
	s := open(t, cookbook.Options{Client: valkeygo.ClientOption{DialCtxFn: bytes.dial}}, addr)
	ctx := t.Context()
	batch := make([]store.Message, 500)
	for i := range batch {
		batch[i] = store.Message{Role: []string{"user", "assistant"}[i%2], Content: text}
	}
	for range 4 {
		if _, err := s.AppendMessages(ctx, cookbook.DefaultTenant, "long", batch...); err != nil {
			t.Fatal(err)
		}
	}
	q := store.LoadQuery{Session: "long", MaxTokens: 500, CountToolCalls: true}
	bytes.n.Store(0)
	snap, err := s.Load(ctx, cookbook.DefaultTenant, q)
	read := bytes.n.Load()
	if err != nil || len(snap.Messages) != 2 || snap.NextBefore != 1999 {
		t.Fatalf("Load: %d messages, next before %d (%v), want 2 and 1999", len(snap.Messages), snap.NextBefore, err)
	}
	if limit := int64(16 * 1100); read > limit { // the first page of 16
		t.Errorf("Load read %d bytes, more than %d", read, limit)
	}
}

// byteCounter counts the bytes read from the connections it dials.
type byteCounter struct{ n atomic.Int64 }

func (b *byteCounter) dial(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	return &readCounted{Conn: c, n: &b.n}, nil
}

type readCounted struct {
	net.Conn
	n *atomic.Int64
}

func (c *readCounted) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// TestCookbook_ClaimsNoCollections: the cookbook's keys hold no collections, and its store says so, so a
// server starting on it loads no indexes and an ingest is refused before it reaches the store.
func TestCookbook_ClaimsNoCollections(t *testing.T) {
	t.Parallel()
	s := openCookbook(t, valkeytest.Start(t), cookbook.Options{})
	if c, ok := s.Collections(); ok || c != nil {
		t.Fatalf("the cookbook's store claims collections: %v", c)
	}
	if _, ok := s.Backend().(store.CollectionBackend); ok {
		t.Fatal("the cookbook's backend is a store.CollectionBackend")
	}
}

// TestParseURL: a cookbook URL is a Valkey URL with layout=cookbook (or none), without a prefix.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"valkey://h:7000?layout=cookbook&ttl=30m&timeout=1s", "redis://h:7000?ttl=30m&timeout=1s"} {
		o, err := cookbook.ParseURL(raw)
		if err != nil || o.Client.InitAddress[0] != "h:7000" || o.SessionTTL != 30*time.Minute || o.Timeout != time.Second {
			t.Errorf("ParseURL(%q) = %+v, %v", raw, o, err)
		}
	}
	for _, raw := range []string{"valkey://h?layout=native", "valkey://h?layout=cookbook&prefix=x", "valkey://h?layout=flat", "valkey://u:s3cret@h?bogus=1"} {
		_, err := cookbook.ParseURL(raw)
		if !errors.Is(err, cookbook.ErrBadOptions) || !errors.Is(err, valkey.ErrBadOptions) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q): %v, want ErrBadOptions without the password", raw, err)
		}
	}
}

// sentinelOptions are the client options that reach a master through Sentinel: the sentinels' addresses
// (open sets them) and the master set's name.
var sentinelOptions = valkeygo.ClientOption{Sentinel: valkeygo.SentinelOption{MasterSet: valkeytest.SentinelMaster}}

// TestSentinel_WritesReachTheMaster: through a Sentinel the store reads and writes the master it names, and
// finds the tool steps on it with SCAN.
func TestSentinel_WritesReachTheMaster(t *testing.T) {
	t.Parallel()
	master := valkeytest.Start(t)
	sentinel := valkeytest.StartSentinel(t, master)
	ctx := t.Context()
	cb := open(t, cookbook.Options{Client: sentinelOptions}, sentinel.Addr)
	if err := cb.SetFact(ctx, cookbook.DefaultTenant, "user_42", store.Fact{Key: "name", Value: "Bob"}); err != nil {
		t.Fatal(err)
	}
	if r := do(t, master, "HGET", "memory:user_42", "name"); r[0] != "Bob" {
		t.Fatalf("HGET memory:user_42 name on the master = %q", r)
	}
	// Steps are found with SCAN on every node the client knows: through Sentinel, the master.
	do(t, master, "HSET", "tool:sess_42:step_1", "tool", "check_account", "result", "{}")
	if outs, err := cb.ToolOutputs(ctx, cookbook.DefaultTenant, "sess_42"); err != nil || len(outs) != 1 || outs[0].Tool != "check_account" {
		t.Fatalf("ToolOutputs = %+v, %v", outs, err)
	}
	if _, err := cb.AppendMessages(ctx, cookbook.DefaultTenant, "s", store.Message{Role: "user", Content: "Hi"}); err != nil {
		t.Fatal(err)
	}
	if n := do(t, master, "DBSIZE"); n[0] != "3" {
		t.Errorf("DBSIZE of the master = %s, want 3 (the memory hash, the step, the messages)", n[0])
	}
	if _, err := valkeytest.Do(sentinel.Addr, "DBSIZE"); err == nil {
		t.Error("the sentinel answers DBSIZE: the test's sentinel is a plain server")
	}
}

// TestSentinel_URL: a store URL with sentinel=<master set> names the sentinels (the host and any addr=) and
// opens a store on the master; its credentials are the master's, not the sentinels'.
func TestSentinel_URL(t *testing.T) {
	t.Parallel()
	const password = "s3cret/+:@"
	master := valkeytest.StartServer(t, "--requirepass", password).Addr
	sentinel := valkeytest.StartSentinel(t, master, "sentinel auth-pass "+valkeytest.SentinelMaster+" "+password)
	// A second sentinel address that refuses connections: the client moves on to the next one.
	dead := valkeytest.StartServer(t)
	dead.Stop()
	raw := "valkey://:" + url.QueryEscape(password) + "@" + dead.Addr + "?addr=" + sentinel.Addr +
		"&sentinel=" + valkeytest.SentinelMaster + "&layout=cookbook&timeout=2s"
	opts, err := cookbook.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Client.Sentinel.MasterSet != valkeytest.SentinelMaster || len(opts.Client.InitAddress) != 2 ||
		opts.Client.Password != password || opts.Client.Sentinel.Password != "" {
		t.Fatalf("ParseURL: master set %q, addresses %q, master password set %v, sentinel password set %v",
			opts.Client.Sentinel.MasterSet, opts.Client.InitAddress, opts.Client.Password != "", opts.Client.Sentinel.Password != "")
	}
	s, err := cookbook.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.AppendMessages(ctx, cookbook.DefaultTenant, "sess_42", store.Message{Role: "user", Content: "Hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := valkeytest.Do(master, "LLEN", "chat:sess_42"); err == nil {
		t.Fatal("the master answers without AUTH")
	}
	direct := open(t, cookbook.Options{Client: valkeygo.ClientOption{Password: password}}, master)
	if msgs, err := direct.Messages(ctx, cookbook.DefaultTenant, "sess_42", store.MessageQuery{}); err != nil || len(msgs) != 1 {
		t.Fatalf("Messages on the master itself = %+v, %v", msgs, err)
	}
	snap, err := s.Load(ctx, cookbook.DefaultTenant, store.LoadQuery{Session: "sess_42"})
	if err != nil || len(snap.Errors) != 0 || len(snap.Messages) != 1 || snap.Messages[0].Content != "Hi" {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
}
