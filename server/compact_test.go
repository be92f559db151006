package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/summarize"
)

// chatServer stands in for a summarizer's Chat Completions API: it answers with a summary naming how many
// messages it read, or with status fail while fail is not 0.
func chatServer(t *testing.T, fail *atomic.Int32) *summarize.OpenAI {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := fail.Load(); code != 0 {
			w.WriteHeader(int(code))
			return
		}
		var body struct{ Messages []struct{ Content string } }
		_ = json.NewDecoder(r.Body).Decode(&body)
		n := strings.Count(body.Messages[len(body.Messages)-1].Content, "<message ")
		fmt.Fprintf(w, `{"choices":[{"message":{"content":"A summary of %d messages."},"finish_reason":"stop"}]}`, n)
	}))
	t.Cleanup(srv.Close)
	c, err := summarize.NewOpenAI(summarize.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", MaxRetries: -1, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAPI_Compact(t *testing.T) {
	t.Parallel()
	var fail atomic.Int32
	st := newMemory()
	eng, err := testEngine(st, engine.WithSummarizer(chatServer(t, &fail), engine.SummarizerConfig{Model: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ts := newTestServerFor(t, eng, server.Limits{})
	agent := map[string]any{"instructions": "Help.", "max_tokens": 4000,
		"policy": map[string]any{"compaction": map[string]any{"trigger_tokens": 100000, "keep_tokens": 300}}}
	if code, body, _ := ts.call("PUT", "/v1/agents/a", keyAcme, agent); code != http.StatusOK && code != http.StatusCreated && code != http.StatusNoContent {
		t.Fatalf("put agent: %d %v", code, body)
	}
	filler := strings.Repeat("filler words ", 40)
	for i := range 10 {
		msgs := map[string]any{"messages": []map[string]any{{"role": "user", "content": fmt.Sprint("q", i, filler)}, {"role": "assistant", "content": fmt.Sprint("a", i, filler)}}}
		if code, body, _ := ts.call("POST", "/v1/sessions/s/messages?agent=a", keyAcme, msgs); code != http.StatusCreated {
			t.Fatalf("append: %d %v", code, body)
		}
	}
	// Below the trigger: nothing to do, unless forced.
	code, body, _ := ts.call("POST", "/v1/sessions/s/compact", keyAcme, map[string]any{"agent": "a"})
	if code != http.StatusOK || body["result"] != "not_needed" {
		t.Fatalf("compact: %d %v", code, body)
	}
	code, body, _ = ts.call("POST", "/v1/sessions/s/compact", keyAcme, map[string]any{"agent": "a", "force": true})
	sum, _ := body["summary"].(map[string]any)
	if code != http.StatusOK || body["result"] != "compacted" || sum["from"] != 1.0 || !strings.HasPrefix(fmt.Sprint(sum["text"]), "A summary of") {
		t.Fatalf("forced compact: %d %v", code, body)
	}
	code, got, _ := ts.call("GET", "/v1/sessions/s/summary", keyAcme, nil)
	if code != http.StatusOK || got["to"] != sum["to"] || got["rev"] != sum["rev"] {
		t.Fatalf("summary: %d %v", code, got)
	}
	// The assembly uses it.
	code, res, _ := ts.call("POST", "/v1/assemble", keyAcme, map[string]any{"agent": "a", "session": "s", "message": "next"})
	if code != http.StatusOK || !strings.Contains(fmt.Sprint(res["messages"]), "<conversation_summary from=\"1\"") {
		t.Fatalf("assemble: %d %v", code, res)
	}
	// Another tenant sees none of it.
	if code, _, _ := ts.call("GET", "/v1/sessions/s/summary", keyGlobex, nil); code != http.StatusNotFound {
		t.Errorf("another tenant's summary: %d", code)
	}
	if code, body, _ := ts.call("POST", "/v1/sessions/s/compact", keyGlobex, map[string]any{"agent": "a"}); code != http.StatusNotFound {
		t.Errorf("another tenant's compact: %d %v", code, body)
	}
	// A failing summarizer: 502, the failure in the record, nothing lost.
	for i := 10; i < 20; i++ {
		ts.call("POST", "/v1/sessions/s/messages", keyAcme, map[string]any{"role": "user", "content": fmt.Sprint("q", i, filler)})
	}
	fail.Store(http.StatusInternalServerError)
	code, body, _ = ts.call("POST", "/v1/sessions/s/compact", keyAcme, map[string]any{"agent": "a", "force": true})
	sum, _ = body["summary"].(map[string]any)
	if code != http.StatusBadGateway || body["result"] != "failed" || sum["failures"] != 1.0 || sum["last_error"] == "" {
		t.Fatalf("failing compact: %d %v", code, body)
	}
	code, got, _ = ts.call("GET", "/v1/sessions/s/summary", keyAcme, nil)
	if code != http.StatusOK || got["failures"] != 1.0 || got["retry_at"] == nil {
		t.Fatalf("summary after a failure: %d %v", code, got)
	}
	code, res, _ = ts.call("POST", "/v1/assemble", keyAcme, map[string]any{"agent": "a", "session": "s", "message": "next"})
	if code != http.StatusOK {
		t.Fatalf("assemble with the summarizer down: %d %v", code, res)
	}
	// Counted by result.
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`loom_compactions_total{result="compacted"} 1`, `loom_compactions_total{result="failed"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestAPI_CompactWithoutASummarizer(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	code, body, _ := ts.call("POST", "/v1/sessions/s/compact", keyAcme, map[string]any{})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), "no summarizer") {
		t.Fatalf("%d %v", code, body)
	}
}
