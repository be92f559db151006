package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testKey = "sk-test-0123456789abcdef"

// fakeRequest is what the fake server decodes from a request.
type fakeRequest struct {
	Model          string         `json:"model"`
	Input          []string       `json:"input"`
	Dimensions     *int           `json:"dimensions"`
	EncodingFormat string         `json:"encoding_format"`
	raw            map[string]any // the request's fields
}

// fakeServer is a real HTTP server speaking the OpenAI embeddings API at /v1/embeddings. It checks every
// request (method, path, headers, JSON) and, unless respond handles it, answers with the vectors of
// vectorOf, in reverse order so that clients must use the "index" field.
type fakeServer struct {
	*httptest.Server
	t       *testing.T
	key     string // the expected API key; "" for none
	dims    int
	calls   atomic.Int32
	mu      sync.Mutex
	batches [][]string // the inputs of each request, in arrival order
	// respond, when set, answers request number call (from 0) and returns true, or returns false to let
	// the server answer normally.
	respond func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool
}

func newFakeServer(t *testing.T, key string, dims int) *fakeServer {
	t.Helper()
	s := &fakeServer{t: t, key: key, dims: dims}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	call := int(s.calls.Add(1)) - 1
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		s.t.Errorf("request %s %s, want POST /v1/embeddings", r.Method, r.URL.Path)
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		s.t.Errorf("Content-Type %q, want application/json", ct)
	}
	wantAuth := ""
	if s.key != "" {
		wantAuth = "Bearer " + s.key
	}
	if got := r.Header.Get("Authorization"); got != wantAuth {
		s.t.Errorf("Authorization %q, want %q", got, wantAuth)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("read request: %v", err)
		return
	}
	var req fakeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.t.Errorf("request is not JSON: %v", err)
	}
	if err := json.Unmarshal(body, &req.raw); err != nil {
		s.t.Errorf("request is not a JSON object: %v", err)
	}
	if req.Model == "" || len(req.Input) == 0 || req.EncodingFormat != "float" {
		s.t.Errorf("request %s: want a model, inputs and encoding_format float", body)
	}
	s.mu.Lock()
	s.batches = append(s.batches, req.Input)
	s.mu.Unlock()
	if s.respond != nil && s.respond(w, r, req, call) {
		return
	}
	writeEmbeddings(w, req.Input, s.dims)
}

// vectorOf is the fake server's embedding of a text.
func vectorOf(text string, dims int) []float32 {
	l, err := NewLexical(max(dims, MinLexicalDimensions))
	if err != nil {
		panic(err)
	}
	vs, err := l.Embed(context.Background(), []string{text})
	if err != nil {
		panic(err)
	}
	return vs[0][:dims]
}

type fakeEmbedding struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

// writeEmbeddings answers with the vectors of inputs, last first.
func writeEmbeddings(w http.ResponseWriter, inputs []string, dims int) {
	data := make([]fakeEmbedding, 0, len(inputs))
	for i := len(inputs) - 1; i >= 0; i-- {
		data = append(data, fakeEmbedding{Object: "embedding", Index: i, Embedding: vectorOf(inputs[i], dims)})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": "fake",
		"usage": map[string]int{"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func openAIError(message, typ, code string) map[string]any {
	return map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}}
}

func (s *fakeServer) client(t *testing.T, cfg OpenAIConfig) *OpenAI {
	t.Helper()
	cfg.BaseURL = s.URL + "/v1"
	if cfg.Model == "" {
		cfg.Model = "text-embedding-test"
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Millisecond
	}
	o, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("text number %d about topic %d", i, i%7)
	}
	return out
}

func checkVectors(t *testing.T, got [][]float32, inputs []string, dims int) {
	t.Helper()
	if len(got) != len(inputs) {
		t.Fatalf("%d vectors for %d inputs", len(got), len(inputs))
	}
	for i, v := range got {
		if !equal(v, vectorOf(inputs[i], dims)) {
			t.Fatalf("vector %d is not the one of input %d", i, i)
		}
	}
}

func TestNewOpenAI_ValidatesConfig(t *testing.T) {
	t.Parallel()
	ok := OpenAIConfig{BaseURL: "https://api.openai.com/v1", Model: "text-embedding-3-small"}
	tests := []struct {
		name    string
		edit    func(*OpenAIConfig)
		wantMsg string
	}{
		{"no base URL", func(c *OpenAIConfig) { c.BaseURL = "" }, "BaseURL is required"},
		{"not a URL", func(c *OpenAIConfig) { c.BaseURL = "::not a url" }, "BaseURL must be an http or https URL"},
		{"no scheme", func(c *OpenAIConfig) { c.BaseURL = "api.openai.com/v1" }, "BaseURL must be an http or https URL"},
		{"other scheme", func(c *OpenAIConfig) { c.BaseURL = "ftp://example.com/v1" }, "must be an http or https URL"},
		{"no host", func(c *OpenAIConfig) { c.BaseURL = "http:///v1" }, "BaseURL must be an http or https URL"},
		{"query", func(c *OpenAIConfig) { c.BaseURL = "https://example.com/v1?key=1" }, "must not have a query"},
		{"fragment", func(c *OpenAIConfig) { c.BaseURL = "https://example.com/v1#x" }, "must not have a query or fragment"},
		{"embeddings path", func(c *OpenAIConfig) { c.BaseURL = "https://example.com/v1/embeddings/" },
			"must not include /embeddings"},
		{"no model", func(c *OpenAIConfig) { c.Model = "" }, "Model is required"},
		{"negative dimensions", func(c *OpenAIConfig) { c.Dimensions = -1 }, "Dimensions -1"},
		{"negative batch size", func(c *OpenAIConfig) { c.BatchSize = -5 }, "BatchSize -5"},
		{"negative retry delay", func(c *OpenAIConfig) { c.RetryDelay = -time.Second }, "RetryDelay -1s"},
		{"negative fusion weight", func(c *OpenAIConfig) { c.FusionWeight = -1 }, "FusionWeight -1"},
		{"NaN fusion weight", func(c *OpenAIConfig) { c.FusionWeight = math.NaN() }, "FusionWeight NaN"},
		{"infinite fusion weight", func(c *OpenAIConfig) { c.FusionWeight = math.Inf(1) }, "FusionWeight +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := ok
			tt.edit(&cfg)
			_, err := NewOpenAI(cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("NewOpenAI error = %v, want ErrInvalidConfig saying %q", err, tt.wantMsg)
			}
		})
	}
}

func TestNewOpenAI_NameAndDimensions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg      OpenAIConfig
		wantName string
		wantDims int
	}{
		{OpenAIConfig{BaseURL: "https://api.openai.com/v1/", Model: "text-embedding-3-small"},
			"openai:text-embedding-3-small", 0},
		{OpenAIConfig{BaseURL: "http://localhost:11434/v1", Model: "nomic-embed-text", Dimensions: 256},
			"openai:nomic-embed-text:256", 256},
	}
	for _, tt := range tests {
		o, err := NewOpenAI(tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if o.Name() != tt.wantName || o.Dimensions() != tt.wantDims {
			t.Errorf("Name() = %q, Dimensions() = %d; want %q, %d", o.Name(), o.Dimensions(), tt.wantName, tt.wantDims)
		}
	}
}

func TestOpenAI_EmbedsInInputOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		dims int // configured; 0: learned
	}{
		{"with key and dimensions", testKey, 24},
		{"without key or dimensions", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeServer(t, tt.key, 24)
			var sawDims atomic.Value
			s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
				_, has := req.raw["dimensions"]
				sawDims.Store(has)
				if has && (req.Dimensions == nil || *req.Dimensions != tt.dims) {
					t.Errorf("request dimensions %v, want %d", req.raw["dimensions"], tt.dims)
				}
				if req.Model != "text-embedding-test" {
					t.Errorf("request model %q", req.Model)
				}
				return false
			}
			o := s.client(t, OpenAIConfig{APIKey: tt.key, Dimensions: tt.dims})
			inputs := []string{"first", "second text", "third, and last", "Ünïcödé 上下文"}
			got, err := o.Embed(context.Background(), inputs)
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, got, inputs, 24)
			if has := sawDims.Load().(bool); has != (tt.dims != 0) {
				t.Fatalf("request has dimensions: %v, want %v", has, tt.dims != 0)
			}
			if o.Dimensions() != 24 {
				t.Fatalf("Dimensions() = %d after a response, want 24", o.Dimensions())
			}
		})
	}
}

func TestOpenAI_SplitsInputsIntoBatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		inputs, batch int
		wantSizes     []int
	}{
		{250, 100, []int{100, 100, 50}},
		{200, 100, []int{100, 100}},
		{5, 0, []int{5}},
		{97, 0, []int{96, 1}},
		{3, 1, []int{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d by %d", tt.inputs, tt.batch), func(t *testing.T) {
			t.Parallel()
			s := newFakeServer(t, "", 16)
			o := s.client(t, OpenAIConfig{BatchSize: tt.batch})
			inputs := texts(tt.inputs)
			got, err := o.Embed(context.Background(), inputs)
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, got, inputs, 16)
			var sizes []int
			var sent []string
			for _, b := range s.batches {
				sizes = append(sizes, len(b))
				sent = append(sent, b...)
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tt.wantSizes) {
				t.Fatalf("batch sizes %v, want %v", sizes, tt.wantSizes)
			}
			if strings.Join(sent, "\n") != strings.Join(inputs, "\n") {
				t.Fatal("batches did not send the inputs in order")
			}
		})
	}
}

func TestOpenAI_EmptyInputSendsNothing(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t, "", 16)
	o := s.client(t, OpenAIConfig{})
	for _, in := range [][]string{nil, {}} {
		got, err := o.Embed(context.Background(), in)
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("Embed(%#v) = %v, %v; want an empty slice", in, got, err)
		}
	}
	if n := s.calls.Load(); n != 0 {
		t.Fatalf("%d requests for no input", n)
	}
}

func TestOpenAI_Retries(t *testing.T) {
	t.Parallel()
	type answer struct {
		status int
		header map[string]string
		body   any
	}
	rateLimited := answer{http.StatusTooManyRequests, map[string]string{"Retry-After": "0"},
		openAIError("Rate limit reached for requests", "requests", "rate_limit_exceeded")}
	unavailable := answer{http.StatusServiceUnavailable, nil, openAIError("The server is overloaded", "server_error", "")}
	tests := []struct {
		name       string
		maxRetries int
		answers    []answer // before success; the last one repeats if there are more calls
		succeed    bool     // whether a success follows the answers
		wantCalls  int32
		wantStatus int // of the error; 0: success
		wantMsg    string
	}{
		{"429 then success", 0, []answer{rateLimited}, true, 2, 0, ""},
		{"429 with retry-after-ms", 0, []answer{{429, map[string]string{"Retry-After-Ms": "1"}, nil}}, true, 2, 0, ""},
		{"500 and 503 then success", 0, []answer{{500, nil, "oops"}, unavailable}, true, 3, 0, ""},
		{"408 then success", 0, []answer{{408, nil, nil}}, true, 2, 0, ""},
		{"400 is not retried", 0,
			[]answer{{400, nil, openAIError("'$.input' is invalid.", "invalid_request_error", "invalid_input")}},
			false, 1, 400, "'$.input' is invalid. (type invalid_request_error, code invalid_input)"},
		{"401 is not retried", 0,
			[]answer{{401, nil, openAIError("Incorrect API key", "invalid_request_error", "invalid_api_key")}},
			false, 1, 401, "401 Unauthorized: Incorrect API key (type"},
		{"gives up after MaxRetries", 2, []answer{unavailable}, false, 3, 503, "overloaded (type server_error) (after 3 attempts)"},
		{"gives up after the default retries", 0, []answer{rateLimited}, false, 5, 429, "(after 5 attempts)"},
		{"negative MaxRetries never retries", -1, []answer{unavailable}, false, 1, 503, "The server is overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeServer(t, testKey, 16)
			s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
				if call >= len(tt.answers) && tt.succeed {
					return false
				}
				a := tt.answers[min(call, len(tt.answers)-1)]
				for k, v := range a.header {
					w.Header().Set(k, v)
				}
				if text, ok := a.body.(string); ok {
					w.WriteHeader(a.status)
					_, _ = io.WriteString(w, text)
				} else {
					writeJSON(w, a.status, a.body)
				}
				return true
			}
			o := s.client(t, OpenAIConfig{APIKey: testKey, MaxRetries: tt.maxRetries})
			inputs := texts(3)
			got, err := o.Embed(context.Background(), inputs)
			if n := s.calls.Load(); n != tt.wantCalls {
				t.Errorf("%d requests, want %d", n, tt.wantCalls)
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatal(err)
				}
				checkVectors(t, got, inputs, 16)
				return
			}
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.wantStatus {
				t.Fatalf("error %v, want an APIError with status %d", err, tt.wantStatus)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error %q does not say %q", err, tt.wantMsg)
			}
		})
	}
}

func TestOpenAI_RetriesNetworkErrors(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t, "", 16)
	s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
		if call > 0 {
			return false
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return true
		}
		_ = conn.Close() // no response at all
		return true
	}
	o := s.client(t, OpenAIConfig{})
	inputs := texts(2)
	got, err := o.Embed(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, got, inputs, 16)
	if n := s.calls.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestOpenAI_RetriesTimedOutRequests(t *testing.T) {
	t.Parallel()
	hangFirst := func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
		if call > 0 {
			return false
		}
		select { // hang until the client gives up
		case <-r.Context().Done():
		case <-time.After(2 * time.Minute):
			t.Error("the client did not time out")
		}
		return true
	}
	// The first request hangs until its timeout, and the retry is answered. A retry answered later than the
	// timeout (the machine is loaded) times out too, as it should, and proves nothing: then the test tries
	// again with a longer timeout.
	inputs := texts(2)
	for timeout := 50 * time.Millisecond; ; timeout *= 2 {
		s := newFakeServer(t, "", 16)
		s.respond = hangFirst
		got, err := s.client(t, OpenAIConfig{Timeout: timeout}).Embed(context.Background(), inputs)
		if err == nil {
			checkVectors(t, got, inputs, 16)
			if n := s.calls.Load(); n < 2 {
				t.Fatalf("%d requests: the first one hung, so the answer came from none", n)
			}
			break
		}
		if !strings.Contains(err.Error(), "timed out after") || timeout >= 10*time.Second {
			t.Fatalf("with a timeout of %v: %v", timeout, err)
		}
		t.Logf("with a timeout of %v: %v; trying a longer one", timeout, err)
	}

	// Without retries, the timeout is the error.
	s2 := newFakeServer(t, "", 16)
	s2.respond = hangFirst
	o := s2.client(t, OpenAIConfig{Timeout: 50 * time.Millisecond, MaxRetries: -1})
	_, err := o.Embed(context.Background(), inputs)
	if err == nil || !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Fatalf("error %v, want a timeout", err)
	}
}

// TestOpenAI_StopsWhenContextIsDone: the caller's context ends Embed during a backoff and during a request.
// The context is cancelled once the server has answered (before the backoff) or has the request (during
// it), as it sees them, not after a time the client may or may not have got there in.
func TestOpenAI_StopsWhenContextIsDone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// answer answers the request, calling reached once the client is where the test cancels it.
		answer func(w http.ResponseWriter, r *http.Request, reached func())
	}{
		{"during backoff", func(w http.ResponseWriter, r *http.Request, reached func()) {
			w.Header().Set("Retry-After", "60") // the longest the client waits: only a hang retries first
			writeJSON(w, http.StatusTooManyRequests, openAIError("slow down", "requests", "rate_limit_exceeded"))
			w.(http.Flusher).Flush()
			reached()
		}},
		{"during a request", func(w http.ResponseWriter, r *http.Request, reached func()) {
			reached()
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Minute):
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := newFakeServer(t, "", 16)
			s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
				tt.answer(w, r, cancel)
				return true
			}
			o := s.client(t, OpenAIConfig{})
			start := time.Now()
			_, err := o.Embed(ctx, texts(1))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 2*time.Minute { // a hang, not a loaded machine
				t.Fatalf("Embed returned %s after the context ended", d)
			}
			if n := s.calls.Load(); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

func TestOpenAI_SurfacesServerErrorText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("very long error text ", 200)
	tests := []struct {
		name     string
		status   int
		body     string
		wantMsg  string
		wantType string
		wantCode string
	}{
		{"OpenAI shape", 404, `{"error":{"message":"The model 'x' does not exist",` +
			`"type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			"The model 'x' does not exist", "invalid_request_error", "model_not_found"},
		{"numeric code", 400, `{"error":{"message":"bad input","type":"BadRequestError","code":400}}`,
			"bad input", "BadRequestError", "400"},
		{"error as a string", 400, `{"error":"model \"x\" not found, try pulling it first"}`,
			`model "x" not found, try pulling it first`, "", ""},
		{"flat vLLM shape", 400, `{"object":"error","message":"This model does not support embeddings",` +
			`"type":"BadRequestError","param":null,"code":400}`,
			"This model does not support embeddings", "BadRequestError", "400"},
		{"raw text", 400, "upstream connect error\n\n  or disconnect  ", "upstream connect error or disconnect", "", ""},
		{"HTML page", 404, "<html>\n<body><h1>404 Not Found</h1></body>\n</html>\n",
			"<html> <body><h1>404 Not Found</h1></body> </html>", "", ""},
		{"unknown JSON", 422, `{"detail":[{"loc":["body","input"],"msg":"field required"}]}`,
			`{"detail":[{"loc":["body","input"],"msg":"field required"}]}`, "", ""},
		{"long raw body is truncated", 400, long, strings.TrimSpace(long)[:512] + "…", "", ""},
		{"empty body", 400, "", "", "", ""},
		{"error with status 200", 200, `{"error":{"message":"model overloaded","type":"server_error"}}`,
			"model overloaded", "server_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeServer(t, "", 16)
			s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
				return true
			}
			o := s.client(t, OpenAIConfig{})
			_, err := o.Embed(context.Background(), texts(1))
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v, want an APIError", err)
			}
			want := APIError{StatusCode: tt.status, Message: tt.wantMsg, Type: tt.wantType, Code: tt.wantCode}
			if *apiErr != want {
				t.Fatalf("error %+v, want %+v", *apiErr, want)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error %q does not contain the server's message", err)
			}
		})
	}
}

func TestOpenAI_RejectsInvalidResponses(t *testing.T) {
	t.Parallel()
	vec := func(n int) []float32 { return make([]float32, n) }
	item := func(index any, v []float32) map[string]any {
		m := map[string]any{"object": "embedding", "embedding": v}
		if index != nil {
			m["index"] = index
		}
		return m
	}
	tests := []struct {
		name     string
		dims     int    // configured
		body     string // raw body, if set
		data     []map[string]any
		wantErr  error
		wantText string
	}{
		{name: "not JSON", body: "<html>ok</html>", wantErr: ErrResponse, wantText: "invalid character"},
		{name: "truncated JSON", body: `{"data":[{"index":0,"embedding":[0.1,`,
			wantErr: ErrResponse, wantText: "unexpected EOF"},
		{name: "empty body", body: "", wantErr: ErrResponse, wantText: "EOF"},
		{name: "embedding not numbers", body: `{"data":[{"index":0,"embedding":"AAAA"},{"index":1,"embedding":"AAAA"}]}`,
			wantErr: ErrResponse, wantText: "cannot unmarshal"},
		{name: "number too big for float32", body: `{"data":[{"index":0,"embedding":[1e39]},{"index":1,"embedding":[1]}]}`,
			wantErr: ErrResponse},
		{name: "no data", body: `{"object":"list"}`, wantErr: ErrResponse, wantText: "0 embeddings for 2 inputs"},
		{name: "too few", data: []map[string]any{item(0, vec(4))},
			wantErr: ErrResponse, wantText: "1 embeddings for 2 inputs"},
		{name: "too many", data: []map[string]any{item(0, vec(4)), item(1, vec(4)), item(2, vec(4))},
			wantErr: ErrResponse, wantText: "3 embeddings for 2 inputs"},
		{name: "missing index", data: []map[string]any{item(0, vec(4)), item(nil, vec(4))},
			wantErr: ErrResponse, wantText: "embedding 1 has no index"},
		{name: "repeated index", data: []map[string]any{item(1, vec(4)), item(1, vec(4))},
			wantErr: ErrResponse, wantText: "index 1 repeated"},
		{name: "index out of range", data: []map[string]any{item(0, vec(4)), item(2, vec(4))},
			wantErr: ErrResponse, wantText: "index 2 out of range"},
		{name: "negative index", data: []map[string]any{item(-1, vec(4)), item(0, vec(4))},
			wantErr: ErrResponse, wantText: "index -1 out of range"},
		{name: "empty embedding", data: []map[string]any{item(0, vec(4)), item(1, vec(0))},
			wantErr: ErrResponse, wantText: "embedding of index 1 is empty"},
		{name: "null embedding", data: []map[string]any{item(0, nil), item(1, vec(4))},
			wantErr: ErrResponse, wantText: "embedding of index 0 is empty"},
		{name: "unequal dimensions", data: []map[string]any{item(0, vec(4)), item(1, vec(5))},
			wantErr: ErrDimensions, wantText: "index 1 has 5 dimensions, that of index 0 has 4"},
		{name: "not the configured dimensions", dims: 8, data: []map[string]any{item(0, vec(4)), item(1, vec(4))},
			wantErr: ErrDimensions, wantText: "got 4, want 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeServer(t, "", 16)
			s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
				if tt.data != nil {
					writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": tt.data})
					return true
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tt.body)
				return true
			}
			o := s.client(t, OpenAIConfig{Dimensions: tt.dims})
			_, err := o.Embed(context.Background(), []string{"a", "b"})
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("error %v, want %v saying %q", err, tt.wantErr, tt.wantText)
			}
			if n := s.calls.Load(); n != 1 {
				t.Fatalf("%d requests: an invalid response must not be retried", n)
			}
		})
	}
}

func TestOpenAI_ChecksDimensionsAcrossResponses(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t, "", 16)
	s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
		writeEmbeddings(w, req.Input, 16+call) // the model changed between calls
		return true
	}
	o := s.client(t, OpenAIConfig{})
	if o.Dimensions() != 0 {
		t.Fatalf("Dimensions() = %d before any response, want 0", o.Dimensions())
	}
	if _, err := o.Embed(context.Background(), texts(1)); err != nil {
		t.Fatal(err)
	}
	if o.Dimensions() != 16 {
		t.Fatalf("Dimensions() = %d, want 16 learned from the response", o.Dimensions())
	}
	_, err := o.Embed(context.Background(), texts(1))
	if !errors.Is(err, ErrDimensions) || !strings.Contains(err.Error(), "got 17, want 16") {
		t.Fatalf("error %v, want ErrDimensions", err)
	}
}

func TestOpenAI_RefusesHugeResponses(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t, "", 16)
	s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[`)
		chunk := []byte(strings.Repeat("0.125,", 1<<12))
		for written := 0; written <= 1<<20; written += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return true // the client hung up, as it should
			}
		}
		_, _ = io.WriteString(w, `1]}]}`)
		return true
	}
	o := s.client(t, OpenAIConfig{})
	if o.maxBody != 64<<20 {
		t.Fatalf("response limit %d, want 64 MiB", o.maxBody)
	}
	o.maxBody = 1 << 20 // a smaller limit, to keep the test fast
	_, err := o.Embed(context.Background(), texts(1))
	if !errors.Is(err, ErrResponse) || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Fatalf("error %v, want ErrResponse for a response larger than 1 MiB", err)
	}
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("%d requests: an oversized response must not be retried", n)
	}
}

func TestOpenAI_NeverLeaksTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
	}{
		{"server repeats the key in its message", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 401, openAIError("Incorrect API key provided: "+testKey+". Header: "+r.Header.Get("Authorization"),
				"invalid_request_error", testKey))
		}},
		{"server repeats the key in a raw body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			_, _ = fmt.Fprintf(w, "upstream said: %s", r.Header)
		}},
		{"connection dropped", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeServer(t, testKey, 16)
			s.respond = func(w http.ResponseWriter, r *http.Request, req fakeRequest, call int) bool {
				tt.answer(w, r)
				return true
			}
			o := s.client(t, OpenAIConfig{APIKey: testKey, MaxRetries: 1})
			_, err := o.Embed(context.Background(), texts(1))
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), testKey) {
				t.Fatalf("the error shows the API key: %v", err)
			}
			var apiErr *APIError
			if errors.As(err, &apiErr) && !strings.Contains(err.Error(), "[redacted]") {
				t.Fatalf("error %q: want the key replaced by [redacted]", err)
			}
		})
	}
}

func TestOpenAI_IsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t, "", 16)
	o := s.client(t, OpenAIConfig{BatchSize: 3})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			inputs := texts(5 + g)
			got, err := o.Embed(context.Background(), inputs)
			if err != nil {
				t.Error(err)
				return
			}
			for i, v := range got {
				if !equal(v, vectorOf(inputs[i], 16)) {
					t.Errorf("goroutine %d: vector %d is not its input's", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
	if o.Dimensions() != 16 {
		t.Fatalf("Dimensions() = %d, want 16", o.Dimensions())
	}
}

func TestOpenAI_BackoffGrowsWithJitter(t *testing.T) {
	t.Parallel()
	o, err := NewOpenAI(OpenAIConfig{BaseURL: "http://localhost/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for attempt, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second} {
		for range 20 {
			if d := o.backoff(attempt); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", attempt, d, want/2, want)
			}
		}
	}
	if d := o.backoff(1000); d > 30*time.Second {
		t.Fatalf("backoff(1000) = %s", d)
	}
}

func ExampleNewOpenAI() {
	// A stand-in for https://api.openai.com/v1, http://localhost:11434/v1 (Ollama) and the like.
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Input []string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		var out bytes.Buffer
		out.WriteString(`{"object":"list","data":[`)
		for i, text := range req.Input {
			if i > 0 {
				out.WriteString(",")
			}
			fmt.Fprintf(&out, `{"object":"embedding","index":%d,"embedding":[%d,1,0]}`, i, len(text))
		}
		out.WriteString(`]}`)
		_, _ = w.Write(out.Bytes())
	}))
	defer server.Close()

	e, err := NewOpenAI(OpenAIConfig{
		BaseURL: server.URL + "/v1",
		Model:   "text-embedding-3-small",
		APIKey:  "sk-...", // sent as a bearer token, never shown in errors
	})
	if err != nil {
		panic(err)
	}
	vs, err := e.Embed(context.Background(), []string{"a", "abc"})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Name(), e.Dimensions())
	fmt.Println(vs)
	// Output:
	// openai:text-embedding-3-small 3
	// [[1 1 0] [3 1 0]]
}
