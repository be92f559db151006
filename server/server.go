// Package server is Loom's HTTP API: assembly from stored and inline state, the stores' sessions, memory,
// agents and tool outputs, token counting and chunking, an MCP server at POST /mcp (package mcpserver),
// health, readiness, Prometheus metrics and an OpenAPI document. Every request is authenticated by an API
// key bound to one tenant (unless no keys are configured), limited in size and time, and answered with
// JSON; errors are {"error": {"code", "message"}}.
//
// Browsers: a request with a body (every POST and PUT) must say Content-Type: application/json, with no
// charset but UTF-8, or it gets 415; a web page cannot send that cross-origin without a CORS preflight, and
// the server never answers one with CORS headers (it sends none, ever), so a page the user visits cannot
// write to the API (CSRF). Without keys, a Host that is not a loopback name or address gets 421, so that a
// page cannot read the API by rebinding its own name to 127.0.0.1.
package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/apilimit"
	"github.com/context-loom/loom/mcpserver"
	"github.com/context-loom/loom/promptcount"
	"github.com/context-loom/loom/store"
)

// Limits bound what one request may ask. Zero fields mean the Default* values.
type Limits struct {
	// MaxBodyBytes is the largest request body; larger ones get 413.
	MaxBodyBytes int64
	// MaxMessageBytes is the largest any one text of a request body may be (413 past it, checked before
	// any work): a message, fact, tool output or knowledge item, instructions, a tool's parameters, a
	// query, a text to count or chunk, an id or a metadata value. A document's text is bounded by
	// MaxBodyBytes instead.
	MaxMessageBytes int
	// MaxItems is the most items one request may carry: messages in one append, and in an assembly the
	// inline tools, memory facts, knowledge items, history messages and tool outputs together.
	MaxItems int
	// RequestTimeout bounds the time one request may take.
	RequestTimeout time.Duration
}

// Default limits.
const (
	DefaultMaxBodyBytes    = apilimit.MaxBodyBytes
	DefaultMaxMessageBytes = apilimit.MaxTextBytes
	DefaultMaxItems        = apilimit.MaxItems
	DefaultRequestTimeout  = apilimit.Timeout
	// DefaultRetryAfter is what a 503's Retry-After says while the store is unreachable.
	DefaultRetryAfter = 2 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultMaxItems
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = DefaultRequestTimeout
	}
	return l
}

// Config configures a Server.
type Config struct {
	// Engine assembles and holds the store. Required.
	Engine *engine.Engine
	// Keys maps API keys to tenants. Empty: no authentication, every request is the default tenant's (the
	// command binds such a server to loopback only), and only requests whose Host is a loopback name or
	// address (localhost, 127.0.0.0/8, [::1], with or without a port) are answered; any other Host gets
	// 421, so that a web page whose name was rebound to 127.0.0.1 (DNS rebinding) cannot read the API.
	Keys map[string]string
	// Limits bound requests.
	Limits Limits
	// Logger receives one line per request (never a key or a body). Nil: no logs.
	Logger *slog.Logger
	// Registerer registers the server's metrics and Gatherer serves them at /metrics. Both nil: a registry
	// of the server's own.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// RetryAfter is what a 503 tells clients to wait; 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	// ProviderCount, if not nil, is asked by POST /v1/tokens/count for the provider's own count of a request
	// to a model whose tokenizer is not public (see promptcount.Provider); nil: such counts are estimates.
	// Nothing else asks it: an assembly never waits for a provider.
	ProviderCount *promptcount.Provider
	// Ready, if set, is asked by /readyz after the store answers: an error (the search indexes are still
	// loading, say) makes it answer 503 with the error's text.
	Ready func() error
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	eng        *engine.Engine
	st         *store.Store
	keys       map[[sha256.Size]byte]string // hashes of API keys -> tenant
	limits     Limits
	log        *slog.Logger
	retryAfter string
	ready      func() error
	// providerCount is Config.ProviderCount.
	providerCount *promptcount.Provider
	metrics       *metrics
	gatherer      prometheus.Gatherer
	handler       http.Handler
	// mcp serves POST /mcp.
	mcp http.Handler
}

// New returns a server for cfg. It returns an error for a missing engine, an empty key or tenant, or
// metrics that cannot be registered.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("server: no engine")
	}
	s := &Server{eng: cfg.Engine, st: cfg.Engine.Store(), limits: cfg.Limits.withDefaults(), log: cfg.Logger,
		keys: map[[sha256.Size]byte]string{}, ready: cfg.Ready, providerCount: cfg.ProviderCount}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for k, t := range cfg.Keys {
		if k == "" || t == "" {
			return nil, errors.New("server: an API key and its tenant must not be empty")
		}
		if err := store.ValidateID(store.Limits{}, "tenant", t); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.keys[sha256.Sum256([]byte(k))] = t
	}
	ra := cfg.RetryAfter
	if ra <= 0 {
		ra = DefaultRetryAfter
	}
	s.retryAfter = strconv.Itoa(int((ra + time.Second - 1) / time.Second))
	reg, gat := cfg.Registerer, cfg.Gatherer
	if reg == nil && gat == nil {
		r := prometheus.NewRegistry()
		reg, gat = r, r
	}
	if reg == nil || gat == nil {
		return nil, errors.New("server: give both a Registerer and a Gatherer, or neither")
	}
	m, err := newMetrics(reg, cfg.Engine)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.metrics, s.gatherer = m, gat
	ms, err := mcpserver.New(mcpserver.Config{Engine: cfg.Engine, Logger: s.log, Limits: mcpserver.Limits{
		MaxBodyBytes: s.limits.MaxBodyBytes, MaxTextBytes: s.limits.MaxMessageBytes, MaxItems: s.limits.MaxItems,
		CallTimeout: s.limits.RequestTimeout}})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.mcp = ms.Handler()
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// AuthEnabled reports whether requests need an API key.
func (s *Server) AuthEnabled() bool { return len(s.keys) > 0 }

// route is one API route: its pattern for http.ServeMux, whether it needs a key, and its handler.
type route struct {
	pattern string
	public  bool
	handle  func(w http.ResponseWriter, r *http.Request) error
}

// Routes lists the API's routes as "METHOD /path" patterns, as the OpenAPI document describes them (a
// wildcard that takes the rest of the path, {doc...}, is written {doc}).
func (s *Server) Routes() []string {
	var out []string
	for _, rt := range s.routeTable() {
		out = append(out, strings.ReplaceAll(rt.pattern, "...}", "}"))
	}
	return out
}

func (s *Server) routeTable() []route {
	return []route{
		{"POST /v1/assemble", false, s.assemble},
		{"POST /v1/sessions/{session}/messages", false, s.appendMessages},
		{"GET /v1/sessions/{session}/messages", false, s.listMessages},
		{"DELETE /v1/sessions/{session}", false, s.deleteSession},
		{"POST /v1/sessions/{session}/compact", false, s.compact},
		{"GET /v1/sessions/{session}/summary", false, s.getSummary},
		{"GET /v1/assemblies", false, s.listAssemblySessions},
		{"GET /v1/sessions/{session}/assemblies", false, s.listAssemblies},
		{"GET /v1/sessions/{session}/assemblies/{seq}", false, s.getAssembly},
		{"POST /v1/sessions/{session}/tool-outputs", false, s.appendToolOutput},
		{"PUT /v1/sessions/{session}/knowledge", false, s.setKnowledge},
		{"PUT /v1/users/{user}/memory/{key}", false, s.setFact},
		{"GET /v1/users/{user}/memory", false, s.listFacts},
		{"DELETE /v1/users/{user}/memory/{key}", false, s.deleteFact},
		{"PUT /v1/agents/{agent}", false, s.putAgent},
		{"GET /v1/agents/{agent}", false, s.getAgent},
		{"DELETE /v1/agents/{agent}", false, s.deleteAgent},
		{"POST /v1/collections", false, s.counted("create_collection", s.createCollection)},
		{"GET /v1/collections", false, s.counted("list_collections", s.listCollections)},
		{"GET /v1/collections/{id}", false, s.counted("get_collection", s.getCollection)},
		{"PATCH /v1/collections/{id}", false, s.counted("update_collection", s.updateCollection)},
		{"DELETE /v1/collections/{id}", false, s.counted("delete_collection", s.deleteCollection)},
		{"POST /v1/collections/{id}/documents", false, s.counted("put_document", s.putDocument)},
		{"GET /v1/collections/{id}/documents", false, s.counted("list_documents", s.listDocuments)},
		{"DELETE /v1/collections/{id}/documents/{doc...}", false, s.counted("delete_document", s.deleteDocument)},
		{"POST /v1/retrieve", false, s.counted("retrieve", s.retrieve)},
		{"POST /v1/tokens/count", false, s.countTokens},
		{"POST /v1/chunk", false, s.chunk},
		{"POST /mcp", false, s.serveMCP},
		{"GET /healthz", true, s.healthz},
		{"GET /readyz", true, s.readyz},
		{"GET /metrics", true, nil},
		{"GET /openapi.json", true, s.openAPI},
	}
}

// serveMCP serves the MCP server (package mcpserver) over streamable HTTP, statelessly, as the request's
// tenant: a key's MCP client reaches its tenant's data only, as its API requests do.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) error {
	s.mcp.ServeHTTP(w, r)
	return nil
}

// counted wraps a collection route's handler so that its store failures count in loom_store_errors_total
// under op, as the other routes' do (metrics.storeError).
func (s *Server) counted(op string, h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		err := h(w, r)
		if err != nil {
			s.metrics.storeError(op, err)
		}
		return err
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routeTable() {
		var h http.Handler
		if rt.handle == nil { // /metrics
			h = promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{})
		} else {
			h = s.wrap(rt)
		}
		mux.Handle(rt.pattern, s.observe(rt.pattern, h))
	}
	// The inspector page (not the API: public, as it holds no data; it asks the API with the user's key).
	for _, p := range [...]struct{ pattern, file, ctype string }{
		{"GET /{$}", "index.html", "text/html; charset=utf-8"},
		{"GET /inspect", "index.html", "text/html; charset=utf-8"},
		{"GET /inspect/app.js", "app.js", "text/javascript; charset=utf-8"},
		{"GET /inspect/app.css", "app.css", "text/css; charset=utf-8"},
	} {
		mux.Handle(p.pattern, s.observe("inspector", s.wrap(route{pattern: p.pattern, public: true, handle: inspectorPage(p.file, p.ctype)})))
	}
	// Everything else: a JSON 404, or 405 with Allow when the path exists with other methods.
	other := s.observe("other", s.wrap(route{pattern: "/", public: true, handle: func(w http.ResponseWriter, r *http.Request) error {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := mux.Handler(probe); p != "/" && p != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))
		}
		return errorf(http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path)
	}}))
	mux.Handle("/", other)
	// A path with "." or ".." segments or doubled slashes would get the mux's redirect to its clean form,
	// whose body is not JSON and which no API client follows usefully: it is a 404, whatever route its
	// clean form would be.
	unclean := s.observe("other", s.wrap(route{pattern: "/", public: true, handle: func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, "not_found", "no route %s %s (a path with empty, . or .. segments)", r.Method, r.URL.Path)
	}}))
	// Without keys, the API is anyone's who can reach it: only loopback, and only by a loopback name.
	misdirected := s.observe("other", s.wrap(route{pattern: "/", public: true, handle: func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusMisdirectedRequest, "misdirected_request",
			"the Host %q is not a loopback name or address; a server without API keys answers only localhost, 127.0.0.1 or [::1]", r.Host)
	}}))
	return s.requestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.keys) == 0 && !loopbackHost(r.Host) {
			misdirected.ServeHTTP(w, r)
			return
		}
		p := r.URL.EscapedPath()
		if clean := path.Clean(p); p != clean && (clean == "/" || p != clean+"/") {
			unclean.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// loopbackHost reports whether host, a request's Host (with or without a port), is "localhost" or a
// loopback address (127.0.0.0/8, ::1 in brackets).
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return false // an IPv6 address without brackets, or a malformed port
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// requestIDPattern is what a client's X-Request-Id must look like to be kept.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// requestID gives every request an id (the client's X-Request-Id if it is sane) and puts it on the response.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !requestIDPattern.MatchString(id) {
			var b [8]byte
			rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(withRequestID(r.Context(), id)))
	})
}
