package summarize_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/summarize"
)

// answer writes a Chat Completions response whose first choice's content is the JSON value content.
func answer(w http.ResponseWriter, content, finish string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":%q}]}`, content, finish)
}

func newClient(t *testing.T, h http.HandlerFunc, cfg summarize.OpenAIConfig) *summarize.OpenAI {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + "/v1"
	if cfg.Model == "" {
		cfg.Model = "summarizer"
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Millisecond
	}
	c, err := summarize.NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOpenAI_SendsTheRequestAndReadsTheSummary(t *testing.T) {
	t.Parallel()
	var got struct {
		Model     string `json:"model"`
		Messages  []struct{ Role, Content string }
		MaxTokens int  `json:"max_tokens"`
		Stream    bool `json:"stream"`
	}
	var path, auth string
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		path, auth = r.URL.Path, r.Header.Get("Authorization")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		answer(w, `"  The user asked about <tags> & \"quotes\".\n"`, "stop")
	}, summarize.OpenAIConfig{Model: "llama3.2", APIKey: "sk-secret"})
	s, err := c.Summarize(context.Background(), summarize.Request{Instructions: "Summarize.", Text: "User: hi", MaxOutputTokens: 300})
	if err != nil {
		t.Fatal(err)
	}
	if want := `The user asked about <tags> & "quotes".`; s != want {
		t.Errorf("summary %q, want %q", s, want)
	}
	if path != "/v1/chat/completions" || auth != "Bearer sk-secret" {
		t.Errorf("path %q auth %q", path, auth)
	}
	if got.Model != "llama3.2" || got.MaxTokens != 300 || got.Stream || len(got.Messages) != 2 ||
		got.Messages[0].Role != "system" || got.Messages[0].Content != "Summarize." || got.Messages[1].Role != "user" || got.Messages[1].Content != "User: hi" {
		t.Errorf("request %+v", got)
	}
}

func TestOpenAI_RetriesServerErrorsAndRateLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(w http.ResponseWriter)
	}{
		{"500", func(w http.ResponseWriter) {
			http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
		}},
		{"503", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }},
		{"429 with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":{"message":"slow down","type":"rate_limit"}}`, http.StatusTooManyRequests)
		}},
		{"429 with retry-after-ms", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= 2 {
					tc.fault(w)
					return
				}
				answer(w, `"ok"`, "stop")
			}, summarize.OpenAIConfig{})
			s, err := c.Summarize(context.Background(), summarize.Request{Text: "x"})
			if err != nil || s != "ok" || calls.Load() != 3 {
				t.Fatalf("summary %q, err %v, after %d calls; want ok after 3", s, err, calls.Load())
			}
		})
	}
}

func TestOpenAI_GivesUpAfterTheRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, `{"error":{"message":"overloaded, key sk-secret"}}`, http.StatusInternalServerError)
	}, summarize.OpenAIConfig{MaxRetries: 2, APIKey: "sk-secret"})
	_, err := c.Summarize(context.Background(), summarize.Request{Text: "x"})
	var apiErr *summarize.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || !errors.Is(err, loom.ErrUnavailable) {
		t.Fatalf("err %v, want an APIError 500 that is ErrUnavailable", err)
	}
	if calls.Load() != 3 || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("%d calls, err %v", calls.Load(), err)
	}
	if strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("the key is in the error: %v", err)
	}
}

func TestOpenAI_DoesNotRetryARefusedRequest(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, `{"error":{"message":"context too long","code":"context_length_exceeded"}}`, http.StatusBadRequest)
	}, summarize.OpenAIConfig{})
	_, err := c.Summarize(context.Background(), summarize.Request{Text: "x"})
	if !errors.Is(err, loom.ErrInvalid) || calls.Load() != 1 || !strings.Contains(err.Error(), "context_length_exceeded") {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
}

func TestOpenAI_TimesOutASlowServer(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	stop := make(chan struct{})
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		select { // never answers
		case <-r.Context().Done():
		case <-stop:
		}
	}, summarize.OpenAIConfig{Timeout: 20 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { close(stop) }) // before the server's Close, which waits for its handlers
	_, err := c.Summarize(context.Background(), summarize.Request{Text: "x"})
	// Both attempts time out; on a loaded machine one may do so before its request reaches the server, so
	// the server sees at most two.
	if !errors.Is(err, summarize.ErrUnavailable) || !strings.Contains(err.Error(), "timed out") ||
		!strings.Contains(err.Error(), "after 2 attempts") || calls.Load() > 2 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
}

func TestOpenAI_StopsWhenTheContextIsDone(t *testing.T) {
	t.Parallel()
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
	}, summarize.OpenAIConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err := c.Summarize(ctx, summarize.Request{Text: "x"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestOpenAI_RejectsJunk(t *testing.T) {
	t.Parallel()
	huge := `"` + strings.Repeat("a", summarize.DefaultMaxSummaryBytes+1) + `"`
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"empty", func(w http.ResponseWriter, r *http.Request) { answer(w, `""`, "stop") }},
		{"white space", func(w http.ResponseWriter, r *http.Request) { answer(w, `" \n\t "`, "stop") }},
		{"null", func(w http.ResponseWriter, r *http.Request) { answer(w, `null`, "stop") }},
		{"not a string", func(w http.ResponseWriter, r *http.Request) { answer(w, `[{"type":"text","text":"x"}]`, "stop") }},
		{"a number", func(w http.ResponseWriter, r *http.Request) { answer(w, `42`, "stop") }},
		{"control characters", func(w http.ResponseWriter, r *http.Request) { answer(w, `"a\u0000b"`, "stop") }},
		{"invalid UTF-8", func(w http.ResponseWriter, r *http.Request) { answer(w, "\"a\xffb\"", "stop") }},
		{"cut at the limit", func(w http.ResponseWriter, r *http.Request) { answer(w, `"The user asked"`, "length") }},
		{"too long", func(w http.ResponseWriter, r *http.Request) { answer(w, huge, "stop") }},
		{"no choices", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"choices":[]}`) }},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `<html>hello</html>`) }},
		{"a body of 10 MB", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"message":{"content":"`)
			chunk := strings.Repeat("b", 1<<20)
			for range 10 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			io.WriteString(w, `"}}]}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1); tc.h(w, r) }, summarize.OpenAIConfig{})
			s, err := c.Summarize(context.Background(), summarize.Request{Text: "x"})
			if !errors.Is(err, summarize.ErrResponse) || !errors.Is(err, loom.ErrUnavailable) {
				t.Fatalf("summary %.40q, err %v; want ErrResponse", s, err)
			}
			if calls.Load() != 1 {
				t.Errorf("%d calls: junk is not retried by the client", calls.Load())
			}
		})
	}
}

func TestOpenAI_AnErrorWithStatus200(t *testing.T) {
	t.Parallel()
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"error":{"message":"model not loaded"}}`)
	}, summarize.OpenAIConfig{})
	_, err := c.Summarize(context.Background(), summarize.Request{Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "model not loaded") {
		t.Fatalf("err %v", err)
	}
}

func TestNewOpenAI_RefusesBadConfigs(t *testing.T) {
	t.Parallel()
	for _, cfg := range []summarize.OpenAIConfig{
		{Model: "m"},
		{BaseURL: "ftp://x", Model: "m"},
		{BaseURL: "http://x/v1?q=1", Model: "m"},
		{BaseURL: "http://x/v1/chat/completions", Model: "m"},
		{BaseURL: "http://x/v1"},
		{BaseURL: "http://x/v1", Model: "m", RetryDelay: -1},
		{BaseURL: "http://x/v1", Model: "m", MaxSummaryBytes: -1},
	} {
		if _, err := summarize.NewOpenAI(cfg); !errors.Is(err, summarize.ErrInvalidConfig) || !errors.Is(err, loom.ErrInvalid) {
			t.Errorf("%+v: err %v", cfg, err)
		}
	}
}

func FuzzCheckSummary(f *testing.F) {
	for _, s := range []string{"", " ok ", "a\x00b", "\xff", "line\nline\ttab", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := summarize.CheckSummary(s, 64)
		if err != nil {
			if !errors.Is(err, summarize.ErrResponse) {
				t.Fatalf("err %v", err)
			}
			return
		}
		if got == "" || len(got) > 64 || got != strings.TrimSpace(got) || !strings.Contains(s, got) {
			t.Fatalf("CheckSummary(%q) = %q", s, got)
		}
	})
}
