// SPDX-License-Identifier: Apache-2.0

package promptcount

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/context-loom/loom"
)

// Defaults of a Provider.
const (
	DefaultAnthropicURL    = "https://api.anthropic.com"
	DefaultGeminiURL       = "https://generativelanguage.googleapis.com"
	DefaultProviderTimeout = 10 * time.Second
	DefaultCacheSize       = 1024
	// AnthropicVersion is the anthropic-version header sent with each count.
	AnthropicVersion = "2023-06-01"
	// maxAnswer is the most of a provider's answer that is read.
	maxAnswer = 1 << 20
)

// ProviderConfig configures a [Provider]: a key for each provider whose counting endpoint it may ask. A
// provider without a key is never asked.
type ProviderConfig struct {
	// AnthropicKey is an Anthropic API key: Claude models' requests in the Messages API's shape are
	// counted by /v1/messages/count_tokens. AnthropicURL is the API's base URL (DefaultAnthropicURL).
	AnthropicKey, AnthropicURL string
	// GeminiKey is a Gemini API key: Gemini models' requests in Chat Completions' shape (as Gemini's
	// OpenAI compatibility takes them) are written as a generateContent request and counted by
	// models/{model}:countTokens. GeminiURL is the API's base URL (DefaultGeminiURL).
	GeminiKey, GeminiURL string
	// Timeout bounds one count: DefaultProviderTimeout.
	Timeout time.Duration
	// CacheSize is how many counts are kept, by request (the least recently used is forgotten first):
	// DefaultCacheSize; negative: none.
	CacheSize int
	// Client sends the requests; nil: a client of the Provider's own.
	Client *http.Client
}

// Provider asks providers' counting endpoints for the exact count of a request whose model has no public
// tokenizer (see [Options]). Counts are cached by request; a count that fails (a timeout, an error status,
// a request the endpoint cannot take) gives the local estimate, with the reason in [Count.Degraded]. The
// keys are sent as headers, never in a URL, and never appear in an error, a reason or a log. A Provider
// is safe for concurrent use.
type Provider struct {
	anthropicKey, geminiKey string
	anthropicURL, geminiURL string
	timeout                 time.Duration
	client                  *http.Client
	flight                  singleflight.Group

	mu    sync.Mutex
	size  int
	order *list.List // of cacheKey, the most recent first
	cache map[cacheKey]*list.Element
}

type cacheKey [sha256.Size]byte

type cacheEntry struct {
	key    cacheKey
	tokens int
}

// ErrProviderConfig is returned by NewProvider for a configuration without a key or with a base URL that
// is not http or https. It wraps loom.ErrInvalid.
var ErrProviderConfig = loom.NewError(loom.ErrInvalid, "promptcount: invalid provider configuration")

// NewProvider returns a Provider for cfg, or an error wrapping ErrProviderConfig.
func NewProvider(cfg ProviderConfig) (*Provider, error) {
	if cfg.AnthropicKey == "" && cfg.GeminiKey == "" {
		return nil, fmt.Errorf("%w: no key (give an Anthropic or a Gemini API key)", ErrProviderConfig)
	}
	p := &Provider{anthropicKey: cfg.AnthropicKey, geminiKey: cfg.GeminiKey, timeout: cfg.Timeout,
		client: cfg.Client, size: cfg.CacheSize, order: list.New(), cache: map[cacheKey]*list.Element{}}
	var err error
	if p.anthropicURL, err = baseURL(cfg.AnthropicURL, DefaultAnthropicURL); err != nil {
		return nil, err
	}
	if p.geminiURL, err = baseURL(cfg.GeminiURL, DefaultGeminiURL); err != nil {
		return nil, err
	}
	if p.timeout <= 0 {
		p.timeout = DefaultProviderTimeout
	}
	if p.size == 0 {
		p.size = DefaultCacheSize
	}
	if p.client == nil {
		p.client = &http.Client{}
	}
	return p, nil
}

func baseURL(u, def string) (string, error) {
	if u == "" {
		return def, nil
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || parsed.RawQuery != "" {
		return "", fmt.Errorf("%w: base URL %q (want http or https, with a host and no query)", ErrProviderConfig, u)
	}
	return strings.TrimSuffix(u, "/"), nil
}

// count asks the model's provider (tokenizer.Model.Provider) for the count of the request (req, read from
// body) to model name, if p has its key, and sets out from the answer: Tokens, Exact and Source, with the local count in
// Estimate; or, when it fails, Degraded.
func (p *Provider) count(ctx context.Context, out *Count, provider, name string, req *request, body []byte) {
	var (
		endpoint, key, source string
		send                  []byte
		err                   error
	)
	model := strings.TrimSpace(name)
	if i := strings.LastIndexByte(model, '/'); i >= 0 { // "anthropic/claude-...", "models/gemini-..."
		model = model[i+1:]
	}
	switch {
	case provider == "anthropic" && p.anthropicKey != "":
		source, key = SourceAnthropic, p.anthropicKey
		endpoint = p.anthropicURL + "/v1/messages/count_tokens"
		if out.Shape != ShapeAnthropic {
			err = errors.New("count_tokens takes a Messages API body, and this one is a Chat Completions body")
		} else {
			send, err = anthropicCountBody(model, body)
		}
	case provider == "google" && p.geminiKey != "":
		source, key = SourceGemini, p.geminiKey
		endpoint = p.geminiURL + "/v1beta/models/" + url.PathEscape(model) + ":countTokens"
		if out.Shape != ShapeOpenAI {
			err = errors.New("countTokens is asked about Chat Completions bodies, and this one is a Messages API body")
		} else {
			send, err = geminiCountBody(model, req)
		}
	default:
		return // no key for the model's provider: the estimate, as without a Provider
	}
	n := 0
	if err == nil {
		n, err = p.cached(ctx, source, endpoint, key, send)
	}
	if err != nil {
		out.Degraded = redact(fmt.Sprintf("%s: %v; the count is Loom's estimate", source, err), p.anthropicKey, p.geminiKey)
		return
	}
	out.Estimate, out.Tokens, out.Exact, out.Source = out.Tokens, n, true, source
}

// cached returns the count of send at endpoint, from the cache or asked (once, for concurrent asks of
// the same request), and keeps a count it asked for.
func (p *Provider) cached(ctx context.Context, source, endpoint, key string, send []byte) (int, error) {
	h := sha256.New()
	h.Write([]byte(endpoint))
	h.Write([]byte{0})
	h.Write(send)
	var k cacheKey
	h.Sum(k[:0])
	if n, ok := p.lookup(k); ok {
		return n, nil
	}
	v, err, _ := p.flight.Do(string(k[:]), func() (any, error) {
		n, err := p.ask(ctx, source, endpoint, key, send)
		if err == nil {
			p.keep(k, n)
		}
		return n, err
	})
	if err != nil {
		return 0, err
	}
	return v.(int), nil
}

func (p *Provider) lookup(k cacheKey) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.cache[k]
	if !ok {
		return 0, false
	}
	p.order.MoveToFront(e)
	return e.Value.(cacheEntry).tokens, true
}

func (p *Provider) keep(k cacheKey, n int) {
	if p.size < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.cache[k]; ok {
		p.order.MoveToFront(e)
		return
	}
	p.cache[k] = p.order.PushFront(cacheEntry{k, n})
	for p.order.Len() > p.size {
		last := p.order.Back()
		p.order.Remove(last)
		delete(p.cache, last.Value.(cacheEntry).key)
	}
}

// ask posts send to endpoint and reads the count from the answer.
func (p *Provider) ask(ctx context.Context, source, endpoint, key string, send []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(send))
	if err != nil {
		return 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if source == SourceAnthropic {
		hr.Header.Set("x-api-key", key)
		hr.Header.Set("anthropic-version", AnthropicVersion)
	} else {
		hr.Header.Set("x-goog-api-key", key)
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("no answer within %s", p.timeout)
		}
		return 0, fmt.Errorf("the request failed: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return 0, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > maxAnswer {
		return 0, fmt.Errorf("an answer of more than %d bytes", maxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d%s", resp.StatusCode, providerMessage(data))
	}
	var answer struct {
		InputTokens *int `json:"input_tokens"` // Anthropic's
		TotalTokens *int `json:"totalTokens"`  // Gemini's
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return 0, fmt.Errorf("an answer that is not JSON: %v", err)
	}
	n := answer.InputTokens
	if source == SourceGemini {
		n = answer.TotalTokens
	}
	if n == nil || *n < 0 {
		return 0, errors.New("an answer without a count")
	}
	return *n, nil
}

// providerMessage is the error message of a provider's error answer ({"error": {"type"|"status",
// "message"}}, as Anthropic and Google write them), cut short, or "".
func providerMessage(data []byte) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
		return ""
	}
	kind := e.Error.Type + e.Error.Status
	msg := e.Error.Message
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "..."
	}
	if kind != "" {
		return fmt.Sprintf(" (%s: %s)", kind, msg)
	}
	return " (" + msg + ")"
}

// redact replaces each key in s.
func redact(s string, keys ...string) string {
	for _, k := range keys {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return s
}

// anthropicCountBody is what count_tokens takes of a Messages body: its model (as given), system,
// messages, tools, tool_choice and thinking, their JSON as it is.
func anthropicCountBody(model string, body []byte) ([]byte, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return nil, err
	}
	send := map[string]json.RawMessage{}
	for _, k := range []string{"system", "messages", "tools", "tool_choice", "thinking"} {
		if v, ok := all[k]; ok {
			send[k] = v
		}
	}
	m, _ := json.Marshal(model)
	send["model"] = m
	return json.Marshal(send) // sorted keys: the same request, the same bytes
}

// geminiCountBody writes a Chat Completions request as the generateContent request countTokens counts:
// system and developer messages as the system instruction, user messages as the user's contents (texts,
// images' data), assistant messages as the model's (texts, function calls), tool results as function
// responses, tool definitions as function declarations. An image at a URL cannot be sent (Gemini takes
// files it stores), nor arguments that are not a JSON object.
func geminiCountBody(model string, r *request) ([]byte, error) {
	type part = map[string]any
	type content struct {
		Role  string `json:"role,omitempty"`
		Parts []part `json:"parts"`
	}
	var system []part
	var contents []content
	callNames := map[string]string{}
	add := func(role string, parts ...part) {
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, content{Role: role, Parts: parts})
	}
	for i, m := range r.Messages {
		c := r.content[i]
		var parts []part
		if c.text != "" {
			parts = append(parts, part{"text": c.text})
		}
		for j, b := range c.blocks {
			switch {
			case b.Type == "text" && b.Text != nil:
				parts = append(parts, part{"text": *b.Text})
			case b.Type == "image_url" && b.ImageURL != nil:
				im, err := openAIImage(b.ImageURL)
				if err != nil {
					return nil, err
				}
				if len(im.Data) == 0 {
					return nil, fmt.Errorf("messages[%d].content[%d] is an image at a URL, which countTokens cannot fetch", i, j)
				}
				parts = append(parts, part{"inlineData": map[string]any{"mimeType": im.ContentType(), "data": im.Data}})
			default:
				return nil, fmt.Errorf("messages[%d].content[%d] of type %q cannot be sent to countTokens", i, j, b.Type)
			}
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, parts...)
		case "user":
			add("user", parts...)
		case "assistant":
			for _, call := range m.ToolCalls {
				var args map[string]any
				if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil && strings.TrimSpace(call.Function.Arguments) != "" {
					return nil, fmt.Errorf("messages[%d]: tool call arguments that are not a JSON object", i)
				}
				callNames[call.ID] = call.Function.Name
				parts = append(parts, part{"functionCall": map[string]any{"name": call.Function.Name, "args": args}})
			}
			add("model", parts...)
		case "tool":
			var response map[string]any
			text := c.text
			for _, b := range c.blocks {
				if b.Text != nil {
					text += *b.Text
				}
			}
			if json.Unmarshal([]byte(text), &response) != nil {
				response = map[string]any{"content": text}
			}
			add("user", part{"functionResponse": map[string]any{"name": callNames[m.ToolCallID], "response": response}})
		default:
			return nil, fmt.Errorf("messages[%d] of role %q cannot be sent to countTokens", i, m.Role)
		}
	}
	req := map[string]any{"model": "models/" + model, "contents": contents}
	if len(system) > 0 {
		req["systemInstruction"] = content{Parts: system}
	}
	tools, err := openAITools(r)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		decls := make([]map[string]any, len(tools))
		for i, t := range tools {
			d := map[string]any{"name": t.Function.Name}
			if t.Function.Description != "" {
				d["description"] = t.Function.Description
			}
			if len(t.Function.Parameters) > 0 {
				d["parameters"] = t.Function.Parameters
			}
			decls[i] = d
		}
		req["tools"] = []any{map[string]any{"functionDeclarations": decls}}
	}
	return json.Marshal(map[string]any{"generateContentRequest": req})
}
