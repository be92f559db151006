package summarize

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/context-loom/loom/internal/apiretry"

	"github.com/context-loom/loom"
)

// Defaults of [OpenAIConfig].
const (
	// DefaultMaxRetries is the number of times a failed request is retried.
	DefaultMaxRetries = 3
	// DefaultRetryDelay is the delay before the first retry; it doubles on each retry, up to 30 s.
	DefaultRetryDelay = time.Second
	// DefaultTimeout is the time one request, response included, may take: a summary is written at a
	// model's pace, far slower than an embedding.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxSummaryBytes is the longest summary accepted: far more than a summary of a window's turns
	// needs, far less than what a runaway model writes.
	DefaultMaxSummaryBytes = 64 << 10
)

const (
	maxErrorBodyBytes = 64 << 10 // read of an error response
	// The envelope of a Chat Completions answer is small beside its summary: the body read is bounded by
	// the longest summary, escaped as JSON at its worst (6 bytes a byte), and this much more.
	envelopeBytes = 64 << 10
)

// OpenAIConfig configures an [OpenAI] summarizer. Zero values mean the documented defaults.
type OpenAIConfig struct {
	// BaseURL is the API's base URL, to which "/chat/completions" is appended (required): for example
	// "https://api.openai.com/v1", "http://localhost:11434/v1" (Ollama), "http://localhost:8000/v1" (vLLM)
	// or "http://localhost:1234/v1" (LM Studio).
	BaseURL string
	// Model is the chat model's name, such as "gpt-4o-mini" or "llama3.2" (required).
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>". It never appears in errors: a server
	// message that repeats it has it replaced by "[redacted]".
	APIKey string
	// MaxRetries is how many times a request is retried after a network error, a timeout or an HTTP
	// status 408, 429 or 5xx (default [DefaultMaxRetries]; negative: never).
	MaxRetries int
	// RetryDelay is the delay before the first retry (default [DefaultRetryDelay]). It doubles on each
	// retry up to 30 s, less random jitter of up to half of it. A Retry-After (or retry-after-ms) header of
	// the response replaces it, up to one minute.
	RetryDelay time.Duration
	// Timeout bounds each request, response included (default [DefaultTimeout]; negative: no bound other
	// than the context's). A request that times out is retried.
	Timeout time.Duration
	// MaxSummaryBytes is the longest summary accepted (default [DefaultMaxSummaryBytes]); a longer one is
	// an error wrapping ErrResponse, and a body too large to hold one is not read further.
	MaxSummaryBytes int
	// HTTPClient sends the requests (default: a client with [http.DefaultTransport]).
	HTTPClient *http.Client
}

// OpenAI is a [Summarizer] that asks a server speaking the Chat Completions API: it posts {"model",
// "messages": [system: instructions, user: text], "max_tokens", "stream": false} to
// {BaseURL}/chat/completions and reads the first choice's message content. It is safe for concurrent use.
type OpenAI struct {
	url        string
	model      string
	key        string
	retries    int
	retryDelay time.Duration
	timeout    time.Duration
	maxSummary int
	client     *http.Client
}

// NewOpenAI returns a summarizer for the server and model of cfg. It sends nothing: a wrong key or model
// surfaces on the first Summarize. It returns an error wrapping [ErrInvalidConfig] when BaseURL is not an
// http or https URL without query or fragment, or ends in /chat/completions; when Model is empty; or when
// RetryDelay or MaxSummaryBytes is negative.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case cfg.BaseURL == "":
		return nil, fmt.Errorf("%w: BaseURL is required", ErrInvalidConfig)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("%w: BaseURL must be an http or https URL, such as https://api.openai.com/v1", ErrInvalidConfig)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("%w: BaseURL %s must not have a query or fragment", ErrInvalidConfig, u.Redacted())
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/chat/completions"):
		return nil, fmt.Errorf("%w: BaseURL %s must not include /chat/completions, which is appended to it", ErrInvalidConfig, u.Redacted())
	case cfg.Model == "":
		return nil, fmt.Errorf("%w: Model is required", ErrInvalidConfig)
	case cfg.RetryDelay < 0:
		return nil, fmt.Errorf("%w: RetryDelay %s is negative", ErrInvalidConfig, cfg.RetryDelay)
	case cfg.MaxSummaryBytes < 0:
		return nil, fmt.Errorf("%w: MaxSummaryBytes %d is negative", ErrInvalidConfig, cfg.MaxSummaryBytes)
	}
	o := &OpenAI{
		url:        strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions",
		model:      cfg.Model,
		key:        cfg.APIKey,
		retries:    max(0, cmp.Or(cfg.MaxRetries, DefaultMaxRetries)),
		retryDelay: cmp.Or(cfg.RetryDelay, DefaultRetryDelay),
		timeout:    cmp.Or(cfg.Timeout, DefaultTimeout),
		maxSummary: cmp.Or(cfg.MaxSummaryBytes, DefaultMaxSummaryBytes),
		client:     cfg.HTTPClient,
	}
	if o.client == nil {
		o.client = &http.Client{}
	}
	return o, nil
}

// Model returns the model's name.
func (o *OpenAI) Model() string { return o.model }

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model     string        `json:"model"`
	Messages  []chatMessage `json:"messages"`
	MaxTokens int           `json:"max_tokens,omitempty"`
	Stream    bool          `json:"stream"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"` // some servers answer errors with status 200
}

// Summarize asks the model for a summary of req and returns it, trimmed of surrounding white space. It
// retries a request as [OpenAIConfig] says and stops waiting as soon as ctx is done, returning an error
// wrapping ctx's error.
//
// Errors: an [*APIError] when the server answers with an error status (after the retries for 408, 429 and
// 5xx); an error wrapping [ErrResponse] for an answer that is no usable summary (see ErrResponse), which
// is not retried: the same request would likely get the same answer; an error wrapping [ErrUnavailable]
// for a server that cannot be reached or times out, after the retries.
func (o *OpenAI) Summarize(ctx context.Context, req Request) (string, error) {
	if req.MaxOutputTokens < 0 {
		return "", fmt.Errorf("%w: MaxOutputTokens %d is negative", loom.ErrInvalid, req.MaxOutputTokens)
	}
	msgs := make([]chatMessage, 0, 2)
	if req.Instructions != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: req.Instructions})
	}
	msgs = append(msgs, chatMessage{Role: "user", Content: req.Text})
	body, err := json.Marshal(chatRequest{Model: o.model, Messages: msgs, MaxTokens: req.MaxOutputTokens})
	if err != nil {
		return "", fmt.Errorf("summarize: encode request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		summary, res := o.attempt(ctx, body)
		if res.err == nil {
			return summary, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("summarize: %w", ctx.Err())
		}
		if !res.retry || attempt >= o.retries {
			if attempt > 0 {
				return "", fmt.Errorf("%w (after %d attempts)", res.err, attempt+1)
			}
			return "", res.err
		}
		delay := res.retryAfter
		if delay < 0 {
			delay = o.backoff(attempt)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("summarize: %w", ctx.Err())
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

// attempt sends one request and returns the summary it got.
func (o *OpenAI) attempt(ctx context.Context, body []byte) (string, attemptResult) {
	actx := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(actx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return "", attemptResult{err: fmt.Errorf("summarize: %w", err), retryAfter: -1}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return "", o.transportError(ctx, actx, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10) // let a short remainder keep the connection reusable
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		if err != nil && len(data) == 0 {
			return "", o.transportError(ctx, actx, err)
		}
		return "", attemptResult{err: o.apiError(resp.StatusCode, data), retry: apiretry.RetryableStatus(resp.StatusCode), retryAfter: apiretry.RetryAfter(resp.Header)}
	}
	limit := int64(o.maxSummary)*6 + envelopeBytes
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return "", o.transportError(ctx, actx, err)
	case int64(len(data)) > limit:
		return "", attemptResult{err: fmt.Errorf("%w: response larger than %d bytes", ErrResponse, limit), retryAfter: -1}
	}
	var r chatResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return "", attemptResult{err: fmt.Errorf("%w: %v", ErrResponse, err), retryAfter: -1}
	}
	if len(r.Choices) == 0 && len(r.Error) > 0 && string(r.Error) != "null" {
		envelope := append(append([]byte(`{"error":`), r.Error...), '}')
		return "", attemptResult{err: o.apiError(resp.StatusCode, envelope), retryAfter: -1}
	}
	summary, err := o.check(&r)
	if err != nil {
		return "", attemptResult{err: err, retryAfter: -1}
	}
	return summary, attemptResult{}
}

// check returns the summary of a response, or an error wrapping ErrResponse for one that holds none.
func (o *OpenAI) check(r *chatResponse) (string, error) {
	if len(r.Choices) == 0 {
		return "", fmt.Errorf("%w: no choices", ErrResponse)
	}
	c := r.Choices[0]
	var s string
	if err := json.Unmarshal(c.Message.Content, &s); err != nil || len(c.Message.Content) == 0 || c.Message.Content[0] != '"' {
		return "", fmt.Errorf("%w: the message's content is not a string", ErrResponse)
	}
	if c.FinishReason == "length" {
		return "", fmt.Errorf("%w: the summary was cut at the output limit", ErrResponse)
	}
	return CheckSummary(s, o.maxSummary)
}

// CheckSummary returns s without the white space around it if it is a usable summary of at most maxBytes
// bytes (0: DefaultMaxSummaryBytes), and an error wrapping ErrResponse if not: empty or only white space,
// longer, not valid UTF-8 (JSON decoding writes U+FFFD for what is not), or holding a control character
// other than tab and line breaks. Every Summarizer's answer is held to it before it is stored.
func CheckSummary(s string, maxBytes int) (string, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxSummaryBytes
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", fmt.Errorf("%w: the summary is empty", ErrResponse)
	case len(s) > maxBytes:
		return "", fmt.Errorf("%w: the summary is %d bytes, more than %d", ErrResponse, len(s), maxBytes)
	case !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError):
		return "", fmt.Errorf("%w: the summary is not valid UTF-8 text", ErrResponse)
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return "", fmt.Errorf("%w: the summary holds the control character %U", ErrResponse, r)
		}
	}
	return s, nil
}

// transportError classifies an error of sending a request or reading its response: retried, unless ctx
// (the caller's context) is done.
func (o *OpenAI) transportError(ctx, actx context.Context, err error) attemptResult {
	if ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("request timed out after %s", o.timeout)
	}
	if ctx.Err() != nil {
		return attemptResult{err: fmt.Errorf("summarize: %w", err), retryAfter: -1}
	}
	var ue *url.Error
	if errors.As(err, &ue) { // its text repeats the URL, which is the caller's own
		err = ue.Err
	}
	return attemptResult{err: fmt.Errorf("%w: %w", ErrUnavailable, err), retry: true, retryAfter: -1}
}

// APIError is the error of a request that the server answered with an error status. Its fields come from
// the response body: OpenAI's {"error": {"message", "type", "code"}} and its variants, else the start of
// the body as the message. They never contain the API key.
type APIError struct {
	StatusCode int    // the HTTP status code
	Message    string // the server's message (at most 512 bytes)
	Type       string // the error type, when given
	Code       string // the error code, when given
}

// Unwrap returns the kind of the error: loom.ErrInvalid when the server refused the input (400, 413,
// 422), loom.ErrUnavailable for every other status.
func (e *APIError) Unwrap() error {
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return loom.ErrInvalid
	}
	return loom.ErrUnavailable
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("summarize: server answered ")
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
