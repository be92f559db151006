// Package mcpserver serves Loom's engine over the Model Context Protocol (MCP), with the official Go SDK:
// tools to assemble a context for a message, retrieve from a collection, remember, recall and forget what
// is known about a user, record a turn and count tokens, and resources for a session's history and a
// user's memory. `loom mcp` runs it on standard input and output; `loom serve` at /mcp (streamable HTTP)
// behind the HTTP API's authentication.
//
// Every tool's input is a typed struct whose JSON schema the SDK derives and checks (unknown fields and
// missing required ones are refused); every text of an input is held to the same per-text limit as the
// HTTP API's, and lists to its item limit, before any work. A tool's failure (bad input, a missing agent,
// a budget the required items do not fit, the store unreachable) is a tool result with isError set and a
// message the model can read, not a protocol error; an internal error's text is logged, not shown.
//
// Each tenant has an MCP server of its own (ForTenant): its tools and resources read and write only that
// tenant's data, so a client never names, and cannot reach, another tenant's.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/apilimit"
	"github.com/context-loom/loom/internal/textlimit"
	"github.com/context-loom/loom/store"
)

// Limits bound what one tool call may ask. Zero fields mean the Default* values, which are the HTTP API's.
type Limits struct {
	// MaxBodyBytes is the largest HTTP request body (413 past it).
	MaxBodyBytes int64
	// MaxTextBytes is the largest any one text of a tool's input may be: a message, fact, query, text to
	// count, an id.
	MaxTextBytes int
	// MaxItems is the most items one input may carry (the messages of a recorded turn), and the most
	// messages a session resource returns (the newest).
	MaxItems int
	// CallTimeout bounds the time one tool call or resource read may take.
	CallTimeout time.Duration
}

// Default limits, the HTTP API's (server.Default*).
const (
	DefaultMaxBodyBytes = apilimit.MaxBodyBytes
	DefaultMaxTextBytes = apilimit.MaxTextBytes
	DefaultMaxItems     = apilimit.MaxItems
	DefaultCallTimeout  = apilimit.Timeout
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = DefaultMaxTextBytes
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultMaxItems
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = DefaultCallTimeout
	}
	return l
}

// Config configures a Server.
type Config struct {
	// Engine does the work. Required.
	Engine *engine.Engine
	// Limits bound tool calls.
	Limits Limits
	// Logger receives internal errors (never an input). Nil: no logs.
	Logger *slog.Logger
}

// Server makes the MCP servers of tenants. It is safe for concurrent use.
type Server struct {
	eng    *engine.Engine
	st     *store.Store
	limits Limits
	log    *slog.Logger

	mu      sync.Mutex
	tenants map[string]*mcp.Server
	cache   *mcp.SchemaCache
}

// New returns a Server for cfg, or an error without an engine.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("mcpserver: no engine")
	}
	s := &Server{eng: cfg.Engine, st: cfg.Engine.Store(), limits: cfg.Limits.withDefaults(), log: cfg.Logger,
		tenants: map[string]*mcp.Server{}, cache: mcp.NewSchemaCache()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// ForTenant returns the MCP server of tenant ("" is loom.DefaultTenant): every tool and resource of it
// reads and writes that tenant's data only. It is made on first use and kept; the caller bounds the
// tenants it asks for (the HTTP API's keys do).
func (s *Server) ForTenant(tenant string) *mcp.Server {
	if tenant == "" {
		tenant = loom.DefaultTenant
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.tenants[tenant]; ok {
		return m
	}
	m := s.newMCP(tenant)
	s.tenants[tenant] = m
	return m
}

// Run serves tenant's MCP server on t (an mcp.StdioTransport for `loom mcp`) until the client goes away
// or ctx is done.
func (s *Server) Run(ctx context.Context, tenant string, t mcp.Transport) error {
	return s.ForTenant(tenant).Run(ctx, t)
}

// Handler serves MCP over streamable HTTP, statelessly (no Mcp-Session-Id: any server of a cluster
// answers any request) and with JSON answers. Each request is served by the MCP server of the tenant of
// its context (loom.Tenant), which the caller's authentication sets (loom.WithTenant), so that a key's
// requests reach its tenant's data only. The handler applies no Host rule of its own: the caller does
// (the HTTP API answers only loopback names without keys).
func (s *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return s.ForTenant(loom.Tenant(r.Context()))
	}, &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		JSONResponse:               true,
		MaxRequestBodyBytes:        s.limits.MaxBodyBytes,
		DisableLocalhostProtection: true, // the caller's Host rules apply; a proxy on loopback must work
	})
}

// Tool names.
const (
	ToolAssemble    = "assemble_context"
	ToolRetrieve    = "retrieve"
	ToolRemember    = "remember"
	ToolRecall      = "recall"
	ToolForget      = "forget"
	ToolRecordTurn  = "record_turn"
	ToolCountTokens = "count_tokens"
)

// Resource URI templates.
const (
	SessionResource = "loom://sessions/{session}/messages"
	MemoryResource  = "loom://users/{user}/memory"
)

func (s *Server) newMCP(tenant string) *mcp.Server {
	m := mcp.NewServer(&mcp.Implementation{Name: "loom", Title: "Loom", Version: loom.Version},
		&mcp.ServerOptions{
			Instructions: "Loom assembles the context of a model call within a token budget from stored state: " +
				"an agent's instructions and tools, a user's memory, a session's history, retrieved knowledge. " +
				"Call assemble_context with the user's message to get the messages to send, and record_turn " +
				"after the model answered.",
			SchemaCache: s.cache,
		})
	addTool(s, m, tenant, &mcp.Tool{Name: ToolAssemble, Title: "Assemble context",
		Description: "Assemble the context for a user's message within a token budget: the agent's instructions " +
			"and tools, the user's memory, the session's history and (with collection) knowledge retrieved for the " +
			"message, rendered in the format of a provider's API. Returns the messages to send and a report of " +
			"what each region kept and dropped.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.assemble)
	addTool(s, m, tenant, &mcp.Tool{Name: ToolRetrieve, Title: "Retrieve",
		Description: "Search a collection for the chunks most relevant to a query, best first.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.retrieve)
	addTool(s, m, tenant, &mcp.Tool{Name: ToolRemember, Title: "Remember",
		Description: "Remember a fact about a user under a key (setting it again replaces it). A pinned fact " +
			"is always kept in the user's memory region.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(false)}}, s.remember)
	addTool(s, m, tenant, &mcp.Tool{Name: ToolRecall, Title: "Recall",
		Description: "List the facts remembered about a user.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.recall)
	addTool(s, m, tenant, &mcp.Tool{Name: ToolForget, Title: "Forget",
		Description: "Forget the fact about a user under a key.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, s.forget)
	addTool(s, m, tenant, &mcp.Tool{Name: ToolRecordTurn, Title: "Record a turn",
		Description: "Append a turn to a session's history: the user's message, then the reply (assistant " +
			"messages with their tool calls, and the tool messages that answered them), in one atomic append.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)}}, s.recordTurn)
	addTool(s, m, tenant, &mcp.Tool{Name: ToolCountTokens, Title: "Count tokens",
		Description: "Count the tokens of a text as a model's (or an encoding's) tokenizer does.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.countTokens)

	m.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: SessionResource, Name: "session",
		Title: "A session's history", MIMEType: "application/json",
		Description: "The newest messages of a session, oldest first, as {\"messages\": [...]}."},
		s.resource(tenant, "sessions", "messages", s.readSession))
	m.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: MemoryResource, Name: "memory",
		Title: "A user's memory", MIMEType: "application/json",
		Description: "The facts remembered about a user, as {\"facts\": [...]}."},
		s.resource(tenant, "users", "memory", s.readMemory))
	return m
}

func ptr[T any](v T) *T { return &v }

// addTool adds a tool whose handler runs as tenant, after the input's limits are checked, within the call
// timeout, and whose error is a tool error (isError) with a message fit to show.
func addTool[In any](s *Server, m *mcp.Server, tenant string, t *mcp.Tool, h func(context.Context, *In) (any, error)) {
	mcp.AddTool(m, t, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		if err := textlimit.Check(&in, s.limits.MaxTextBytes); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", loom.ErrTooLarge, err)
		}
		ctx, cancel := context.WithTimeout(loom.WithTenant(ctx, tenant), s.limits.CallTimeout)
		defer cancel()
		out, err := h(ctx, &in)
		if err != nil {
			return nil, nil, s.shown(t.Name, err)
		}
		if raw, ok := out.(json.RawMessage); ok {
			// The text as encoded, HTML characters unescaped; the SDK adds the structured content.
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}, out, nil
		}
		return nil, out, nil
	})
}

// shown returns the error to show for err: its own text when it is the caller's doing (package loom's
// kinds), a short cause when a service failed, and "internal error" otherwise (logged).
func (s *Server) shown(op string, err error) error {
	for _, k := range []error{loom.ErrBudget, loom.ErrExists, loom.ErrNotFound, loom.ErrTooLarge, loom.ErrInvalid, loom.ErrUnsupported} {
		if errors.Is(err, k) {
			return err
		}
	}
	switch {
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, loom.ErrClosed):
		return errors.New("the store is unavailable; retry later")
	case errors.Is(err, loom.ErrUnavailable):
		s.log.Warn("mcp call failed", slog.String("op", op), slog.String("error", err.Error()))
		return errors.New("a service Loom depends on is unavailable; retry later")
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the call took longer than %s", s.limits.CallTimeout)
	case errors.Is(err, context.Canceled):
		return errors.New("the call was canceled")
	case errors.Is(err, engine.ErrSourceFailed):
		return errors.New("a source of the assembly could not be read")
	}
	s.log.Error("mcp call failed", slog.String("op", op), slog.String("error", err.Error()))
	return errors.New("internal error")
}

// resource returns the handler of a template loom://<kind>/{id}/<leaf>: it reads the id from the URI and
// calls read as tenant. A URI of another shape, or a bad id, is an invalid-params error.
func (s *Server) resource(tenant, kind, leaf string, read func(ctx context.Context, id string) (any, error)) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		id, err := resourceID(uri, kind, leaf, s.limits.MaxTextBytes)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		ctx, cancel := context.WithTimeout(loom.WithTenant(ctx, tenant), s.limits.CallTimeout)
		defer cancel()
		v, err := read(ctx, id)
		if err != nil {
			err = s.shown("read "+kind, err)
			code := int64(jsonrpc.CodeInternalError)
			if errors.Is(err, loom.ErrInvalid) || errors.Is(err, loom.ErrTooLarge) {
				code = jsonrpc.CodeInvalidParams
			}
			return nil, &jsonrpc.Error{Code: code, Message: err.Error()}
		}
		text, err := marshal(v)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: text}}}, nil
	}
}

// resourceID returns the id of a URI loom://<kind>/<id>/<leaf>, percent-decoded.
func resourceID(uri, kind, leaf string, limit int) (string, error) {
	if len(uri) > limit {
		return "", fmt.Errorf("the URI is %d bytes, the limit is %d", len(uri), limit)
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "loom" || u.Host != kind || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not a loom://%s/{id}/%s URI", uri, kind, leaf)
	}
	rest, ok := strings.CutSuffix(u.EscapedPath(), "/"+leaf)
	rest, ok2 := strings.CutPrefix(rest, "/")
	if !ok || !ok2 || rest == "" || strings.Contains(rest, "/") {
		return "", fmt.Errorf("%q is not a loom://%s/{id}/%s URI", uri, kind, leaf)
	}
	id, err := url.PathUnescape(rest)
	if err != nil {
		return "", fmt.Errorf("%q: %v", uri, err)
	}
	return id, nil
}
