package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// requestTimeout bounds one request of the test's clients; the server's own limit is 30 s.
const requestTimeout = 35 * time.Second

// client calls one loom server with one API key ("" sends none).
type client struct {
	base  string
	key   string
	hc    *http.Client
	audit *audit
}

// newClient returns a client of srv with key, sharing hc and recording into a.
func newClient(srv *loomServer, key string, hc *http.Client, a *audit) *client {
	return &client{base: srv.baseURL(), key: key, hc: hc, audit: a}
}

// newHTTPClient returns an HTTP client that keeps up to conns connections to one server alive.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{
			MaxIdleConns: 2 * conns, MaxIdleConnsPerHost: 2 * conns, IdleConnTimeout: time.Minute,
			DisableCompression: true,
		},
	}
}

// response is what one request got: a status, or a transport error.
type response struct {
	status  int
	header  http.Header
	body    []byte
	start   time.Time
	latency time.Duration // from sending the request to the end of the body
	err     error         // a transport error; status is 0
}

// end returns when the response was complete.
func (r response) end() time.Time { return r.start.Add(r.latency) }

// errorCode returns the code of an {"error": {"code"}} body, or "".
func (r response) errorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(r.body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// describe returns the status (or transport error) and the error code, for a report.
func (r response) describe() string {
	if r.err != nil {
		return "transport error: " + r.err.Error()
	}
	if c := r.errorCode(); c != "" {
		return fmt.Sprintf("%d %s", r.status, c)
	}
	return fmt.Sprint(r.status)
}

// do sends one request with a raw body (nil: none) and extra headers, and reads the whole response.
func (c *client) do(ctx context.Context, method, path string, body []byte, header http.Header) response {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return response{start: time.Now(), err: err}
	}
	copyHeader(req.Header, header)
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	r := response{start: time.Now()}
	resp, err := c.hc.Do(req)
	if err == nil {
		r.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		r.status, r.header = resp.StatusCode, resp.Header
	}
	r.latency, r.err = time.Since(r.start), err
	if err != nil {
		r.status = 0
	}
	c.audit.record(method, path, r)
	return r
}

// copyHeader adds the headers of src to dst.
func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// send sends v as JSON.
func (c *client) send(ctx context.Context, method, path string, v any) response {
	body, err := json.Marshal(v)
	if err != nil {
		return response{start: time.Now(), err: fmt.Errorf("encode the body: %w", err)}
	}
	return c.do(ctx, method, path, body, nil)
}

// call sends v as JSON (nil: no body) and decodes a 2xx response into out (nil: ignored). Any other
// status is an error with the response's body.
func (c *client) call(ctx context.Context, method, path string, v, out any) error {
	var r response
	if v == nil {
		r = c.do(ctx, method, path, nil, nil)
	} else {
		r = c.send(ctx, method, path, v)
	}
	switch {
	case r.err != nil:
		return fmt.Errorf("%s %s: %w", method, path, r.err)
	case r.status < 200 || r.status > 299:
		return fmt.Errorf("%s %s: %d %s", method, path, r.status, truncate(string(r.body), 300))
	case out != nil:
		if err := json.Unmarshal(r.body, out); err != nil {
			return fmt.Errorf("%s %s: decode the response: %w", method, path, err)
		}
	}
	return nil
}

// truncate cuts s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// audit watches every response of a phase for server errors other than 503 (an overloaded or unavailable
// store is allowed to say 503; nothing is allowed to say 500). It is safe for concurrent use.
type audit struct {
	mu       sync.Mutex
	errors5x int
	examples []string
}

// record notes r if it is a 5xx other than 503.
func (a *audit) record(method, path string, r response) {
	if r.status < 500 || r.status == http.StatusServiceUnavailable {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errors5x++
	if len(a.examples) < 5 {
		a.examples = append(a.examples, fmt.Sprintf("%s %s: %d %s", method, truncate(path, 80), r.status, truncate(string(r.body), 200)))
	}
}

// check fails sec if a server error was seen; what names the run.
func (a *audit) check(sec *section, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sec.check(a.errors5x == 0, "%s: no 5xx other than 503 (%d seen)", what, a.errors5x)
	for _, e := range a.examples {
		sec.note("server error: `%s`", e)
	}
}
