package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionCompact: loom session compact waits for the summary and prints the record; without a
// summarizer it is a usage error; a summarizer that fails exits 1 with the failure in the record; the key
// is sent and never printed.
func TestSessionCompact(t *testing.T) {
	// Not parallel: it sets LOOM_SUMMARIZER_API_KEY.
	var auth string
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if fail {
			http.Error(w, `{"error":{"message":"down"}}`, http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"choices":[{"message":{"content":"The user asked many questions."},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	t.Setenv("LOOM_SUMMARIZER_API_KEY", "sk-very-secret")
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "loom.db")
	var msgs []map[string]string
	for i := range 12 {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprint("question ", i, strings.Repeat(" filler", 60))},
			map[string]string{"role": "assistant", "content": fmt.Sprint("answer ", i, strings.Repeat(" filler", 60))})
	}
	b, _ := json.Marshal(msgs)
	path := filepath.Join(dir, "msgs.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runLoom(t, "", "session", "append", "--store", db, "--session", "s", "--json", path); code != 0 {
		t.Fatal(errOut)
	}
	agent := filepath.Join(dir, "agent.json")
	os.WriteFile(agent, []byte(`{"id":"a","max_tokens":4000,"policy":{"compaction":{"keep_tokens":500}}}`), 0o644)
	if _, errOut, code := runLoom(t, "", "agent", "put", "--store", db, "--json", agent); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := runLoom(t, "", "session", "compact", "--store", db, "--session", "s"); code != exitUsage || !strings.Contains(errOut, "no summarizer") {
		t.Fatalf("without a summarizer: exit %d %s", code, errOut)
	}
	args := []string{"session", "compact", "--store", db, "--session", "s", "--agent", "a", "--force",
		"--summarizer-url", srv.URL + "/v1", "--summarizer-model", "m"}
	out, errOut, code := runLoom(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	var res struct {
		Result  string
		Summary struct {
			Text     string
			From, To int64
			Failures int
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Result != "compacted" || res.Summary.From != 1 || res.Summary.To == 0 ||
		res.Summary.Text != "The user asked many questions." {
		t.Fatalf("%q: %+v %v", out, res, err)
	}
	if auth != "Bearer sk-very-secret" {
		t.Errorf("authorization %q", auth)
	}
	if _, errOut, code := runLoom(t, "", "session", "append", "--store", db, "--session", "s", "--json", path); code != 0 {
		t.Fatal(errOut)
	}
	fail = true
	out, errOut, code = runLoom(t, "", args...)
	if code != 1 || !strings.Contains(out, `"failures":1`) || strings.Contains(out+errOut, "sk-very-secret") {
		t.Fatalf("a failing summarizer: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = runLoom(t, "", "session", "summary", "--store", db, "--session", "s")
	if code != 0 || !strings.Contains(out, `"failures":1`) || !strings.Contains(out, `"last_error":`) {
		t.Fatalf("session summary: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := runLoom(t, "", "session", "compact", "--store", db, "--session", "s", "--summarizer-url", srv.URL); code != exitUsage {
		t.Fatalf("half a summarizer: exit %d %s", code, errOut)
	}
}

// TestServe_WithASummarizer: loom serve takes the summarizer from the environment, logs that it has one
// (never its key), and POST /v1/sessions/{session}/compact uses it.
func TestServe_WithASummarizer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices":[{"message":{"content":"A summary."},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	t.Setenv("LOOM_SUMMARIZER_URL", srv.URL+"/v1")
	t.Setenv("LOOM_SUMMARIZER_MODEL", "m")
	t.Setenv("LOOM_SUMMARIZER_API_KEY", "sk-never-logged")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--log-format", "json"},
			strings.NewReader(""), &bytes.Buffer{}, logs)
	}()
	base := listening(t, logs, done)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var msgs []string
	for i := range 40 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"q%d %s"}`, i, strings.Repeat("filler ", 1200)),
			fmt.Sprintf(`{"role":"assistant","content":"a%d"}`, i))
	}
	if code, body := post("/v1/sessions/s/messages", `{"messages":[`+strings.Join(msgs, ",")+`]}`); code != http.StatusCreated {
		t.Fatalf("append: %d %s", code, body)
	}
	code, body := post("/v1/sessions/s/compact", `{"force":true}`)
	if code != http.StatusOK || !strings.Contains(body, `"result":"compacted"`) || !strings.Contains(body, `"text":"A summary."`) {
		t.Fatalf("compact: %d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "summarizer configured") || strings.Contains(logs.String(), "sk-never-logged") {
		t.Errorf("logs:\n%s", logs)
	}
}
