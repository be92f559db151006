// SPDX-License-Identifier: Apache-2.0

package promptcount_test

import (
	"context"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/promptcount"
)

const (
	anthropicKey = "sk-ant-test-SECRET-1234"
	geminiKey    = "AIza-test-SECRET-5678"
)

// fakeProvider is a local server that speaks Anthropic's count_tokens and Gemini's countTokens, checks
// the keys and the bodies it is sent, and answers as fault says.
type fakeProvider struct {
	t      *testing.T
	calls  atomic.Int64
	mu     sync.Mutex
	fault  string // "", "500", "overloaded", "echo-key", "garbage", "no-count", "huge", "hang"
	bodies []map[string]any
	paths  []string
}

func (f *fakeProvider) setFault(s string) {
	f.mu.Lock()
	f.fault = s
	f.mu.Unlock()
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	f.mu.Lock()
	fault := f.fault
	f.mu.Unlock()
	if strings.Contains(r.URL.String(), "SECRET") {
		f.t.Errorf("a key in the URL %s", r.URL)
	}
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		f.t.Errorf("a body that is not JSON: %s", data)
	}
	f.mu.Lock()
	f.bodies, f.paths = append(f.bodies, body), append(f.paths, r.URL.Path)
	f.mu.Unlock()
	anthropic := r.URL.Path == "/v1/messages/count_tokens"
	switch {
	case anthropic && (r.Header.Get("x-api-key") != anthropicKey || r.Header.Get("anthropic-version") == ""):
		http.Error(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, http.StatusUnauthorized)
		return
	case !anthropic && (r.Header.Get("x-goog-api-key") != geminiKey || !strings.HasSuffix(r.URL.Path, ":countTokens")):
		http.Error(w, `{"error":{"code":401,"status":"UNAUTHENTICATED","message":"API key not valid"}}`, http.StatusUnauthorized)
		return
	}
	switch fault {
	case "500":
		w.WriteHeader(http.StatusInternalServerError)
		return
	case "overloaded":
		w.WriteHeader(529)
		io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		return
	case "echo-key":
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"bad key `+anthropicKey+` / `+geminiKey+`"}}`)
		return
	case "garbage":
		io.WriteString(w, `<html>`)
		return
	case "no-count":
		io.WriteString(w, `{}`)
		return
	case "huge":
		io.WriteString(w, `{"input_tokens":1,"pad":"`+strings.Repeat("x", 2<<20)+`"}`)
		return
	case "hang":
		<-r.Context().Done() // until the client gives up
		return
	}
	if anthropic {
		io.WriteString(w, `{"input_tokens":4242}`)
	} else {
		io.WriteString(w, `{"totalTokens":777,"promptTokensDetails":[]}`)
	}
}

func newFake(t *testing.T) (*fakeProvider, *httptest.Server) {
	f := &fakeProvider{t: t}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func newProvider(t *testing.T, url string, cfg promptcount.ProviderConfig) *promptcount.Provider {
	t.Helper()
	cfg.AnthropicKey, cfg.AnthropicURL, cfg.GeminiKey, cfg.GeminiURL = anthropicKey, url, geminiKey, url
	p, err := promptcount.NewProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	claudeBody = `{"model":"claude-sonnet-4-5-20250929","max_tokens":100,"temperature":1,"system":"Be brief.",
		"messages":[{"role":"user","content":"Hello"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`
	geminiBody = `{"model":"gemini-2.5-flash","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"done"}],
		"tools":[{"type":"function","function":{"name":"f","description":"F","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}]}`
)

// TestProvider_Counts asks each provider's endpoint for the count, exact, with the local estimate beside
// it, sends what the endpoint takes, and caches the answer by request.
func TestProvider_Counts(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t)
	p := newProvider(t, srv.URL, promptcount.ProviderConfig{})
	for _, tc := range []struct {
		body, source string
		want         int
	}{
		{claudeBody, promptcount.SourceAnthropic, 4242},
		{geminiBody, promptcount.SourceGemini, 777},
	} {
		for range 2 {
			c := count(t, tc.body, promptcount.Options{Provider: p})
			if c.Tokens != tc.want || !c.Exact || c.Approximate || c.Source != tc.source || c.Estimate == 0 || c.Degraded != "" {
				t.Errorf("%s: %+v", tc.source, c)
			}
		}
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("%d calls for two requests counted twice each: the cache did not answer", n)
	}
	// What each endpoint was sent.
	a, g := f.bodies[0], f.bodies[1]
	if a["model"] != "claude-sonnet-4-5-20250929" || a["system"] != "Be brief." || a["max_tokens"] != nil || a["temperature"] != nil || a["tools"] == nil || a["tool_choice"] == nil {
		t.Errorf("sent to count_tokens: %v", a)
	}
	if f.paths[1] != "/v1beta/models/gemini-2.5-flash:countTokens" {
		t.Errorf("Gemini path %s", f.paths[1])
	}
	req, _ := g["generateContentRequest"].(map[string]any)
	got, _ := json.Marshal(req)
	for _, want := range []string{`"model":"models/gemini-2.5-flash"`, `"systemInstruction":{"parts":[{"text":"Be brief."}]}`,
		`{"functionCall":{"args":{"a":1},"name":"f"}}`, `{"functionResponse":{"name":"f","response":{"content":"done"}}}`,
		`"functionDeclarations":[{"description":"F","name":"f","parameters":{"properties":{"a":{"type":"integer"}},"type":"object"}}]`,
		`{"parts":[{"text":"Hello"}],"role":"user"}`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("sent to countTokens %s\nwant in it %s", got, want)
		}
	}
	// A model counted exactly here never asks.
	before := f.calls.Load()
	if c := count(t, cookbookRequest(t, "gpt-4"), promptcount.Options{Provider: p}); c.Tokens != 105 || c.Source != promptcount.SourceTokenizer {
		t.Errorf("gpt-4 with a provider: %+v", c)
	}
	if f.calls.Load() != before {
		t.Error("a provider was asked about an OpenAI model")
	}
}

// TestProvider_Faults gives the local estimate and a reason on every fault, never the key.
func TestProvider_Faults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ fault, reason string }{
		{"500", "status 500"},
		{"overloaded", "status 529 (overloaded_error: Overloaded)"},
		{"echo-key", "status 400"},
		{"garbage", "not JSON"},
		{"no-count", "without a count"},
		{"huge", "more than"},
		{"hang", "no answer within"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			t.Parallel()
			f, srv := newFake(t)
			f.setFault(tc.fault)
			cfg := promptcount.ProviderConfig{}
			if tc.fault == "hang" { // the one fault that waits for the timeout; the others must not meet it
				cfg.Timeout = 100 * time.Millisecond
			}
			p := newProvider(t, srv.URL, cfg)
			for _, body := range []string{claudeBody, geminiBody} {
				c := count(t, body, promptcount.Options{Provider: p})
				local := count(t, body, promptcount.Options{})
				if c.Tokens != local.Tokens || c.Exact || c.Source != promptcount.SourceTokenizer || !strings.Contains(c.Degraded, tc.reason) {
					t.Errorf("%+v, want the estimate %d and a reason with %q", c, local.Tokens, tc.reason)
				}
				if strings.Contains(c.Degraded, "SECRET") {
					t.Errorf("the key in the reason: %s", c.Degraded)
				}
			}
			// A failure is not cached: once the provider answers, it counts.
			f.setFault("")
			if c := count(t, claudeBody, promptcount.Options{Provider: p}); c.Tokens != 4242 {
				t.Errorf("after the fault: %+v", c)
			}
		})
	}
}

// TestProvider_WrongKey degrades with the provider's message, without the key.
func TestProvider_WrongKey(t *testing.T) {
	t.Parallel()
	_, srv := newFake(t)
	p, err := promptcount.NewProvider(promptcount.ProviderConfig{AnthropicKey: "sk-ant-wrong-SECRET", AnthropicURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := count(t, claudeBody, promptcount.Options{Provider: p})
	if !strings.Contains(c.Degraded, "authentication_error") || strings.Contains(c.Degraded, "SECRET") || c.Exact {
		t.Errorf("%+v", c)
	}
	// No Gemini key: a Gemini model is estimated, as without a provider, and not said to be degraded.
	if c := count(t, geminiBody, promptcount.Options{Provider: p}); c.Degraded != "" || c.Source != promptcount.SourceTokenizer {
		t.Errorf("%+v", c)
	}
}

// TestProvider_Unsendable degrades, without asking, for a request the endpoint cannot take.
func TestProvider_Unsendable(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t)
	p := newProvider(t, srv.URL, promptcount.ProviderConfig{})
	for _, tc := range []struct{ body, reason string }{
		{`{"model":"claude-opus-4-1","messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`, "Messages API body"},
		{`{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"[1]"}}]},{"role":"tool","tool_call_id":"1","content":"x"}]}`, "not a JSON object"},
		{`{"model":"gemini-2.5-pro","system":"s","messages":[{"role":"user","content":"hi"}]}`, "Chat Completions bodies"},
	} {
		c := count(t, tc.body, promptcount.Options{Provider: p})
		if !strings.Contains(c.Degraded, tc.reason) || c.Exact {
			t.Errorf("%s: %+v, want a reason with %q", tc.body, c, tc.reason)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("%d calls", n)
	}
}

// TestProvider_CacheBounded keeps at most CacheSize counts, the most recent.
func TestProvider_CacheBounded(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t)
	p := newProvider(t, srv.URL, promptcount.ProviderConfig{CacheSize: 2})
	body := func(i int) string {
		return strings.Replace(claudeBody, "Hello", "Hello "+strings.Repeat("!", i), 1)
	}
	for i := range 3 {
		count(t, body(i), promptcount.Options{Provider: p})
	}
	n := f.calls.Load()
	count(t, body(2), promptcount.Options{Provider: p}) // kept
	count(t, body(1), promptcount.Options{Provider: p}) // kept
	if f.calls.Load() != n {
		t.Errorf("a recent count was asked again")
	}
	count(t, body(0), promptcount.Options{Provider: p}) // forgotten
	if f.calls.Load() != n+1 {
		t.Errorf("the oldest count was kept past the cache's size")
	}
}

// TestProvider_Canceled degrades when the caller's context ends.
func TestProvider_Canceled(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t)
	f.setFault("hang")
	p := newProvider(t, srv.URL, promptcount.ProviderConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := promptcount.CountRequest(ctx, []byte(claudeBody), promptcount.Options{Provider: p})
	if err != nil || c.Degraded == "" || c.Exact {
		t.Errorf("%+v, %v", c, err)
	}
}

func TestNewProvider_Errors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []promptcount.ProviderConfig{
		{},
		{AnthropicKey: "k", AnthropicURL: "ftp://x"},
		{GeminiKey: "k", GeminiURL: "http://x.example/?key=1"},
	} {
		if _, err := promptcount.NewProvider(cfg); !errors.Is(err, promptcount.ErrProviderConfig) || !errors.Is(err, loom.ErrInvalid) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestProvider_NotOnTheAssemblyPath: no package that assembles (assembler, engine, store and its
// backends) imports promptcount, so that no assembly can wait for a provider's counting endpoint.
func TestProvider_NotOnTheAssemblyPath(t *testing.T) {
	t.Parallel()
	files := 0
	for _, dir := range []string{"assembler", "engine", "store", "tokenizer"} {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			files++
			for _, imp := range f.Imports {
				if strings.Contains(imp.Path.Value, "/promptcount") {
					t.Errorf("%s imports promptcount", path)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Errorf("read %d files: the walk missed the packages", files)
	}
}
