// Package apiretry holds what Loom's clients of OpenAI-compatible HTTP APIs (the embeddings client in
// embed, the Chat Completions summarizer in summarize) share: when to retry and after how long, and how
// to read and clean an error response's body.
package apiretry

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// MaxRetryDelay bounds a backoff's doubling (see Backoff).
	MaxRetryDelay = 30 * time.Second
	// MaxRetryAfter bounds the delay a server may ask for (see RetryAfter).
	MaxRetryAfter = time.Minute
	// MaxErrorTextBytes bounds a server's text kept in an error (see Clean).
	MaxErrorTextBytes = 512
)

// Backoff returns the delay before retry number attempt+1: base doubled attempt times, at most
// MaxRetryDelay (or base if longer), less a random part of up to half of it.
func Backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for range attempt {
		if d >= MaxRetryDelay {
			break
		}
		d *= 2
	}
	d = min(d, max(MaxRetryDelay, base))
	return d - rand.N(d/2+1)
}

// RetryableStatus reports whether a request answered with status may succeed if sent again: 408, 429
// and 5xx.
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// RetryAfter returns the delay a response asks for before a retry (Retry-After-Ms, or Retry-After in
// seconds or as a date), at most MaxRetryAfter, or -1.
func RetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		return time.Duration(min(ms, float64(MaxRetryAfter/time.Millisecond)) * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(min(s, MaxRetryAfter.Seconds()) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(0, time.Until(t)), MaxRetryAfter)
	}
	return -1
}

// ErrorBody reads an error response's body in the shapes OpenAI-compatible servers send: OpenAI's
// {"error": {"message", "type", "code"}}, {"error": "text"}, vLLM's older flat {"message", "type", "code"},
// or else the body itself as the message. Each is cleaned (see Clean), key redacted.
func ErrorBody(body []byte, key string) (message, typ, code string) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"` // vLLM's older, flat shape
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	var detail struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	switch {
	case json.Unmarshal(body, &env) != nil:
		message = string(body)
	case json.Unmarshal(env.Error, &detail) == nil && detail.Message != "":
		message, typ, code = detail.Message, detail.Type, rawCode(detail.Code)
	case json.Unmarshal(env.Error, &message) == nil && message != "": // {"error": "text"}
	case env.Message != "":
		message, typ, code = env.Message, env.Type, rawCode(env.Code)
	default:
		message = string(body)
	}
	return Clean(message, key), Clean(typ, key), Clean(code, key)
}

// rawCode returns a JSON string's or number's text; "" for anything else.
func rawCode(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// Clean makes server text fit for an error message: key (if not "") redacted, invalid UTF-8 replaced,
// runs of white space (a raw HTML page's lines) collapsed, and at most MaxErrorTextBytes long.
func Clean(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	if len(s) > MaxErrorTextBytes {
		cut := MaxErrorTextBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
