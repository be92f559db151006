package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/mcpserver"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storeurl"
)

const mcpUsage = `Usage: loom mcp [--store URL] [--tenant TENANT] [flags]

Mcp runs Loom's MCP server (Model Context Protocol) on standard input and output, for an agent client
that starts it as a subprocess (Claude Desktop, an IDE, an agent framework), until the client closes its
input or SIGINT. It serves one tenant's state (--tenant, default "default"). Logs go to standard error.

Tools: assemble_context (the context for a user's message: agent, user, session, model, max_tokens,
format, collection), retrieve (a collection's chunks most relevant to a query), remember, recall and
forget (facts about a user), record_turn (append a turn to a session), count_tokens. Resources:
loom://sessions/{session}/messages (a session's newest messages) and loom://users/{user}/memory (a user's
facts). Every text of a tool's input is held to --max-message-bytes and a turn to --max-items messages,
as in the HTTP API; a bad input is a tool error the model can read.

The same server is served over streamable HTTP at POST /mcp by loom serve, behind its API keys.

Every flag can also be set by an environment variable, as for loom serve (--store is LOOM_STORE).
` + summarizerUsage + storeFlagsUsage

// nopWriteCloser is standard output as the transport's writer: closing the session does not close it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func runMCP(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("mcp", mcpUsage, s)
	sf := addStoreFlags(fs)
	maxBody := fs.Int64("max-body-bytes", server.DefaultMaxBodyBytes, "the largest JSON-RPC message, in `bytes`")
	maxMessage := fs.Int("max-message-bytes", server.DefaultMaxMessageBytes, "the largest text in a tool's input, in `bytes`")
	maxItems := fs.Int("max-items", server.DefaultMaxItems, "the most messages in one recorded turn, and in a session resource")
	timeout := fs.Duration("request-timeout", server.DefaultRequestTimeout, "the longest a tool call may take")
	sum := addSummarizerFlags(fs)
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := flagsFromEnv(fs); err != nil {
		return usageError(fmt.Errorf("mcp: %w", err))
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Errorf("mcp: unexpected arguments %q", fs.Args()))
	}
	if *maxBody <= 0 || *maxMessage <= 0 || *maxItems <= 0 || *timeout <= 0 {
		return usageError(errors.New("mcp: the limits must be positive"))
	}
	if err := store.ValidateID(store.Limits{}, "tenant", *sf.tenant); err != nil {
		return usageError(fmt.Errorf("mcp: --tenant: %w", err))
	}
	log := slog.New(slog.NewTextHandler(s.stderr, nil))
	st, err := storeurl.Open(ctx, *sf.url, storeurl.Options{Layout: *sf.layout, Logger: log,
		Store: store.Options{Limits: store.Limits{MaxValueBytes: *maxMessage, MaxBatch: *maxItems}}})
	if errors.Is(err, storeurl.ErrBadURL) {
		return usageError(fmt.Errorf("mcp: %w", err))
	}
	if err != nil {
		return fmt.Errorf("mcp: open the store: %w", err)
	}
	defer st.Close()
	opts := []engine.Option{engine.WithChunkers(newChunkers())}
	sumOpt, err := sum.option(log)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	if sumOpt != nil {
		opts = append(opts, sumOpt)
	}
	eng, err := engine.New(st, opts...)
	if err != nil {
		return err
	}
	defer eng.Close()
	ms, err := mcpserver.New(mcpserver.Config{Engine: eng, Logger: log, Limits: mcpserver.Limits{
		MaxBodyBytes: *maxBody, MaxTextBytes: *maxMessage, MaxItems: *maxItems, CallTimeout: *timeout}})
	if err != nil {
		return err
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(s.stdin), Writer: nopWriteCloser{s.stdout}, MaxLineLength: int(*maxBody)}
	if err := ms.Run(ctx, *sf.tenant, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}
