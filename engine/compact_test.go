package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/summarize"
	"github.com/context-loom/loom/tokenizer"
)

// recorder is a summarizer that answers with a deterministic summary of the seqs it was given, and keeps
// the requests.
type recorder struct {
	mu   sync.Mutex
	reqs []summarize.Request
	fail error  // returned instead, when set
	junk string // returned instead, when set
}

var seqAttr = regexp.MustCompile(`<message seq="(\d+)"`)

func (r *recorder) Summarize(_ context.Context, req summarize.Request) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if r.fail != nil {
		return "", r.fail
	}
	if r.junk != "" {
		return r.junk, nil
	}
	m := seqAttr.FindAllStringSubmatch(req.Text, -1)
	return fmt.Sprintf("summary of %d messages, %s to %s", len(m), m[0][1], m[len(m)-1][1]), nil
}

func (r *recorder) last() summarize.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// seqsOf returns the seqs of the messages a summarization request holds.
func seqsOf(text string) []int64 {
	var out []int64
	for _, m := range seqAttr.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

// conversation appends turns to the session: a user message and a reply of about 150 tokens, every 5th
// turn a tool exchange.
func conversation(t *testing.T, st *store.Store, tenant, session string, from, turns int) {
	t.Helper()
	filler := strings.Repeat("words to fill the message up ", 20)
	for i := from; i < from+turns; i++ {
		msgs := []store.Message{{Role: "user", Content: fmt.Sprintf("question %d <b>&: %s", i, filler)}}
		if i%5 == 4 {
			id := fmt.Sprintf("call_%d", i)
			msgs = append(msgs,
				store.Message{Role: "assistant", ToolCalls: []loom.ToolCall{{ID: id, Type: "function", Function: loom.ToolCallFunction{Name: "lookup", Arguments: `{"q":1}`}}}},
				store.Message{Role: "tool", ToolCallID: id, Content: "result " + filler})
		}
		msgs = append(msgs, store.Message{Role: "assistant", Content: fmt.Sprintf("answer %d: %s", i, filler)})
		if _, err := st.AppendMessages(loom.WithTenant(context.Background(), tenant), tenant, session, msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

func compactionAgent(t *testing.T, st *store.Store, tenant string) {
	t.Helper()
	err := st.PutAgent(context.Background(), tenant, store.Agent{ID: "a", Instructions: "Be brief.", MaxTokens: 4000,
		Policy: &loom.Policy{Compaction: &loom.Compaction{TriggerTokens: 1500, KeepTokens: 800, Instructions: "Summarize for the support agent."}}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCompact_WithoutASummarizer(t *testing.T) {
	t.Parallel()
	e, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Compact(context.Background(), engine.CompactRequest{Session: "s"})
	if !errors.Is(err, engine.ErrNoSummarizer) || !errors.Is(err, loom.ErrUnsupported) {
		t.Fatalf("err %v, want ErrNoSummarizer", err)
	}
}

func TestCompact_IsIncrementalAndCutsWholeTurns(t *testing.T) {
	t.Parallel()
	st := newMemory()
	rec := &recorder{}
	var results []string
	var mu sync.Mutex
	e, err := testEngine(st, engine.WithSummarizer(rec, engine.SummarizerConfig{Model: "gpt-4o-mini"}),
		engine.WithCompactionObserver(func(r string) { mu.Lock(); results = append(results, r); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	compactionAgent(t, st, loom.DefaultTenant)
	conversation(t, st, loom.DefaultTenant, "s", 0, 3)
	res, err := e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
	if err != nil || res.Result != engine.CompactNotNeeded || rec.calls() != 0 {
		t.Fatalf("below the trigger: %+v, %v, %d calls", res, err, rec.calls())
	}

	conversation(t, st, loom.DefaultTenant, "s", 3, 17)
	res, err = e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
	if err != nil || res.Result != engine.CompactCompacted {
		t.Fatalf("%+v, %v", res, err)
	}
	first := res.Summary
	req := rec.last()
	if req.Instructions != "Summarize for the support agent." || req.MaxOutputTokens != engine.DefaultMaxSummaryTokens {
		t.Errorf("request %+v", req)
	}
	if strings.Contains(req.Text, "<b>") || !strings.Contains(req.Text, "&lt;b&gt;&amp;") {
		t.Error("the turns are not escaped in the summarization request")
	}
	seqs := seqsOf(req.Text)
	if first.From != 1 || first.To != seqs[len(seqs)-1] || seqs[0] != 1 || first.Claim != "" || first.Rev != 2 {
		t.Fatalf("summary %+v of seqs %v", first, seqs)
	}
	all, _ := st.Messages(ctx, loom.DefaultTenant, "s", store.MessageQuery{})
	checkCut(t, all, first.To, 800)

	// The next compaction reads the previous summary and the messages after it only.
	conversation(t, st, loom.DefaultTenant, "s", 20, 10)
	res, err = e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
	if err != nil || res.Result != engine.CompactCompacted {
		t.Fatalf("%+v, %v", res, err)
	}
	req = rec.last()
	if !strings.Contains(req.Text, "<previous_summary trusted=\"false\">\n"+first.Text) {
		t.Errorf("the previous summary is not in the request:\n%.300s", req.Text)
	}
	if seqs := seqsOf(req.Text); seqs[0] != first.To+1 {
		t.Errorf("the second compaction starts at seq %d, want %d", seqs[0], first.To+1)
	}
	if res.Summary.From != 1 || res.Summary.To <= first.To {
		t.Errorf("second summary %+v", res.Summary)
	}
	all, _ = st.Messages(ctx, loom.DefaultTenant, "s", store.MessageQuery{})
	checkCut(t, all, res.Summary.To, 800)
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(results, ",") != "not_needed,compacted,compacted" {
		t.Errorf("observed %v", results)
	}
}

// checkCut checks that a summary to seq to cuts the session before a user message, keeping at least keep
// tokens after it.
func checkCut(t *testing.T, all []store.Message, to int64, keep int) {
	t.Helper()
	kept := 0
	for _, m := range all {
		if m.Seq == to+1 && m.Role != "user" {
			t.Errorf("the summary ends at %d, before a %s message: a turn is split", to, m.Role)
		}
		if m.Seq > to {
			kept += store.MessageTokens(m, "o200k_base", true)
		}
	}
	if kept < keep {
		t.Errorf("%d tokens kept verbatim, want at least %d", kept, keep)
	}
}

func TestCompact_ForceCompactsBelowTheTrigger(t *testing.T) {
	t.Parallel()
	st := newMemory()
	rec := &recorder{}
	e, _ := testEngine(st, engine.WithSummarizer(rec, engine.SummarizerConfig{}))
	conversation(t, st, loom.DefaultTenant, "s", 0, 6)
	// Without an agent: the default policy keeps a quarter of gpt-4o's budget, more than the session.
	res, err := e.Compact(context.Background(), engine.CompactRequest{Session: "s", Force: true})
	if err != nil || res.Result != engine.CompactNotNeeded {
		t.Fatalf("%+v, %v", res, err)
	}
	compactionAgent(t, st, loom.DefaultTenant)
	res, err = e.Compact(context.Background(), engine.CompactRequest{Session: "s", Agent: "a", Force: true})
	if err != nil || res.Result != engine.CompactCompacted || res.Summary.To == 0 {
		t.Fatalf("%+v, %v", res, err)
	}
}

func TestCompact_FailuresAreRecordedAndBackedOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rec  *recorder
	}{
		{"down", &recorder{fail: fmt.Errorf("%w: connection refused", summarize.ErrUnavailable)}},
		{"junk", &recorder{junk: " \n "}},
		{"control characters", &recorder{junk: "a\x00b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newMemory()
			e, _ := testEngine(st, engine.WithSummarizer(tc.rec, engine.SummarizerConfig{}))
			compactionAgent(t, st, loom.DefaultTenant)
			conversation(t, st, loom.DefaultTenant, "s", 0, 20)
			ctx := context.Background()
			res, err := e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
			if !errors.Is(err, engine.ErrCompactionFailed) || res.Result != engine.CompactFailed {
				t.Fatalf("%+v, %v", res, err)
			}
			sum, err := st.Summary(ctx, loom.DefaultTenant, "s")
			if err != nil || sum.Failures != 1 || sum.LastError == "" || sum.RetryAt.IsZero() || sum.Claim != "" || sum.To != 0 {
				t.Fatalf("record after a failure: %+v, %v", sum, err)
			}
			// The next one waits for its retry time, unless forced.
			if res, err := e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"}); err != nil || res.Result != engine.CompactBackoff {
				t.Fatalf("%+v, %v", res, err)
			}
			if res, _ := e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a", Force: true}); res.Summary.Failures != 2 {
				t.Fatalf("a forced retry: %+v", res)
			}
			// No message is lost.
			if all, _ := st.Messages(ctx, loom.DefaultTenant, "s", store.MessageQuery{}); len(all) != 48 {
				t.Fatalf("%d messages", len(all))
			}
		})
	}
}

// blocking is a summarizer that waits until released.
type blocking struct {
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (b *blocking) Summarize(ctx context.Context, req summarize.Request) (string, error) {
	if b.calls.Add(1) == 1 {
		close(b.started)
	}
	<-b.release
	return "a summary", nil
}

func TestCompact_TwoServersNeverSummarizeTheSameRange(t *testing.T) {
	t.Parallel()
	st := newMemory()
	b := &blocking{started: make(chan struct{}), release: make(chan struct{})}
	e1, _ := testEngine(st, engine.WithSummarizer(b, engine.SummarizerConfig{}))
	e2, _ := testEngine(st, engine.WithSummarizer(b, engine.SummarizerConfig{}))
	compactionAgent(t, st, loom.DefaultTenant)
	conversation(t, st, loom.DefaultTenant, "s", 0, 20)
	ctx := context.Background()
	done := make(chan engine.CompactResult)
	go func() {
		res, err := e1.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-b.started
	res, err := e2.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a", Force: true})
	if !errors.Is(err, engine.ErrCompactionBusy) || res.Result != engine.CompactBusy {
		t.Fatalf("the second server: %+v, %v", res, err)
	}
	close(b.release)
	if res := <-done; res.Result != engine.CompactCompacted || b.calls.Load() != 1 {
		t.Fatalf("the first server: %+v after %d calls", res, b.calls.Load())
	}
}

func TestCompact_TenantsAreApart(t *testing.T) {
	t.Parallel()
	st := newMemory()
	rec := &recorder{}
	e, _ := testEngine(st, engine.WithSummarizer(rec, engine.SummarizerConfig{}))
	compactionAgent(t, st, "t1")
	conversation(t, st, "t1", "s", 0, 20)
	t2 := loom.WithTenant(context.Background(), "t2")
	if _, err := e.Compact(t2, engine.CompactRequest{Session: "s", Agent: "a"}); !errors.Is(err, engine.ErrAgentNotFound) {
		t.Fatalf("another tenant's agent: %v", err)
	}
	res, err := e.Compact(t2, engine.CompactRequest{Session: "s", Force: true})
	if err != nil || res.Result != engine.CompactNotNeeded || rec.calls() != 0 {
		t.Fatalf("another tenant's session: %+v, %v", res, err)
	}
}

func TestCompact_OverAChatCompletionsServer(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Role, Content string }
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		seqs := seqsOf(body.Messages[len(body.Messages)-1].Content)
		answer, _ := json.Marshal(fmt.Sprintf("The user asked %d things.", len(seqs)))
		fmt.Fprintf(w, `{"choices":[{"message":{"role":"assistant","content":%s},"finish_reason":"stop"}]}`, answer)
	}))
	defer srv.Close()
	client, err := summarize.NewOpenAI(summarize.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "llama3.2", RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st := newMemory()
	e, _ := testEngine(st, engine.WithSummarizer(client, engine.SummarizerConfig{Model: client.Model()}))
	compactionAgent(t, st, loom.DefaultTenant)
	conversation(t, st, loom.DefaultTenant, "s", 0, 20)
	res, err := e.Compact(context.Background(), engine.CompactRequest{Session: "s", Agent: "a"})
	if err != nil || res.Result != engine.CompactCompacted || !strings.HasPrefix(res.Summary.Text, "The user asked") || res.Summary.Model != "llama3.2" {
		t.Fatalf("%+v, %v", res, err)
	}
	if calls.Load() != 2 {
		t.Errorf("%d calls, want 2 (a 429, then the answer)", calls.Load())
	}
}

func TestCompact_TheRequestFitsTheSummarizersWindow(t *testing.T) {
	t.Parallel()
	st := newMemory()
	rec := &recorder{}
	// A window of 2,000 tokens holds about 6 messages of the conversation: a compaction takes rounds,
	// each summary made from the one before.
	e, _ := testEngine(st, engine.WithSummarizer(rec, engine.SummarizerConfig{Window: 2000}))
	compactionAgent(t, st, loom.DefaultTenant)
	conversation(t, st, loom.DefaultTenant, "s", 0, 20)
	huge := strings.Repeat("a very long tool result ", 3000)
	if _, err := st.AppendMessages(context.Background(), loom.DefaultTenant, "s", store.Message{Role: "user", Content: huge}); err != nil {
		t.Fatal(err)
	}
	conversation(t, st, loom.DefaultTenant, "s", 20, 10)
	res, err := e.Compact(context.Background(), engine.CompactRequest{Session: "s", Agent: "a"})
	if err != nil || res.Result != engine.CompactCompacted {
		t.Fatalf("%+v, %v", res, err)
	}
	if rec.calls() < 2 {
		t.Fatalf("%d summarizer calls, want rounds", rec.calls())
	}
	prevTo := int64(0)
	for i, req := range rec.reqs {
		n := tokenizer.Estimate(req.Instructions) + tokenizer.Estimate(req.Text) + req.MaxOutputTokens
		if n > 2000 {
			t.Errorf("request %d needs about %d tokens, more than the window", i, n)
		}
		seqs := seqsOf(req.Text)
		if seqs[0] != prevTo+1 {
			t.Errorf("round %d starts at %d, want %d", i, seqs[0], prevTo+1)
		}
		prevTo = seqs[len(seqs)-1]
	}
}

func TestAssemble_UsesTheStoredSummary(t *testing.T) {
	t.Parallel()
	st := newMemory()
	rec := &recorder{}
	e, _ := testEngine(st, engine.WithSummarizer(rec, engine.SummarizerConfig{}))
	compactionAgent(t, st, loom.DefaultTenant)
	conversation(t, st, loom.DefaultTenant, "s", 0, 20)
	ctx := context.Background()
	before, err := e.Assemble(ctx, engine.Request{Agent: "a", Session: "s", Request: assembler.Request{Message: "next"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
	if err != nil || res.Result != engine.CompactCompacted {
		t.Fatalf("%+v, %v", res, err)
	}
	// An engine without a summarizer (another server) uses the stored summary too.
	plain, _ := testEngine(st)
	after, err := plain.Assemble(ctx, engine.Request{Agent: "a", Session: "s", Request: assembler.Request{Message: "next"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Degraded) > 0 {
		t.Fatalf("degraded: %+v", after.Degraded)
	}
	text := after.Messages[0].Content
	if !strings.Contains(text, `<conversation_summary from="1" to="`+strconv.FormatInt(res.Summary.To, 10)+`" trusted="false">`) ||
		!strings.Contains(text, res.Summary.Text) {
		t.Fatalf("the summary is not in the system message:\n%s", text)
	}
	if after.PrefixHash != before.PrefixHash {
		t.Error("the summary changed the prefix hash")
	}
	if s := after.Report.Summary; s == nil || s.To != res.Summary.To || s.From != 1 {
		t.Fatalf("report's summary %+v", s)
	}
	// Every message is verbatim, summarized, or dropped for the budget, and none is sent twice.
	reasons := map[string]string{}
	for _, r := range after.Report.Regions {
		if r.Name != assembler.RegionHistory {
			continue
		}
		for _, id := range r.Included {
			reasons[id] = "included"
		}
		for _, d := range r.Dropped {
			reasons[d.ID] = d.Reason
		}
	}
	all, _ := st.Messages(ctx, loom.DefaultTenant, "s", store.MessageQuery{})
	window := all[len(all)-len(reasons):] // the history the assembly read: the newest messages
	summarized := 0
	for i, m := range window {
		why := reasons[fmt.Sprintf("history[%d]", i)]
		switch {
		case m.Seq <= res.Summary.To && why != assembler.ReasonSummarized && why != "":
			t.Errorf("seq %d is covered by the summary but %q", m.Seq, why)
		case m.Seq > res.Summary.To && why == assembler.ReasonSummarized:
			t.Errorf("seq %d is reported summarized past the summary's range", m.Seq)
		}
		if why == assembler.ReasonSummarized {
			summarized++
		}
	}
	if summarized == 0 {
		t.Error("no message reported summarized")
	}

	// A summary too long for the budget: the assembly goes on without it, degraded.
	cur := res.Summary
	huge := cur
	huge.Text = strings.Repeat("long summary ", 3000)
	if _, ok, err := st.SwapSummary(ctx, loom.DefaultTenant, "s", cur, huge); err != nil || !ok {
		t.Fatal(err)
	}
	got, err := plain.Assemble(ctx, engine.Request{Agent: "a", Session: "s", Request: assembler.Request{Message: "next"}})
	if err != nil || len(got.Degraded) != 1 || got.Degraded[0].Source != "summary" {
		t.Fatalf("%v, %+v", err, got)
	}
}

func TestRecord_CompactsInTheBackground(t *testing.T) {
	t.Parallel()
	st := newMemory()
	rec := &recorder{}
	results := make(chan string, 64)
	e, _ := testEngine(st, engine.WithSummarizer(rec, engine.SummarizerConfig{}),
		engine.WithCompactionObserver(func(r string) { results <- r }))
	defer e.Close()
	compactionAgent(t, st, loom.DefaultTenant)
	ctx := context.Background()
	filler := strings.Repeat("words to fill the message up ", 20)
	for i := range 20 {
		if _, err := e.Record(ctx, engine.Turn{Session: "s", Agent: "a", Message: fmt.Sprint("q", i, filler),
			Reply: []store.Message{{Role: "assistant", Content: fmt.Sprint("a", i, filler)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for r := range results { // background compactions, as the turns came in, until one compacted
		if r == engine.CompactCompacted {
			break
		}
		if r != engine.CompactNotNeeded && r != engine.CompactBusy {
			t.Fatalf("result %q", r)
		}
	}
	sum, err := st.Summary(ctx, loom.DefaultTenant, "s")
	if err != nil || sum.To == 0 {
		t.Fatalf("%+v, %v", sum, err)
	}
	e.Close() // waits for the worker: none runs after it
	n := rec.calls()
	e.ScheduleCompaction(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
	if rec.calls() != n {
		t.Error("a compaction ran after Close")
	}
}

// TestCompact_TwoServersOnEachBackend: two engines over two handles of one SQLite file or one Valkey
// server, as two Loom servers: while one compacts a session, the other is refused, and the summary the
// first stores is what both assemble with.
func TestCompact_TwoServersOnEachBackend(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s1, s2 := b.openPair(t)
			blk := &blocking{started: make(chan struct{}), release: make(chan struct{})}
			e1, _ := testEngine(s1, engine.WithSummarizer(blk, engine.SummarizerConfig{}))
			e2, _ := testEngine(s2, engine.WithSummarizer(blk, engine.SummarizerConfig{}))
			compactionAgent(t, s1, loom.DefaultTenant)
			conversation(t, s1, loom.DefaultTenant, "s", 0, 20)
			ctx := context.Background()
			done := make(chan engine.CompactResult, 1)
			go func() {
				res, err := e1.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a"})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			<-blk.started
			if res, err := e2.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "a", Force: true}); !errors.Is(err, engine.ErrCompactionBusy) {
				t.Fatalf("the second server: %+v, %v", res, err)
			}
			close(blk.release)
			res := <-done
			if res.Result != engine.CompactCompacted || blk.calls.Load() != 1 {
				t.Fatalf("%+v after %d calls", res, blk.calls.Load())
			}
			for _, e := range []*engine.Engine{e1, e2} {
				out, err := e.Assemble(ctx, engine.Request{Agent: "a", Session: "s", Request: assembler.Request{Message: "next"}})
				if err != nil || out.Report.Summary == nil || out.Report.Summary.To != res.Summary.To {
					t.Fatalf("%v, %+v", err, out.Report.Summary)
				}
			}
		})
	}
}

// TestClose_EndsACompactionUnderWay: Close does not wait for a slow summarizer: it cancels it, and the
// claim is released with the failure recorded.
func TestClose_EndsACompactionUnderWay(t *testing.T) {
	t.Parallel()
	st := newMemory()
	started := make(chan struct{})
	slow := summarize.Func(func(ctx context.Context, req summarize.Request) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	e, _ := testEngine(st, engine.WithSummarizer(slow, engine.SummarizerConfig{}))
	compactionAgent(t, st, loom.DefaultTenant)
	conversation(t, st, loom.DefaultTenant, "s", 0, 20)
	done := make(chan error, 1)
	go func() {
		_, err := e.Compact(context.Background(), engine.CompactRequest{Session: "s", Agent: "a"})
		done <- err
	}()
	<-started
	e.Close()
	if err := <-done; !errors.Is(err, engine.ErrCompactionFailed) {
		t.Fatalf("%v", err)
	}
	sum, err := st.Summary(context.Background(), loom.DefaultTenant, "s")
	if err != nil || sum.Claim != "" || sum.Failures != 1 {
		t.Fatalf("%+v, %v", sum, err)
	}
}
