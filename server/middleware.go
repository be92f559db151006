package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/context-loom/loom"
)

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyInfo
)

// reqInfo is what the inner handlers tell observe about a request, for its log line.
type reqInfo struct {
	tenant string
	// routine marks a 5xx answer that is expected and says nothing is wrong (a /readyz 503 while the
	// search indexes load): it is logged at INFO, not ERROR.
	routine bool
}

// markRoutine tells observe that the request's 5xx answer is routine (see reqInfo.routine).
func markRoutine(ctx context.Context) {
	if info, ok := ctx.Value(keyInfo).(*reqInfo); ok {
		info.routine = true
	}
}

func withRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, keyRequestID, id)
}

// RequestID returns the id the server gave the request of ctx.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}

// tenant returns the tenant the request was authenticated as.
func tenant(ctx context.Context) string { return loom.Tenant(ctx) }

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe times the request for the route's histogram and logs one line for it. The line has the request
// id, method, route, status, duration, size and tenant: never a key, a body or a query. It is logged at
// ERROR for a 5xx answer, unless the handler marked the answer routine, and at INFO otherwise.
func (s *Server) observe(routeName string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		info := &reqInfo{}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), keyInfo, info)))
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		d := time.Since(start)
		s.metrics.observe(routeName, sw.status, d)
		level := slog.LevelInfo
		if sw.status >= 500 && !info.routine {
			level = slog.LevelError
		}
		s.log.LogAttrs(r.Context(), level, "request",
			slog.String("request_id", w.Header().Get("X-Request-Id")),
			slog.String("method", r.Method),
			slog.String("route", routeName),
			slog.Int("status", sw.status),
			slog.Duration("duration", d),
			slog.Int("bytes", sw.bytes),
			slog.String("tenant", info.tenant))
	})
}

// wrap authenticates the request and checks its Content-Type (unless the route is public), limits its body
// and time, recovers from a panic, and writes the handler's error as JSON.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic", slog.String("request_id", RequestID(r.Context())), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				s.writeError(w, r, errorf(http.StatusInternalServerError, "internal", "internal error"))
			}
		}()
		ctx := r.Context()
		if !rt.public {
			t, err := s.authenticate(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			ctx = loom.WithTenant(ctx, t)
			if info, ok := ctx.Value(keyInfo).(*reqInfo); ok {
				info.tenant = t
			}
			if err := checkContentType(r); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		ctx, cancel := context.WithTimeout(ctx, s.limits.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		r.Body = http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes)
		if err := rt.handle(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// checkContentType refuses, with 415, a request that has a body, or whose method takes one (POST, PUT,
// PATCH), unless its Content-Type is application/json with no charset other than UTF-8. A web page can
// post text/plain or a form to any address without asking; application/json it cannot send to another
// origin without a CORS preflight, which this server never grants. So the rule is what stops cross-site
// writes (CSRF) when no key is needed, and it holds with keys too: one rule for every client.
func checkContentType(r *http.Request) error {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		if r.ContentLength == 0 {
			return nil // GET, DELETE: no body to read
		}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "a %s needs Content-Type: application/json", r.Method)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type %q: the body must be application/json", ct)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type %q: the body must be UTF-8", ct)
	}
	return nil
}

// authenticate returns the tenant of the request's bearer key.
func (s *Server) authenticate(r *http.Request) (string, error) {
	if len(s.keys) == 0 {
		return loom.DefaultTenant, nil
	}
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return "", errorf(http.StatusUnauthorized, "unauthorized", "missing API key: send Authorization: Bearer KEY")
	}
	// Keys are compared by their hashes, so the lookup's timing says nothing about a key's bytes.
	t, ok := s.keys[sha256.Sum256([]byte(strings.TrimSpace(key)))]
	if !ok {
		return "", errorf(http.StatusUnauthorized, "unauthorized", "unknown API key")
	}
	return t, nil
}

// apiError is an error with its HTTP status and code.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// writeError writes err as {"error": {"code", "message", "request_id"}} with its status.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = s.classify(err)
	}
	if ae.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", s.retryAfter)
	}
	if ae.status >= 500 && ae.status != http.StatusServiceUnavailable {
		s.log.Error("request failed", slog.String("request_id", RequestID(r.Context())), slog.String("error", err.Error()))
	}
	type body struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id,omitempty"`
	}
	writeJSON(w, ae.status, map[string]body{"error": {Code: ae.code, Message: ae.message, RequestID: RequestID(r.Context())}})
}
