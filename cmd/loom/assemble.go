package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

const assembleUsage = `Usage:

	loom assemble --request FILE.json [--format openai|responses|anthropic|gemini|text]
	loom assemble [--store URL] [--layout native|cookbook] [--tenant T] --agent A --user U --session S
	              --message M [--max-tokens N] [--model M] [--format F] [--preset cookbook] [--strict]
	              [--cache-breakpoints auto|off] [--cache-ttl 5m|1h|1h+5m]

Assemble fits a request into its token budget and prints the result as one JSON object: the provider-ready
messages (openai; system and messages for anthropic; instructions and input for responses, OpenAI's
Responses API; system_instruction and contents for gemini, counted with an estimate; text), the tools in
the format's shape, written canonically (sorted by name, schema keys sorted), the exact total_tokens, the
citations, the stable prefix's hash, the prompt_cache_key to send to OpenAI (openai and responses: a hash
of the tenant, the agent and the stable prefix) and a report of every item kept or dropped.

With --request, the request is read from FILE.json ("-" for standard input): the body of the HTTP API's
POST /v1/assemble, every field meaning what it means there. With --agent, --user or --session (or the
file's "agent", "user" and "session"), the agent's configuration, the user's memory and the session's
history, tool outputs and knowledge are read from the store and merged with the request's own parts; with
the file's "retrieve" ({"collection", "query", "top_k", "min_score", "mode", "filter"}), knowledge is
retrieved from the store's collection for the message. A store that cannot be read leaves a "degraded"
list in the result; --strict makes that an error. --preset cookbook renders the messages as the Valkey
cookbook's assemble_context does.

With --session, the result's "cache" says why a call may miss the provider's prompt cache: shared_tokens,
how many tokens at the start of the prompt are byte-identical to the session's previous assembly's, and,
when that shared prefix ends before the previous history does, the region that changed first (tools,
instructions, memory, summary, history) and the reason (tools_changed, instructions_edited,
pinned_memory_changed, compaction, history_cut_moved, history_rewritten; first_assembly, format_changed).
The store keeps the hashes of each session's last prompt for it (not with the Valkey cookbook's layout).

The request:

	{"model": "gpt-4o", "max_tokens": 8000, "reserve_output": 1000, "format": "openai",
	 "instructions": "...", "tools": [{"type": "function", "function": {...}}],
	 "memory": [{"key", "value", "pinned"}], "knowledge": [{"id", "content", "score", "source", "type",
	 "trusted", "metadata"}], "history": [{"role", "content", "tool_calls", "tool_call_id", "name"}],
	 "tool_outputs": [{"tool", "call_id", "result"}], "message": "...",
	 "policy": {"regions": [...], "history_trim": "steps", "history_floor": 0.3, "keep_tool_results": 3,
	 "clear_tool_results_over": 500, ...},
	 "agent": "...", "user": "...", "session": "...", "history_limit": 20, "strict": false,
	 "preset": "cookbook", "retrieve": {"collection": "...", "top_k": 5}}

Exit status: 0 on success; 1 if the file or store cannot be read or the agent or collection does not
exist; 2 for a malformed request or bad usage; 3 when the required items (instructions, tools, the message, the latest tool
exchange) do not fit the budget.
` + storeFlagsUsage

// exitBudget is the exit status for a budget the required items cannot meet.
const exitBudget = 3

// maxRequestBytes bounds what loom assemble reads.
const maxRequestBytes = 64 << 20

func runAssemble(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("assemble", assembleUsage, s)
	path := fs.String("request", "", "the request `FILE`, or - for standard input")
	fs.String("format", "", "the output format, overriding the request's")
	sf := addStoreFlags(fs)
	fs.String("agent", "", "the stored agent whose configuration to use")
	fs.String("user", "", "the user whose stored memory to use")
	fs.String("session", "", "the session whose stored history, tool outputs and knowledge to use")
	fs.String("message", "", "the current user `message`")
	maxTokens := fs.Int("max-tokens", 0, "the prompt budget in tokens (0: the agent's, or the model's window)")
	fs.String("model", "", "the `model`, overriding the agent's and the request's")
	fs.String("preset", "", "render with a `preset`: cookbook")
	fs.String("cache-breakpoints", "", "anthropic: `auto` (the default) or off, overriding the request's and the agent's cache_breakpoints")
	fs.String("cache-ttl", "", "anthropic: the breakpoints' `TTL`, 5m, 1h or 1h+5m (an hour on the tools and system prompt, five minutes on the messages), overriding the request's and the agent's cache_ttl")
	strict := fs.Bool("strict", false, "fail when a source cannot be read, instead of a degraded result")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(errors.New("assemble: unexpected arguments (run 'loom help assemble')"))
	}
	var req engine.Request
	if *path != "" {
		data, err := readLimited(*path, s)
		if err != nil {
			return fmt.Errorf("assemble: %w", err)
		}
		if err := decodeStrict(data, &req); err != nil {
			return usageError(fmt.Errorf("assemble: malformed request: %w", err))
		}
		req.DropTokenCounts() // a file's counts could make the budget wrong
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, dst := range map[string]*string{"agent": &req.Agent, "user": &req.User, "session": &req.Session, "message": &req.Message, "model": &req.Model, "format": &req.Format, "preset": &req.Preset,
		"cache-breakpoints": &req.CacheBreakpoints, "cache-ttl": &req.CacheTTL} {
		if set[name] {
			*dst = fs.Lookup(name).Value.String()
		}
	}
	if set["max-tokens"] {
		req.MaxTokens = *maxTokens
	}
	req.Strict = req.Strict || *strict
	// Every request goes through the engine, as the HTTP API's do, so that each of its fields means the
	// same here. Stored state (ids, a retrieval) is read from the store the flags name; a request of inline
	// parts only needs none, and gets an empty one in memory.
	useStore := req.Agent != "" || req.User != "" || req.Session != "" || req.Retrieve != nil || set["store"] || set["layout"] || set["tenant"]
	if *path == "" && !useStore {
		return usageError(errors.New("assemble: want --request FILE.json, or --agent, --user or --session with a store (run 'loom help assemble')"))
	}
	if !useStore {
		*sf.url, *sf.layout = "memory:", ""
	}
	res, err := assembleFromStore(ctx, sf, req, s)
	var be *assembler.BudgetError
	var ee *exitError
	switch {
	case errors.As(err, &be):
		return &exitError{code: exitBudget, err: fmt.Errorf("assemble: the required items need %d tokens, the budget is %d", be.Required, be.Available)}
	case errors.As(err, &ee):
		return err
	case errors.Is(err, engine.ErrAgentNotFound), errors.Is(err, collection.ErrNotFound), errors.Is(err, engine.ErrSourceFailed), errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("assemble: %w", err)
	case err != nil:
		return usageError(fmt.Errorf("assemble: %w", err))
	}
	return writeJSON(s.stdout, res)
}
