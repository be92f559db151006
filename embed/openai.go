package embed

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/context-loom/loom/internal/apiretry"

	"github.com/context-loom/loom"
)

// Defaults of [OpenAIConfig].
const (
	// DefaultOpenAIBatchSize is the number of texts sent in one request.
	DefaultOpenAIBatchSize = 96
	// DefaultOpenAIMaxRetries is the number of times a failed request is retried.
	DefaultOpenAIMaxRetries = 4
	// DefaultOpenAIRetryDelay is the delay before the first retry; it doubles on each retry, up to 30 s.
	DefaultOpenAIRetryDelay = 500 * time.Millisecond
	// DefaultOpenAITimeout is the time one request, response included, may take.
	DefaultOpenAITimeout = 60 * time.Second
)

const (
	maxResponseBytes  = 64 << 20 // of a successful response
	maxErrorBodyBytes = 64 << 10 // read of an error response
)

// OpenAIConfig configures an [OpenAI] embedder. Zero values mean the documented defaults.
type OpenAIConfig struct {
	// BaseURL is the API's base URL, to which "/embeddings" is appended (required): for example
	// "https://api.openai.com/v1", "http://localhost:11434/v1" (Ollama), "http://localhost:8000/v1" (vLLM) or
	// "http://localhost:1234/v1" (LM Studio).
	BaseURL string
	// Model is the embedding model's name, such as "text-embedding-3-small" or "nomic-embed-text" (required).
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>". It never appears in errors: a server
	// message that repeats it has it replaced by "[redacted]".
	APIKey string
	// Dimensions, when set, is sent as the request's "dimensions" field, which asks models that support
	// shortening (OpenAI's text-embedding-3 models, Matryoshka models on vLLM) for vectors of that length,
	// and every response is checked against it. Servers reject the field for models that cannot shorten
	// their vectors: leave it 0 for those. When 0, the length is the model's own, learned from the first
	// response; until then [OpenAI.Dimensions] returns 0, and later responses must match it.
	Dimensions int
	// BatchSize is the most texts sent in one request (default [DefaultOpenAIBatchSize]). Longer inputs are
	// sent in consecutive requests.
	BatchSize int
	// MaxRetries is how many times a request is retried after a network error, a timeout or an HTTP status
	// 408, 429 or 5xx (default [DefaultOpenAIMaxRetries]; negative: never).
	MaxRetries int
	// RetryDelay is the delay before the first retry (default [DefaultOpenAIRetryDelay]). It doubles on each
	// retry up to 30 s, with random jitter of up to half of it. A Retry-After (or retry-after-ms) header
	// of the response replaces it, up to one minute.
	RetryDelay time.Duration
	// Timeout bounds each request, response included (default [DefaultOpenAITimeout]; negative: no bound
	// other than the context's). A request that times out is retried.
	Timeout time.Duration
	// HTTPClient sends the requests (default: a client with [http.DefaultTransport]). Its own Timeout, if
	// any, also applies.
	HTTPClient *http.Client
	// FusionWeight is how much the model's ranking counts against the keywords' (weight 1) in hybrid and
	// MMR retrieval (see [FusionWeighter]); 0 means [DefaultOpenAIFusionWeight], 1. A model that ranks
	// better than keyword search on your documents deserves more, a weak one less. It must be finite and not
	// negative.
	FusionWeight float64
}

// OpenAI is an [Embedder] that asks a server speaking the OpenAI embeddings API: it posts
// {"model", "input": [texts], "encoding_format": "float"} (and "dimensions" when configured) to
// {BaseURL}/embeddings and reads {"data": [{"index", "embedding"}]}. It is safe for concurrent use.
type OpenAI struct {
	url        string
	model      string
	key        string
	dims       int          // configured; 0: learned
	learned    atomic.Int64 // dimensions of the first response, when dims is 0
	batch      int
	retries    int
	retryDelay time.Duration
	timeout    time.Duration
	client     *http.Client
	name       string
	maxBody    int64 // largest successful response read
	fusion     float64
}

// NewOpenAI returns an embedder for the server and model of cfg. It sends nothing: a wrong key or model
// surfaces on the first [OpenAI.Embed]. It returns an error wrapping [ErrInvalidConfig] when BaseURL is not an
// http or https URL without query or fragment, or ends in /embeddings; when Model is empty; or when
// Dimensions, BatchSize or RetryDelay is negative; or when FusionWeight is negative, NaN or infinite.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case cfg.BaseURL == "":
		return nil, fmt.Errorf("%w: BaseURL is required", ErrInvalidConfig)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("%w: BaseURL must be an http or https URL, such as https://api.openai.com/v1",
			ErrInvalidConfig)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("%w: BaseURL %s must not have a query or fragment", ErrInvalidConfig, u.Redacted())
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/embeddings"):
		return nil, fmt.Errorf("%w: BaseURL %s must not include /embeddings, which is appended to it",
			ErrInvalidConfig, u.Redacted())
	case cfg.Model == "":
		return nil, fmt.Errorf("%w: Model is required", ErrInvalidConfig)
	case cfg.Dimensions < 0:
		return nil, fmt.Errorf("%w: Dimensions %d is negative", ErrInvalidConfig, cfg.Dimensions)
	case cfg.BatchSize < 0:
		return nil, fmt.Errorf("%w: BatchSize %d is negative", ErrInvalidConfig, cfg.BatchSize)
	case cfg.RetryDelay < 0:
		return nil, fmt.Errorf("%w: RetryDelay %s is negative", ErrInvalidConfig, cfg.RetryDelay)
	case !(cfg.FusionWeight >= 0) || math.IsInf(cfg.FusionWeight, 0):
		return nil, fmt.Errorf("%w: FusionWeight %v must be finite and not negative", ErrInvalidConfig, cfg.FusionWeight)
	}
	o := &OpenAI{
		url:        strings.TrimRight(cfg.BaseURL, "/") + "/embeddings",
		model:      cfg.Model,
		key:        cfg.APIKey,
		dims:       cfg.Dimensions,
		batch:      cmp.Or(cfg.BatchSize, DefaultOpenAIBatchSize),
		retries:    max(0, cmp.Or(cfg.MaxRetries, DefaultOpenAIMaxRetries)),
		retryDelay: cmp.Or(cfg.RetryDelay, DefaultOpenAIRetryDelay),
		timeout:    cmp.Or(cfg.Timeout, DefaultOpenAITimeout),
		client:     cfg.HTTPClient,
		name:       "openai:" + cfg.Model,
		maxBody:    maxResponseBytes,
		fusion:     cmp.Or(cfg.FusionWeight, DefaultOpenAIFusionWeight),
	}
	if o.client == nil {
		o.client = &http.Client{}
	}
	if o.dims > 0 {
		o.name += ":" + strconv.Itoa(o.dims)
	}
	return o, nil
}

// Dimensions returns the configured dimensions; without them, the length of the vectors of the first
// successful response, or 0 before it.
func (o *OpenAI) Dimensions() int {
	if o.dims > 0 {
		return o.dims
	}
	return int(o.learned.Load())
}

// FusionWeight returns OpenAIConfig.FusionWeight, or [DefaultOpenAIFusionWeight] when it was 0.
func (o *OpenAI) FusionWeight() float64 { return o.fusion }

// Name returns "openai:" followed by the model and, when configured, ":" and the dimensions, such as
// "openai:text-embedding-3-small:512".
func (o *OpenAI) Name() string { return o.name }

// Embed returns the server's vector for each text, in the order of texts. It sends the texts in batches of
// BatchSize, one request after another, and retries a request as [OpenAIConfig] says; it stops waiting as soon
// as ctx is done and then returns an error wrapping ctx's error. It returns all the vectors or none: after an
// error, the vectors of the batches that succeeded are discarded. Texts are sent as they are: servers reject
// empty texts and texts longer than the model's input limit, with an [*APIError].
//
// Errors: an [*APIError] when the server answers with an error status (after the retries for 408, 429 and
// 5xx; the message then says how many attempts were made); an error wrapping [ErrResponse] for a response that is not a valid embeddings response for the
// batch, or bigger than 64 MiB; [ErrDimensions] for vectors of unequal or unexpected lengths; network errors
// as the HTTP client reports them.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for start := 0; start < len(texts); start += o.batch {
		end := min(start+o.batch, len(texts))
		if err := o.embedBatch(ctx, texts[start:end], out[start:end]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	Dimensions     int      `json:"dimensions,omitempty"`
	EncodingFormat string   `json:"encoding_format"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Error json.RawMessage `json:"error"` // some servers answer errors with status 200
}

// embedBatch embeds one batch into out, retrying failed attempts.
func (o *OpenAI) embedBatch(ctx context.Context, texts []string, out [][]float32) error {
	body, err := json.Marshal(embeddingsRequest{
		Model: o.model, Input: texts, Dimensions: o.dims, EncodingFormat: "float",
	})
	if err != nil {
		return fmt.Errorf("embed: encode request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		res := o.attempt(ctx, body, out)
		if res.err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("embed: %w", ctx.Err())
		}
		if !res.retry || attempt >= o.retries {
			if attempt > 0 {
				return fmt.Errorf("%w (after %d attempts)", res.err, attempt+1)
			}
			return res.err
		}
		delay := res.retryAfter
		if delay < 0 {
			delay = o.backoff(attempt)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("embed: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// backoff returns the delay before retry number attempt+1: RetryDelay doubled attempt times, at most 30 s
// (or RetryDelay if longer), less a random part of up to half of it.
func (o *OpenAI) backoff(attempt int) time.Duration { return apiretry.Backoff(o.retryDelay, attempt) }

// attemptResult is the outcome of one request: err is nil on success, or says whether to retry and, when
// the server said so, after how long (-1: not said).
type attemptResult struct {
	err        error
	retry      bool
	retryAfter time.Duration
}

// attempt sends one request and, on success, stores its vectors in out.
func (o *OpenAI) attempt(ctx context.Context, body []byte, out [][]float32) attemptResult {
	actx := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(actx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return attemptResult{err: fmt.Errorf("embed: %w", err), retryAfter: -1}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return o.transportError(ctx, actx, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10) // let a short remainder keep the connection reusable
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		if err != nil && len(data) == 0 {
			return o.transportError(ctx, actx, err)
		}
		return attemptResult{
			err:        o.apiError(resp.StatusCode, data),
			retry:      apiretry.RetryableStatus(resp.StatusCode),
			retryAfter: apiretry.RetryAfter(resp.Header),
		}
	}
	lr := &limitedReader{r: resp.Body, n: o.maxBody}
	var r embeddingsResponse
	if err := json.NewDecoder(lr).Decode(&r); err != nil {
		switch {
		case lr.tooBig:
			err = fmt.Errorf("%w: response larger than %s", ErrResponse, byteSize(o.maxBody))
		case lr.err != nil:
			return o.transportError(ctx, actx, lr.err)
		default:
			err = fmt.Errorf("%w: %v", ErrResponse, err)
		}
		return attemptResult{err: err, retryAfter: -1}
	}
	if len(r.Data) == 0 && len(r.Error) > 0 && string(r.Error) != "null" {
		envelope := append(append([]byte(`{"error":`), r.Error...), '}')
		return attemptResult{err: o.apiError(resp.StatusCode, envelope), retryAfter: -1}
	}
	if err := o.collect(&r, out); err != nil {
		return attemptResult{err: err, retryAfter: -1}
	}
	return attemptResult{}
}

// transportError classifies an error of sending a request or reading its response: retried, unless ctx (the
// caller's context) is done.
func (o *OpenAI) transportError(ctx, actx context.Context, err error) attemptResult {
	if ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("request timed out after %s", o.timeout)
	}
	if ctx.Err() != nil {
		return attemptResult{err: fmt.Errorf("embed: %w", err), retryAfter: -1}
	}
	return attemptResult{err: fmt.Errorf("%w: %w", ErrUnavailable, err), retry: true, retryAfter: -1}
}

// collect checks a response against its batch and stores the vectors in out by their index.
func (o *OpenAI) collect(r *embeddingsResponse, out [][]float32) error {
	n := len(out)
	if len(r.Data) != n {
		return fmt.Errorf("%w: %d embeddings for %d inputs", ErrResponse, len(r.Data), n)
	}
	vecs := make([][]float32, n)
	for k, d := range r.Data {
		switch {
		case d.Index == nil:
			return fmt.Errorf("%w: embedding %d has no index", ErrResponse, k)
		case *d.Index < 0 || *d.Index >= n:
			return fmt.Errorf("%w: index %d out of range for %d inputs", ErrResponse, *d.Index, n)
		case vecs[*d.Index] != nil:
			return fmt.Errorf("%w: index %d repeated", ErrResponse, *d.Index)
		case len(d.Embedding) == 0:
			return fmt.Errorf("%w: embedding of index %d is empty", ErrResponse, *d.Index)
		}
		vecs[*d.Index] = d.Embedding
	}
	dims := len(vecs[0])
	for i, v := range vecs {
		if len(v) != dims {
			return fmt.Errorf("%w: embedding of index %d has %d dimensions, that of index 0 has %d",
				ErrDimensions, i, len(v), dims)
		}
	}
	want := o.dims
	if want == 0 && !o.learned.CompareAndSwap(0, int64(dims)) {
		want = int(o.learned.Load())
	}
	if want != 0 && dims != want {
		return fmt.Errorf("%w: got %d, want %d", ErrDimensions, dims, want)
	}
	copy(out, vecs)
	return nil
}

// APIError is the error of a request that the server answered with an error status. Its fields come from the
// response body: OpenAI's {"error": {"message", "type", "code"}} and its variants, else the start of the
// body as the message. They never contain the API key.
type APIError struct {
	StatusCode int    // the HTTP status code
	Message    string // the server's message (at most 512 bytes)
	Type       string // the error type, when given, such as "invalid_request_error"
	Code       string // the error code, when given, such as "model_not_found"
}

// Unwrap returns the kind of the error: loom.ErrInvalid when the server refused the input (400, 413, 422:
// a text too long for the model, say), loom.ErrUnavailable for every other status (a bad key, a limit, the
// server's own failure), which the caller's input did not cause.
func (e *APIError) Unwrap() error {
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return loom.ErrInvalid
	}
	return loom.ErrUnavailable
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("embed: server answered ")
	b.WriteString(strconv.Itoa(e.StatusCode))
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	switch {
	case e.Type != "" && e.Code != "":
		fmt.Fprintf(&b, " (type %s, code %s)", e.Type, e.Code)
	case e.Type != "":
		fmt.Fprintf(&b, " (type %s)", e.Type)
	case e.Code != "":
		fmt.Fprintf(&b, " (code %s)", e.Code)
	}
	return b.String()
}

// apiError makes the error of an error response from its status and body.
func (o *OpenAI) apiError(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status}
	e.Message, e.Type, e.Code = apiretry.ErrorBody(body, o.key)
	return e
}

// byteSize formats a size in bytes, in MiB when it is a whole number of them.
func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// limitedReader reads at most n bytes of r, recording whether r had more and the error r returned.
type limitedReader struct {
	r      io.Reader
	n      int64
	tooBig bool
	err    error // r's error other than io.EOF
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		// One more byte says whether the body goes on.
		var b [1]byte
		n, err := io.ReadFull(l.r, b[:])
		if n > 0 {
			l.tooBig = true
			return 0, errors.New("response too large")
		}
		if err != io.EOF {
			l.err = err
		}
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}
