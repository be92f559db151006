package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/promptcount"
	"github.com/context-loom/loom/server"
)

// cookbookRequest is the OpenAI Cookbook's request with tools (promptcount's testdata) for model.
func cookbookRequest(t *testing.T, model string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "promptcount", "testdata", "cookbook.json"))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatal(err)
	}
	body["model"] = model
	return body
}

// sameAsPromptcount checks that the server's answer is promptcount's, field for field.
func sameAsPromptcount(t *testing.T, got map[string]any, request any, opts promptcount.Options) {
	t.Helper()
	data, _ := json.Marshal(request)
	c, err := promptcount.CountRequest(context.Background(), data, opts)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	b, _ := json.Marshal(c)
	json.Unmarshal(b, &want)
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("the server answers\n%s\npromptcount\n%s", g, w)
	}
}

// TestTokensCount_Request counts the Cookbook's request as the API billed it (105 for gpt-3.5-turbo and
// gpt-4, 101 for gpt-4o and gpt-4o-mini), and every answer is promptcount's, as loom tokens --request's is.
func TestTokensCount_Request(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	for model, want := range map[string]int{"gpt-3.5-turbo": 105, "gpt-4": 105, "gpt-4o": 101, "gpt-4o-mini": 101} {
		req := cookbookRequest(t, model)
		got := ts.must("POST", "/v1/tokens/count", keyAcme, map[string]any{"request": req}, 200)
		if got["tokens"] != float64(want) || got["shape"] != "openai" {
			t.Errorf("%s: %v, want %d tokens", model, got, want)
		}
		sameAsPromptcount(t, got, req, promptcount.Options{})
	}
	// A Messages body is estimated, and says so; provider names the shape, model the model of a body
	// without one.
	anth := map[string]any{"system": "Be brief.", "messages": []any{map[string]any{"role": "user", "content": "Hello"}}}
	got := ts.must("POST", "/v1/tokens/count", keyAcme, map[string]any{"request": anth, "provider": "anthropic", "model": "claude-opus-4-1"}, 200)
	if got["approximate"] != true || got["exact"] != false || got["shape"] != "anthropic" {
		t.Errorf("anthropic: %v", got)
	}
	sameAsPromptcount(t, got, anth, promptcount.Options{Shape: "anthropic", Model: "claude-opus-4-1"})
	// Each body of the per-text limit test is counted whole.
	for _, b := range fullBodies {
		if b.path == "/v1/tokens/count" && strings.Contains(b.body, `"request"`) {
			if code, out, _ := ts.call(b.method, b.path, keyAcme, []byte(b.body)); code != 200 {
				t.Errorf("%s: %d %v", b.body, code, out)
			}
		}
	}
}

// TestTokensCount_RequestErrors answers a request it cannot count with 400 or 413 and the reason.
func TestTokensCount_RequestErrors(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{MaxItems: 5})
	many := make([]any, 6)
	for i := range many {
		many[i] = map[string]any{"role": "user", "content": "x"}
	}
	for _, tc := range []struct {
		body   map[string]any
		status int
		text   string
	}{
		{map[string]any{"request": cookbookRequest(t, "gpt-4"), "text": "x"}, 400, "not both"},
		{map[string]any{"request": cookbookRequest(t, "gpt-4"), "encoding": "o200k_base"}, 400, "encoding does not apply"},
		{map[string]any{"text": "x", "provider": "openai"}, 400, "provider names"},
		{map[string]any{"request": map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "robot"}}}}, 400, "robot"},
		{map[string]any{"request": map[string]any{"model": "gpt-4o", "messages": many}}, 413, "the limit is 5"},
		{map[string]any{"request": "not an object"}, 400, "JSON object"},
		{map[string]any{"request": map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://x.example/a.png"}}}}}}}, 400, "size"},
	} {
		code, out, _ := ts.call("POST", "/v1/tokens/count", keyAcme, tc.body)
		msg, _ := json.Marshal(out)
		if code != tc.status || !strings.Contains(string(msg), tc.text) {
			t.Errorf("%v: %d %s, want %d with %q", tc.body, code, msg, tc.status, tc.text)
		}
	}
}

// TestTokensCount_Provider asks the configured provider's endpoint (a local server in its place) for a
// Claude model's count, and degrades to the estimate when it fails; its key is in no log.
func TestTokensCount_Provider(t *testing.T) {
	t.Parallel()
	const key = "sk-ant-server-SECRET"
	fail := make(chan bool, 1)
	fail <- false
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := <-fail
		fail <- f
		if r.Header.Get("x-api-key") != key || f {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, `{"input_tokens":12}`)
	}))
	t.Cleanup(fake.Close)
	p, err := promptcount.NewProvider(promptcount.ProviderConfig{AnthropicKey: key, AnthropicURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	srv, err := server.New(server.Config{Engine: eng, Keys: map[string]string{keyAcme: "acme"}, ProviderCount: p,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	ts := &testServer{Server: hs, logs: logs, t: t}
	body := func(text string) map[string]any {
		return map[string]any{"request": map[string]any{"model": "claude-haiku-4-5", "messages": []any{map[string]any{"role": "user", "content": text}}}}
	}
	got := ts.must("POST", "/v1/tokens/count", keyAcme, body("Hello"), 200)
	if got["tokens"] != float64(12) || got["exact"] != true || got["source"] != "anthropic" {
		t.Errorf("%v", got)
	}
	<-fail
	fail <- true
	got = ts.must("POST", "/v1/tokens/count", keyAcme, body("Hello again"), 200)
	if got["exact"] != false || got["source"] != "tokenizer" || !strings.Contains(got["degraded"].(string), "status 500") {
		t.Errorf("%v", got)
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("the provider key in the logs: %s", logs.String())
	}
}
