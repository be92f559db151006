package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storeurl"
)

// defaultStore is the store the state commands use when neither --store nor LOOM_STORE names one.
const defaultStore = "sqlite:loom.db"

const storeFlagsUsage = `
Stores: sqlite:PATH (the default, sqlite:loom.db, or $LOOM_STORE), memory: (gone when the command ends),
valkey://[user:pass@]host:port[/db] (valkeys:// for TLS; redis:// and rediss:// work too). With --layout
cookbook, a Valkey store reads and writes the Valkey cookbook's keys (agent:config:<id>, memory:<user>,
chat:<session>, kb:results:<session>, tool:<session>:step_*), for the tenant "default" only.
`

// storeFlags are the flags that choose a store and a tenant.
type storeFlags struct {
	url, layout, tenant *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	def := os.Getenv("LOOM_STORE")
	if def == "" {
		def = defaultStore
	}
	return storeFlags{
		url:    fs.String("store", def, "the store `URL` (default from $LOOM_STORE)"),
		layout: fs.String("layout", "", "the Valkey key `layout`: native (the default, or the URL's layout=) or cookbook"),
		tenant: fs.String("tenant", loom.DefaultTenant, "the `tenant` whose state to use"),
	}
}

// open opens the store the flags name.
func (f storeFlags) open(ctx context.Context) (*store.Store, error) {
	s, err := storeurl.Open(ctx, *f.url, storeurl.Options{Layout: *f.layout})
	if errors.Is(err, storeurl.ErrBadURL) {
		return nil, usageError(err)
	}
	return s, err
}

// required checks that the named flags were given a value.
func required(fs *flag.FlagSet, names ...string) error {
	for _, n := range names {
		if fs.Lookup(n).Value.String() == "" {
			return usageError(fmt.Errorf("%s: --%s is required (run 'loom help %s' for usage)", fs.Name(), n, strings.Fields(fs.Name())[0]))
		}
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args()))
	}
	return nil
}

// storeError turns a store's input errors into usage errors (exit 2) and says what was not found.
func storeError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrUnsupported):
		return usageError(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// with opens the store the flags name, runs fn on it and closes it; fn's error is the verb's (storeError).
func (sf storeFlags) with(ctx context.Context, verb string, fn func(*store.Store) error) error {
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return storeError(verb, fn(st))
}

// verb is one verb of a command with verbs: it runs with the name "command verb" and the arguments after
// the verb.
type verb func(ctx context.Context, name string, args []string, s streams) error

// verbs runs the verb args[0] of a command with verbs (session, memory, agent, collection, document).
func verbs(ctx context.Context, name, usage string, table map[string]verb, args []string, s streams) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		io.WriteString(s.stderr, usage)
		if len(args) == 0 {
			return &exitError{code: exitUsage}
		}
		return errHelp
	}
	run, ok := table[args[0]]
	if !ok {
		return usageError(fmt.Errorf("%s: unknown verb %q (run 'loom help %s')", name, args[0], name))
	}
	return run(ctx, name+" "+args[0], args[1:], s)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// readLimited reads path ("-" for standard input) up to maxRequestBytes.
func readLimited(path string, s streams) ([]byte, error) {
	var r io.Reader = s.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRequestBytes {
		return nil, usageError(fmt.Errorf("%s is larger than %d bytes", path, maxRequestBytes))
	}
	return data, nil
}

// decodeStrict decodes one JSON value into v: unknown fields and trailing data are errors.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

const sessionUsage = `Usage:

	loom session append --session S [--role user] (--content TEXT | --json FILE) [--name N] [--tool-call-id ID]
	loom session show --session S [--limit N] [--before SEQ]
	loom session tool-output --session S --tool NAME --result TEXT [--call-id ID] [--args JSON]
	loom session knowledge --session S --json FILE
	loom session delete --session S
	loom session compact --session S [--agent A] [--force] [--summarizer-url URL --summarizer-model NAME]
	loom session summary --session S

append adds a message to a session (with --json, a file of {"messages": [...]}, a list of messages or one
message, in the wire format of loom assemble's history); a message needs content, but for an assistant
message with tool calls and a tool message (--content "" gives an empty tool result). show prints the
session's messages as JSON Lines, oldest first, with their sequence numbers and cached token counts (all of
them, read a page at a time; with --limit N only the newest N, and where older ones remain, the --before
that shows them goes to standard error; with --before SEQ only those older than SEQ); tool-output records a
tool step;
knowledge replaces the session's pre-retrieved knowledge with a JSON list of knowledge items; delete removes
the session; compact summarizes the session's turns older than the agent's policy keeps verbatim, with its
previous summary, waits for it and prints {"result", "summary"} (the summary record, with the range it
covers and its failures); a summarizer that fails exits 1 with the failure in the record; summary prints
the session's summary record (its compaction's state: a claim under way, failures, the last error). Each takes
--store, --layout and --tenant.
` + summarizerUsage + storeFlagsUsage

var sessionVerbs = map[string]verb{
	"append": sessionAppend, "show": sessionShow, "tool-output": sessionToolOutput, "knowledge": sessionKnowledge, "delete": sessionDelete,
	"compact": sessionCompact, "summary": sessionSummary,
}

func runSession(ctx context.Context, args []string, s streams) error {
	return verbs(ctx, "session", sessionUsage, sessionVerbs, args, s)
}

func sessionAppend(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, sessionUsage, s)
	sf := addStoreFlags(fs)
	session := fs.String("session", "", "the session `id`")
	role := fs.String("role", "user", "the message's `role`: user, assistant, tool or system")
	content := fs.String("content", "", "the message's `text`")
	msgName := fs.String("name", "", "the message's `name` (optional)")
	callID := fs.String("tool-call-id", "", "the tool call a tool message answers")
	file := fs.String("json", "", "a JSON `FILE` of messages (- for standard input)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "session"); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var msgs []store.Message
	switch {
	case *file != "" && set["content"]:
		return usageError(fmt.Errorf("%s: give --content or --json, not both", name))
	case *file != "":
		data, err := readLimited(*file, s)
		if err != nil {
			return err
		}
		if msgs, err = decodeMessages(data); err != nil {
			return usageError(fmt.Errorf("%s: %s: %w", name, *file, err))
		}
	case !set["content"]:
		return usageError(fmt.Errorf("%s: want --content TEXT or --json FILE (run 'loom help session')", name))
	default:
		msgs = []store.Message{{Role: *role, Content: *content, Name: *msgName, ToolCallID: *callID}}
	}
	for i, m := range msgs {
		if err := checkContent(m); err != nil {
			return usageError(fmt.Errorf("%s: message %d: %w", name, i+1, err))
		}
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		stored, err := st.AppendMessages(ctx, *sf.tenant, *session, msgs...)
		if err != nil {
			return err
		}
		for _, m := range stored {
			if err := writeJSON(s.stdout, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkContent refuses a message with no content (or only white space), which no model can use: a
// forgotten --content, say. An assistant message that makes tool calls, and a tool message (a tool's result
// may be empty), may have none.
func checkContent(m store.Message) error {
	if strings.TrimSpace(m.Content) != "" || len(m.Parts) > 0 || len(m.ToolCalls) > 0 || m.Role == "tool" {
		return nil
	}
	return fmt.Errorf("no content (role %s; only an assistant message with tool calls, or a tool's result, may be empty)", cmp.Or(m.Role, `""`))
}

// decodeMessages reads {"messages": [...]}, [...] or one message.
func decodeMessages(data []byte) ([]store.Message, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var msgs []store.Message
		return msgs, decodeStrict(data, &msgs)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, err
	}
	if _, ok := probe["messages"]; ok {
		var wrap struct {
			Messages []store.Message `json:"messages"`
		}
		return wrap.Messages, decodeStrict(data, &wrap)
	}
	var m store.Message
	return []store.Message{m}, decodeStrict(data, &m)
}

// showPage is how many messages session show reads at a time.
const showPage = 1000

func sessionShow(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, sessionUsage, s)
	sf := addStoreFlags(fs)
	session := fs.String("session", "", "the session `id`")
	limit := fs.Int("limit", 0, "print only the newest `N` messages (0: all)")
	before := fs.Int64("before", 0, "print only messages older than the sequence number `SEQ` (0: from the newest)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "session"); err != nil {
		return err
	}
	if *limit < 0 || *before < 0 {
		return usageError(fmt.Errorf("%s: --limit and --before must not be negative", name))
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		emit := func(msgs []store.Message) error {
			for _, m := range msgs {
				if err := writeJSON(s.stdout, m); err != nil {
					return err
				}
			}
			return nil
		}
		if *limit > 0 { // one page, and where the older ones begin
			msgs, err := st.Messages(ctx, *sf.tenant, *session, store.MessageQuery{Before: *before, Limit: *limit + 1})
			if err != nil {
				return err
			}
			if len(msgs) > *limit {
				msgs = msgs[1:]
				defer fmt.Fprintf(s.stderr, "%s: older messages remain: --before %d shows them\n", name, msgs[0].Seq)
			}
			return emit(msgs)
		}
		// All of them, oldest first, a page at a time: pages end at the seqs 1+showPage, 1+2*showPage, ...
		// up to the newest (as it was when the walk began). A page never repeats what one before it printed
		// (a layout that skips entries it cannot read fills a page from further back).
		newest, err := st.Messages(ctx, *sf.tenant, *session, store.MessageQuery{Before: *before, Limit: 1})
		if err != nil || len(newest) == 0 {
			return err
		}
		end, printed := newest[0].Seq+1, int64(0)
		for b := int64(1 + showPage); ; b += showPage {
			page, err := st.Messages(ctx, *sf.tenant, *session, store.MessageQuery{Before: min(b, end), Limit: showPage})
			if err != nil {
				return err
			}
			for len(page) > 0 && page[0].Seq <= printed {
				page = page[1:]
			}
			if err := emit(page); err != nil {
				return err
			}
			if len(page) > 0 {
				printed = page[len(page)-1].Seq
			}
			if b >= end {
				return nil
			}
		}
	})
}

func sessionToolOutput(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, sessionUsage, s)
	sf := addStoreFlags(fs)
	session := fs.String("session", "", "the session `id`")
	tool := fs.String("tool", "", "the tool's `name`")
	result := fs.String("result", "", "what the tool returned")
	callID := fs.String("call-id", "", "the call's `id` (optional)")
	toolArgs := fs.String("args", "", "the call's arguments as `JSON` (optional)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "session", "tool"); err != nil {
		return err
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		o, err := st.AppendToolOutput(ctx, *sf.tenant, *session, store.ToolOutput{Tool: *tool, CallID: *callID, Args: *toolArgs, Result: *result})
		if err != nil {
			return err
		}
		return writeJSON(s.stdout, o)
	})
}

func sessionKnowledge(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, sessionUsage, s)
	sf := addStoreFlags(fs)
	session := fs.String("session", "", "the session `id`")
	file := fs.String("json", "", "a JSON `FILE` with a list of knowledge items (- for standard input)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "session", "json"); err != nil {
		return err
	}
	data, err := readLimited(*file, s)
	if err != nil {
		return err
	}
	var items []store.Knowledge
	if err := decodeStrict(data, &items); err != nil {
		return usageError(fmt.Errorf("%s: %s: %w", name, *file, err))
	}
	return sf.with(ctx, name, func(st *store.Store) error { return st.SetKnowledge(ctx, *sf.tenant, *session, items) })
}

func sessionDelete(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, sessionUsage, s)
	sf := addStoreFlags(fs)
	session := fs.String("session", "", "the session `id`")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "session"); err != nil {
		return err
	}
	return sf.with(ctx, name, func(st *store.Store) error { return st.DeleteSession(ctx, *sf.tenant, *session) })
}

const memoryUsage = `Usage:

	loom memory set --user U --key K --value V [--pinned] [--source S]
	loom memory get --user U [--key K]
	loom memory delete --user U --key K

set remembers a fact about a user (pinned facts are kept first when memory must be trimmed); get prints the
user's facts as JSON Lines, ordered by key (or the one fact --key names); delete forgets one. Each takes
--store, --layout and --tenant.
` + storeFlagsUsage

var memoryVerbs = map[string]verb{"set": memorySet, "get": memoryGet, "delete": memoryDelete}

func runMemory(ctx context.Context, args []string, s streams) error {
	return verbs(ctx, "memory", memoryUsage, memoryVerbs, args, s)
}

func memorySet(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, memoryUsage, s)
	sf := addStoreFlags(fs)
	user := fs.String("user", "", "the user's `id`")
	key := fs.String("key", "", "the fact's `key`")
	value := fs.String("value", "", "the fact's `value`")
	pinned := fs.Bool("pinned", false, "pin the fact")
	source := fs.String("source", "", "where the fact came from (optional)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "user", "key"); err != nil {
		return err
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		return st.SetFact(ctx, *sf.tenant, *user, store.Fact{Key: *key, Value: *value, Pinned: *pinned, Source: *source})
	})
}

func memoryGet(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, memoryUsage, s)
	sf := addStoreFlags(fs)
	user := fs.String("user", "", "the user's `id`")
	key := fs.String("key", "", "print only the fact with this `key`")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "user"); err != nil {
		return err
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		facts, err := st.Facts(ctx, *sf.tenant, *user)
		if err != nil {
			return err
		}
		found := false
		for _, f := range facts {
			if *key != "" && f.Key != *key {
				continue
			}
			found = true
			if err := writeJSON(s.stdout, f); err != nil {
				return err
			}
		}
		if *key != "" && !found {
			return fmt.Errorf("user %q has no fact %q: %w", *user, *key, store.ErrNotFound)
		}
		return nil
	})
}

func memoryDelete(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, memoryUsage, s)
	sf := addStoreFlags(fs)
	user := fs.String("user", "", "the user's `id`")
	key := fs.String("key", "", "the fact's `key`")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "user", "key"); err != nil {
		return err
	}
	return sf.with(ctx, name, func(st *store.Store) error { return st.DeleteFact(ctx, *sf.tenant, *user, *key) })
}

const agentUsage = `Usage:

	loom agent put --agent A [--instructions TEXT] [--constraints TEXT] [--output-format TEXT] [--model M]
	               [--max-tokens N] [--tools FILE] [--cache-breakpoints auto|off] [--cache-ttl 5m|1h|1h+5m]
	loom agent put --json FILE
	loom agent get --agent A

put creates or replaces an agent's configuration (--tools: a JSON list of OpenAI function tools; --json: the
whole configuration as get prints it; --cache-breakpoints and --cache-ttl: the defaults of the agent's
requests' cache_breakpoints and cache_ttl, which a request's own override); get prints it as JSON. Each takes --store, --layout and --tenant.
` + storeFlagsUsage

var agentVerbs = map[string]verb{"put": agentPut, "get": agentGet}

func runAgent(ctx context.Context, args []string, s streams) error {
	return verbs(ctx, "agent", agentUsage, agentVerbs, args, s)
}

func agentPut(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, agentUsage, s)
	sf := addStoreFlags(fs)
	id := fs.String("agent", "", "the agent's `id`")
	instructions := fs.String("instructions", "", "the agent's role and instructions")
	constraints := fs.String("constraints", "", "the agent's constraints")
	format := fs.String("output-format", "", "the format of the agent's answers")
	model := fs.String("model", "", "the agent's `model`")
	maxTokens := fs.Int("max-tokens", 0, "the agent's prompt budget in tokens (0: the model's window)")
	tools := fs.String("tools", "", "a JSON `FILE` with a list of tools")
	breakpoints := fs.String("cache-breakpoints", "", "the default cache_breakpoints of the agent's requests: `auto` or off")
	ttl := fs.String("cache-ttl", "", "the default cache_ttl of the agent's anthropic requests: `5m`, 1h or 1h+5m")
	file := fs.String("json", "", "a JSON `FILE` with the whole configuration (- for standard input)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	var a store.Agent
	if *file != "" {
		data, err := readLimited(*file, s)
		if err != nil {
			return err
		}
		if err := decodeStrict(data, &a); err != nil {
			return usageError(fmt.Errorf("%s: %s: %w", name, *file, err))
		}
		if *id != "" {
			a.ID = *id
		}
	} else {
		if err := required(fs, "agent"); err != nil {
			return err
		}
		a = store.Agent{ID: *id, Instructions: *instructions, Constraints: *constraints, OutputFormat: *format, Model: *model, MaxTokens: *maxTokens,
			CacheBreakpoints: *breakpoints, CacheTTL: *ttl}
		if *tools != "" {
			data, err := readLimited(*tools, s)
			if err != nil {
				return err
			}
			if err := decodeStrict(data, &a.Tools); err != nil {
				return usageError(fmt.Errorf("%s: %s: %w", name, *tools, err))
			}
		}
	}
	return sf.with(ctx, name, func(st *store.Store) error { return st.PutAgent(ctx, *sf.tenant, a) })
}

func agentGet(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, agentUsage, s)
	sf := addStoreFlags(fs)
	id := fs.String("agent", "", "the agent's `id`")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "agent"); err != nil {
		return err
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		a, err := st.GetAgent(ctx, *sf.tenant, *id)
		if err != nil {
			return err
		}
		return writeJSON(s.stdout, a)
	})
}

// assembleFromStore runs an assembly through the engine: the stored state the flags name, merged with the
// request file's parts (if any).
func assembleFromStore(ctx context.Context, sf storeFlags, req engine.Request, s streams) (*engine.Result, error) {
	st, err := sf.open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	eng, err := engine.New(st)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	return eng.Assemble(loom.WithTenant(ctx, *sf.tenant), req)
}
