// Package cookbook is a store on a Valkey (or Redis) server in the key layout of the Valkey cookbook's
// context assembly pipeline: it reads and writes those keys as that Python code does, so its users can
// point Loom at their server unchanged:
//
//	agent:config:<agent>       hash: role (Agent.Instructions), constraints, output_format; Loom adds model,
//	                           max_tokens, tools, policy and updated_at when it writes one
//	memory:<user>              hash: fact key -> value; Facts come in the server's order (insertion order
//	                           for small hashes), not sorted, so the cookbook's output is reproduced
//	chat:<session>             list of JSON {"role", "content", "ts"}; seq = position + 1; token counts are
//	                           counted on read (other programs write these keys, so none are trusted)
//	kb:results:<session>       list of JSON {"title", "content", ...}; the title is Metadata["title"], and
//	                           Source unless a "source" is given; an untitled entry's "source" is
//	                           Metadata["source"] (and it renders as the cookbook's "Doc")
//	tool:<session>:step_<n>    hash: tool, result, timestamp (and call_id, args when Loom writes them); found
//	                           with SCAN MATCH, never KEYS, and ordered by n as a number, so step_2 comes
//	                           before step_10 (the cookbook sorts them as strings, which puts step_10 first)
//
// Entries written by other tools are read leniently, one at a time, as the cookbook's Python reads them:
// numbers may be numeric strings, metadata values of any JSON type are kept (as JSON text), and an entry
// that is not an object, or a chat entry without role and content, is skipped rather than failing its
// whole source (see [Backend]).
//
// The cookbook's keys carry no tenant, so this layout holds the single tenant "default" ([DefaultTenant]);
// any other tenant gets an error wrapping store.ErrUnsupported. It keeps no collections (its store's
// Collections says so). Its Load takes more than one round trip: the tool steps must be found with SCAN
// before they can be read (concurrently with the other sources).
//
// The connection (addresses, Sentinel, cluster, TLS, timeouts, the client-side cache of agents) and what
// an acknowledged write survives are as in package [github.com/context-loom/loom/store/valkey], which
// keeps Loom's own, tenant-scoped key layout.
package cookbook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/internal/conn"
)

// DefaultTenant is the only tenant the cookbook's keys hold.
const DefaultTenant = loom.DefaultTenant

// Errors of Open.
var (
	// ErrNoClientCache is returned by Open when Options.CacheAgents is set but the server cannot do
	// client-side caching (it needs RESP3 and CLIENT TRACKING: Redis 6 or later, or Valkey). It is
	// valkey.ErrNoClientCache.
	ErrNoClientCache = conn.ErrNoClientCache
	// ErrBadOptions is wrapped by Open's and ParseURL's errors about options that cannot work. It is
	// valkey.ErrBadOptions.
	ErrBadOptions = conn.ErrBadOptions
)

// Options configure a cookbook store. The zero value of each field means its documented default, except
// Client.InitAddress, which must name at least one server. Its keys are the cookbook's, as they are: there
// is no prefix.
type Options struct {
	// Options are the settings every store takes. ChangesKept is not used: the layout keeps no
	// collections.
	store.Options
	// Client configures the connection: addresses (Client.InitAddress), credentials, TLS, Sentinel
	// (Client.Sentinel.MasterSet) or cluster (found by itself when the server is one).
	Client valkeygo.ClientOption
	// Timeout bounds every call that reaches the server unless the caller's context ends sooner; 0 means
	// valkey.DefaultTimeout. A call that times out returns an error wrapping store.ErrUnavailable.
	Timeout time.Duration
	// CacheAgents, when positive, keeps agent configurations in a client-side cache for up to this long,
	// as valkey.Options.CacheAgents does.
	CacheAgents time.Duration
	// Logger receives what the store learns of the servers (how each primary persists, restarts); nil
	// means slog.Default().
	Logger *slog.Logger
}

// Open connects to the server opts.Client names and returns a store.Store over a [Backend]. It returns an
// error wrapping ErrBadOptions for options that cannot work, ErrNoClientCache (see Options.CacheAgents),
// or an error wrapping store.ErrUnavailable when the server cannot be reached.
func Open(ctx context.Context, opts Options) (*store.Store, error) {
	c, err := conn.Dial(ctx, conn.Settings{Client: opts.Client, Timeout: opts.Timeout, SessionTTL: opts.SessionTTL,
		CacheAgents: opts.CacheAgents, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	s, err := store.New(&Backend{conn: c}, opts.Options)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s, nil
}

// ParseURL parses a store URL into Options, as valkey.ParseURL does: the same syntax and options, but
// layout=cookbook (or no layout=) and no prefix=, which the cookbook's keys do not have.
func ParseURL(raw string) (Options, error) {
	u, err := conn.ParseURL(raw)
	if err != nil {
		return Options{}, err
	}
	switch {
	case u.Layout == conn.LayoutNative:
		return Options{}, fmt.Errorf("%w: store URL: layout=native is Loom's own key layout, which package valkey opens", ErrBadOptions)
	case u.Prefix != "":
		return Options{}, fmt.Errorf("%w: store URL: the cookbook's keys take no prefix", ErrBadOptions)
	}
	return Options{Options: store.Options{SessionTTL: u.SessionTTL}, Client: u.Client, Timeout: u.Timeout, CacheAgents: u.CacheAgents}, nil
}

// Backend is the store.Backend of the cookbook's keys: one tenant, no collections. It is also a
// store.Loader (one DoMulti and, beside it, the SCAN of the tool steps) and a store.OrderedFacts. It is
// safe for concurrent use.
//
// # Lenient reading
//
// The cookbook's lists are written by other programs too: the cookbook's Python, search pipelines that keep
// FT.SEARCH's scores as strings, tools that put numbers in metadata. The cookbook reads only title and
// content of a knowledge entry and role and content of a chat entry, so one odd entry must not cost the
// session its other entries, nor Loom a source the cookbook would show. Each entry is decoded on its own: a
// field of an unexpected JSON type is converted where the conversion is plain (a numeric string for a number,
// the JSON text of a metadata value that is not a string) and ignored where it is not (a ts that is not a
// time), and an entry that cannot be read at all (not a JSON object; a chat entry without a string role or
// without content) is skipped while the others are kept. Skipped entries are not reported:
// store.Snapshot.Errors marks a source as unread and absent (the engine reports it degraded, and a strict
// assembly fails), which a source with some good entries is not; nor does a Load's snapshot have a place for
// a partial one. A chat entry skipped leaves a gap in the seqs, which stay position + 1.
type Backend struct {
	conn *conn.Conn
}

// maxStepClaims bounds how many step numbers AppendToolOutput tries when other writers take them first.
const maxStepClaims = 100

// claimStep writes a tool step's hash only if the key does not exist yet, so that concurrent writers never
// share a step number. KEYS[1] is the step key; ARGV[1] the TTL in milliseconds (0: none); the rest are
// field-value pairs.
var claimStep = valkeygo.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
local ttl = tonumber(ARGV[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
`)

var (
	_ store.Backend      = (*Backend)(nil)
	_ store.Loader       = (*Backend)(nil)
	_ store.OrderedFacts = (*Backend)(nil)
)

// checkTenant returns an error wrapping store.ErrUnsupported for any tenant but DefaultTenant: the
// cookbook's keys carry none.
func (c *Backend) checkTenant(tenant string) error {
	if tenant != DefaultTenant {
		return fmt.Errorf("%w: the cookbook layout holds only tenant %q, not %q", store.ErrUnsupported, DefaultTenant, tenant)
	}
	return nil
}

func agentConfigKey(id string) string  { return "agent:config:" + id }
func memoryKey(user string) string     { return "memory:" + user }
func chatKey(session string) string    { return "chat:" + session }
func kbKey(session string) string      { return "kb:results:" + session }
func stepPrefix(session string) string { return "tool:" + session + ":step_" }

// pexpire returns the command that refreshes key's TTL, if the store has one.
func (c *Backend) pexpire(key string) []valkeygo.Completed {
	if c.conn.TTL <= 0 {
		return nil
	}
	return []valkeygo.Completed{c.conn.Client.B().Pexpire().Key(key).Milliseconds(c.conn.TTL.Milliseconds()).Build()}
}

// PutAgent implements store.Backend: the hash the cookbook reads (role, constraints, output_format) plus
// Loom's fields, replacing what was there.
func (c *Backend) PutAgent(ctx context.Context, tenant string, a store.Agent) error {
	if err := c.checkTenant(tenant); err != nil {
		return err
	}
	key := agentConfigKey(a.ID)
	fields, err := conn.AgentFields(a, "role")
	if err != nil {
		return err
	}
	h := c.conn.Client.B().Hset().Key(key).FieldValue()
	for i := 0; i < len(fields); i += 2 {
		h = h.FieldValue(fields[i], fields[i+1])
	}
	_, err = c.conn.Tx(ctx, c.conn.Client.B().Del().Key(key).Build(), h.Build())
	return err
}

func (c *Backend) getAgent(ctx context.Context, id string) (valkeygo.ValkeyResult, error) {
	if c.conn.CacheTTL <= 0 {
		return c.conn.Do(ctx, c.conn.Client.B().Hgetall().Key(agentConfigKey(id)).Build())
	}
	cctx, cancel, err := c.conn.Call(ctx)
	if err != nil {
		return valkeygo.ValkeyResult{}, c.conn.Fail(ctx, err)
	}
	defer cancel()
	r := c.conn.Client.DoCache(cctx, c.conn.Client.B().Hgetall().Key(agentConfigKey(id)).Cache(), c.conn.CacheTTL)
	if err := r.NonValkeyError(); err != nil {
		return r, c.conn.Fail(ctx, err)
	}
	return r, nil
}

// GetAgent implements store.Backend.
func (c *Backend) GetAgent(ctx context.Context, tenant, id string) (store.Agent, error) {
	if err := c.checkTenant(tenant); err != nil {
		return store.Agent{}, err
	}
	r, err := c.getAgent(ctx, id)
	if err != nil {
		return store.Agent{}, err
	}
	return c.decodeAgent(ctx, id, r)
}

func (c *Backend) decodeAgent(ctx context.Context, id string, r valkeygo.ValkeyResult) (store.Agent, error) {
	h, err := r.AsStrMap()
	if err != nil {
		return store.Agent{}, c.conn.Fail(ctx, err)
	}
	return conn.DecodeAgentHash(id, h, "role")
}

// DeleteAgent implements store.Backend.
func (c *Backend) DeleteAgent(ctx context.Context, tenant, id string) error {
	if err := c.checkTenant(tenant); err != nil {
		return err
	}
	r, err := c.conn.Do(ctx, c.conn.Client.B().Del().Key(agentConfigKey(id)).Build())
	return c.conn.Deleted(ctx, r, err, "agent", id)
}

// SetFact implements store.Backend: HSET memory:<user> key value. Pinned, Source and UpdatedAt have no
// place in the cookbook's hash and are not kept.
func (c *Backend) SetFact(ctx context.Context, tenant, user string, f store.Fact) error {
	if err := c.checkTenant(tenant); err != nil {
		return err
	}
	_, err := c.conn.Do(ctx, c.conn.Client.B().Hset().Key(memoryKey(user)).FieldValue().FieldValue(f.Key, f.Value).Build())
	return err
}

// factCmds read a memory hash in the server's order: HKEYS and HVALS in one transaction walk the hash alike.
func (c *Backend) factCmds(user string) []valkeygo.Completed {
	b := c.conn.Client.B()
	return []valkeygo.Completed{b.Multi().Build(), b.Hkeys().Key(memoryKey(user)).Build(), b.Hvals().Key(memoryKey(user)).Build(), b.Exec().Build()}
}

func (c *Backend) decodeFacts(ctx context.Context, rs []valkeygo.ValkeyResult) ([]store.Fact, error) {
	arr, err := c.conn.ExecReplies(ctx, rs[0], rs[3], 2)
	if err != nil {
		return nil, err
	}
	keys, err := arr[0].AsStrSlice()
	if err != nil {
		return nil, c.conn.Fail(ctx, err)
	}
	vals, err := arr[1].AsStrSlice()
	if err != nil {
		return nil, c.conn.Fail(ctx, err)
	}
	if len(keys) != len(vals) {
		return nil, fmt.Errorf("valkey: a memory hash read %d keys and %d values", len(keys), len(vals))
	}
	if len(keys) == 0 {
		return nil, nil
	}
	out := make([]store.Fact, len(keys))
	for i := range keys {
		out[i] = store.Fact{Key: keys[i], Value: vals[i]}
	}
	return out, nil
}

// Facts implements store.Backend, in the hash's order (the cookbook's order), which FactsOrdered keeps.
func (c *Backend) Facts(ctx context.Context, tenant, user string) ([]store.Fact, error) {
	if err := c.checkTenant(tenant); err != nil {
		return nil, err
	}
	rs, err := c.conn.DoMulti(ctx, c.factCmds(user)...)
	if err != nil {
		return nil, err
	}
	return c.decodeFacts(ctx, rs)
}

// DeleteFact implements store.Backend.
func (c *Backend) DeleteFact(ctx context.Context, tenant, user, key string) error {
	if err := c.checkTenant(tenant); err != nil {
		return err
	}
	r, err := c.conn.Do(ctx, c.conn.Client.B().Hdel().Key(memoryKey(user)).Field(key).Build())
	return c.conn.Deleted(ctx, r, err, "fact", key)
}

// chatEntry is one element of chat:<session>: the cookbook writes role, content and ts (seconds since the
// epoch, a float); Loom adds the rest of a message when it has them.
type chatEntry struct {
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	TS         float64         `json:"ts,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []loom.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Parts      []loom.Part     `json:"parts,omitempty"` // a user message's content parts, after content
}

// fromSeconds converts a Python time.time() value, to the microsecond. A value that is not a time JSON can
// encode (before year 1 or after 9999, NaN, infinite) gives the zero time.
func fromSeconds(ts float64) time.Time {
	const minTS, maxTS = -62135596800, 253402300800 // 0001-01-01, 10000-01-01
	if ts == 0 || math.IsNaN(ts) || ts < minTS || ts >= maxTS {
		return time.Time{}
	}
	sec := math.Floor(ts)
	return time.Unix(int64(sec), int64(math.Round((ts-sec)*1e6))*1e3).UTC()
}

func toSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// AppendMessages implements store.Backend: RPUSH chat:<session> of the cookbook's JSON (with ts), and
// PEXPIRE of the list when the store has a TTL, in one transaction.
func (c *Backend) AppendMessages(ctx context.Context, tenant, session string, msgs []store.Message) ([]store.Message, error) {
	if err := c.checkTenant(tenant); err != nil {
		return nil, err
	}
	vals := make([]string, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		m.Time = m.Time.Truncate(time.Microsecond) // what ts keeps
		b, err := json.Marshal(chatEntry{Role: m.Role, Content: m.Content, TS: toSeconds(m.Time), Name: m.Name,
			ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Parts: m.Parts})
		if err != nil {
			return nil, fmt.Errorf("valkey: encode message %d: %w", i, err)
		}
		vals[i] = string(b)
	}
	key := chatKey(session)
	rs, err := c.conn.Tx(ctx, append([]valkeygo.Completed{c.conn.Client.B().Rpush().Key(key).Element(vals...).Build()}, c.pexpire(key)...)...)
	if err != nil {
		return nil, err
	}
	length, err := rs[0].AsInt64()
	if err != nil {
		return nil, c.conn.Fail(ctx, err)
	}
	for i := range msgs {
		msgs[i].Seq = length - int64(len(msgs)) + int64(i) + 1
	}
	return msgs, nil
}

// chatRaw is a chat:<session> entry as read, every field as raw JSON for decodeChatEntry to convert.
type chatRaw struct {
	Role       json.RawMessage `json:"role"`
	Content    json.RawMessage `json:"content"`
	TS         json.RawMessage `json:"ts"`
	Name       json.RawMessage `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID json.RawMessage `json:"tool_call_id"`
	Parts      json.RawMessage `json:"parts"`
}

// decodeChatEntry decodes one chat entry leniently (see "Lenient reading" in the cookbook type's comment).
// ok is false for an entry the cookbook could not read either: not a JSON object, or without a string role or
// without content. A null content is "" (an assistant message that only calls tools); content that is not
// a string is its JSON text. A ts that is neither a number nor a numeric string, or that is no time, is
// ignored; so are a name, tool_calls or tool_call_id of the wrong type, and parts that are not content parts
// loom.CheckParts takes for the entry's role. A token_counts field is never read:
// the counts are counted.
func decodeChatEntry(v string) (e chatEntry, ok bool) {
	var r chatRaw
	if !isObject(v) || json.Unmarshal([]byte(v), &r) != nil || len(r.Content) == 0 {
		return chatEntry{}, false
	}
	if e.Role, ok = jsonString(r.Role); !ok {
		return chatEntry{}, false
	}
	e.Content, _ = jsonText(r.Content)
	if ts, ok := jsonNumber(r.TS); ok {
		e.TS = ts
	}
	e.Name, _ = jsonString(r.Name)
	e.ToolCallID, _ = jsonString(r.ToolCallID)
	if !isNull(r.ToolCalls) && json.Unmarshal(r.ToolCalls, &e.ToolCalls) != nil {
		e.ToolCalls = nil
	}
	if !isNull(r.Parts) && (json.Unmarshal(r.Parts, &e.Parts) != nil || loom.CheckParts(e.Role, e.Parts) != nil) {
		e.Parts = nil
	}
	return e, true
}

// decodeChat decodes chat list values, the first with seq first, counting the tokens the cookbook's JSON has
// no counts for. Entries decodeChatEntry cannot read are skipped; the others keep their seqs (position + 1),
// so a skipped entry leaves a gap.
func decodeChat(vals []string, first int64) []store.Message {
	if len(vals) == 0 {
		return nil
	}
	out := make([]store.Message, 0, len(vals))
	for i, v := range vals {
		e, ok := decodeChatEntry(v)
		if !ok {
			continue
		}
		// Counted on read, whatever the entry says: these keys are written by other programs too, and a
		// count that is wrong would make every assembly's budget wrong.
		out = append(out, store.Message{Seq: first + int64(i), Role: e.Role, Content: e.Content, Parts: e.Parts, Name: e.Name, ToolCalls: e.ToolCalls,
			ToolCallID: e.ToolCallID, Time: fromSeconds(e.TS), TokenCounts: store.MessageCounts(e.Content)})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ReadMessages implements store.Backend: a page of the chat list's entries (see chatPage). The Store reads
// the newest first, a page at a time, and only as many as a query selects.
func (c *Backend) ReadMessages(ctx context.Context, tenant, session string, before int64, n int) ([]store.Message, int64, error) {
	if err := c.checkTenant(tenant); err != nil {
		return nil, 0, err
	}
	return c.chatPage(ctx, chatKey(session), before, n, nil)
}

// step is one tool:<session>:step_<n> key.
type step struct {
	key string
	n   int64
}

// steps finds a session's step keys with SCAN MATCH on every node and returns them ordered by n. Keys whose
// suffix is not a number are not steps Loom can order and are left out.
func (c *Backend) steps(ctx context.Context, session string) ([]step, error) {
	cctx, cancel, err := c.conn.Call(ctx)
	if err != nil {
		return nil, c.conn.Fail(ctx, err)
	}
	defer cancel()
	prefix := stepPrefix(session)
	pattern := conn.GlobEscape(prefix) + "*"
	seen := map[string]bool{}
	var out []step
	for _, node := range c.conn.Client.Nodes() {
		for cursor := uint64(0); ; {
			e, err := node.Do(cctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, c.conn.Fail(ctx, err)
			}
			for _, k := range e.Elements {
				n, err := strconv.ParseInt(strings.TrimPrefix(k, prefix), 10, 64)
				if err != nil || n < 0 || seen[k] {
					continue
				}
				seen[k] = true
				out = append(out, step{k, n})
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b step) int { return cmp.Compare(a.n, b.n) })
	return out, nil
}

// toolOutputs reads a session's steps: a SCAN, then HGETALL of every step in one DoMulti.
func (c *Backend) toolOutputs(ctx context.Context, session string) ([]store.ToolOutput, error) {
	steps, err := c.steps(ctx, session)
	if err != nil || len(steps) == 0 {
		return nil, err
	}
	cmds := make([]valkeygo.Completed, len(steps))
	for i, s := range steps {
		cmds[i] = c.conn.Client.B().Hgetall().Key(s.key).Build()
	}
	rs, err := c.conn.DoMulti(ctx, cmds...)
	if err != nil {
		return nil, err
	}
	out := make([]store.ToolOutput, 0, len(steps))
	for i, r := range rs {
		h, err := r.AsStrMap()
		if err != nil {
			return nil, c.conn.Fail(ctx, err)
		}
		if len(h) == 0 { // deleted or expired since the SCAN
			continue
		}
		out = append(out, decodeStep(steps[i].n, h))
	}
	return out, nil
}

// decodeStep is the tool output of step n's hash h as the cookbook reads it: data.get('tool', 'unknown') and
// data.get('result', '{}'), so a step without a tool field is tool "unknown" and one without a result field
// has result "{}", while fields that are there, empty or not, are taken as they are. A timestamp that is not
// a number is ignored (the cookbook does not read it).
func decodeStep(n int64, h map[string]string) store.ToolOutput {
	o := store.ToolOutput{Seq: n, Tool: h["tool"], CallID: h["call_id"], Args: h["args"], Result: h["result"]}
	if _, ok := h["tool"]; !ok {
		o.Tool = "unknown"
	}
	if _, ok := h["result"]; !ok {
		o.Result = "{}"
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(h["timestamp"]), 64); err == nil {
		o.Time = fromSeconds(f)
	}
	return o
}

// AppendToolOutput implements store.Backend: HSET tool:<session>:step_<n> tool, result, timestamp
// (and call_id, args when set) with n one more than the highest step, claimed atomically by a script so
// concurrent writers never share a step; the key gets the store's TTL as the cookbook gives its steps one.
func (c *Backend) AppendToolOutput(ctx context.Context, tenant, session string, o store.ToolOutput) (store.ToolOutput, error) {
	if err := c.checkTenant(tenant); err != nil {
		return store.ToolOutput{}, err
	}
	o.Time = o.Time.Truncate(time.Microsecond)
	steps, err := c.steps(ctx, session)
	if err != nil {
		return store.ToolOutput{}, err
	}
	n := int64(1)
	if len(steps) > 0 {
		n = steps[len(steps)-1].n + 1
	}
	args := []string{strconv.FormatInt(max(c.conn.TTL.Milliseconds(), 0), 10), "tool", o.Tool, "result", o.Result,
		"timestamp", strconv.FormatFloat(toSeconds(o.Time), 'f', 6, 64)}
	if o.CallID != "" {
		args = append(args, "call_id", o.CallID)
	}
	if o.Args != "" {
		args = append(args, "args", o.Args)
	}
	for range maxStepClaims {
		cctx, cancel, err := c.conn.Call(ctx)
		if err != nil {
			return store.ToolOutput{}, c.conn.Fail(ctx, err)
		}
		claimed, err := claimStep.Exec(cctx, c.conn.Client, []string{stepPrefix(session) + strconv.FormatInt(n, 10)}, args).AsInt64()
		cancel()
		if err != nil {
			return store.ToolOutput{}, c.conn.Fail(ctx, err)
		}
		if claimed == 1 {
			o.Seq = n
			return o, nil
		}
		n++
	}
	return store.ToolOutput{}, fmt.Errorf("valkey: session %q: no free tool step after %d tries", session, maxStepClaims)
}

// ToolOutputs implements store.Backend.
func (c *Backend) ToolOutputs(ctx context.Context, tenant, session string) ([]store.ToolOutput, error) {
	if err := c.checkTenant(tenant); err != nil {
		return nil, err
	}
	return c.toolOutputs(ctx, session)
}

// kbEntry is one element of kb:results:<session> as Loom writes it: the cookbook reads title and content.
type kbEntry struct {
	Title       *string           `json:"title,omitempty"`
	Content     string            `json:"content"`
	ID          string            `json:"id,omitempty"`
	DocumentID  string            `json:"document_id,omitempty"`
	Score       float64           `json:"score,omitempty"`
	Source      string            `json:"source,omitempty"`
	Type        string            `json:"type,omitempty"`
	Trusted     bool              `json:"trusted,omitempty"`
	StartOffset int               `json:"start,omitempty"`
	EndOffset   int               `json:"end,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// kbTitle is the title an item is written with, the one the cookbook shows as [title]: Metadata["title"] when
// the key is there (even empty), else Source when it is not empty, else none (the cookbook shows [Doc]). The
// cookbook preset of package engine renders an item's title by the same rule.
func kbTitle(k store.Knowledge) (string, bool) {
	if t, ok := k.Metadata["title"]; ok {
		return t, true
	}
	return k.Source, k.Source != ""
}

// SetKnowledge implements store.Backend: the list is replaced in one transaction. Each item is written
// with the title kbTitle gives it and, when its Source is not that title, with its Source under "source".
func (c *Backend) SetKnowledge(ctx context.Context, tenant, session string, items []store.Knowledge) error {
	if err := c.checkTenant(tenant); err != nil {
		return err
	}
	key := kbKey(session)
	cmds := []valkeygo.Completed{c.conn.Client.B().Del().Key(key).Build()}
	if len(items) > 0 {
		vals := make([]string, len(items))
		for i, k := range items {
			e := kbEntry{Content: k.Content, ID: k.ID, DocumentID: k.DocumentID, Score: k.Score,
				Type: k.Type, Trusted: k.Trusted, StartOffset: k.StartOffset, EndOffset: k.EndOffset,
				Metadata: k.Metadata}
			if title, ok := kbTitle(k); ok {
				e.Title = &title
				if k.Source != title {
					e.Source = k.Source
				}
			}
			b, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("valkey: encode knowledge %d: %w", i, err)
			}
			vals[i] = string(b)
		}
		cmds = append(cmds, c.conn.Client.B().Rpush().Key(key).Element(vals...).Build())
		cmds = append(cmds, c.pexpire(key)...)
	}
	_, err := c.conn.Tx(ctx, cmds...)
	return err
}

// kbRaw is a kb:results:<session> entry as read, every field as raw JSON for decodeKBEntry to convert.
type kbRaw struct {
	Title       json.RawMessage `json:"title"`
	Content     json.RawMessage `json:"content"`
	ID          json.RawMessage `json:"id"`
	DocumentID  json.RawMessage `json:"document_id"`
	Score       json.RawMessage `json:"score"`
	Source      json.RawMessage `json:"source"`
	Type        json.RawMessage `json:"type"`
	Trusted     json.RawMessage `json:"trusted"`
	StartOffset json.RawMessage `json:"start"`
	EndOffset   json.RawMessage `json:"end"`
	Metadata    json.RawMessage `json:"metadata"`
}

// decodeKBEntry decodes one knowledge entry leniently (see "Lenient reading" in the cookbook type's comment).
// ok is false only for an entry that is not a JSON object. Like the cookbook's d.get("content", ""), a
// missing content is "", and content that is not a string is its JSON text. Score, start and end are numbers
// or numeric strings (FT.SEARCH returns strings), else 0; trusted is true only for JSON true; metadata values
// of any type are kept, a non-string as its JSON text (3, true, {"a":1}), a null dropped; a token_counts
// field is never read.
//
// The title decides how the cookbook preset shows the item, so that it shows it as the cookbook does
// (d.get('title', 'Doc')): when the entry has a title (a null one counts as none) it is Metadata["title"],
// replacing any title in the entry's metadata, and the item's Source is the entry's "source", else the
// title. An entry without a title has no Metadata["title"] (one in its metadata is dropped) and no Source;
// its "source", if any, is kept as Metadata["source"] unless its metadata has one.
func decodeKBEntry(v string) (k store.Knowledge, ok bool) {
	var r kbRaw
	if !isObject(v) || json.Unmarshal([]byte(v), &r) != nil {
		return store.Knowledge{}, false
	}
	k.Content, _ = jsonText(r.Content)
	k.ID, _ = jsonText(r.ID)
	k.DocumentID, _ = jsonText(r.DocumentID)
	k.Type, _ = jsonText(r.Type)
	if f, ok := jsonNumber(r.Score); ok {
		k.Score = f
	}
	k.Trusted = string(r.Trusted) == "true"
	k.StartOffset, _ = jsonInt(r.StartOffset)
	k.EndOffset, _ = jsonInt(r.EndOffset)
	var meta map[string]json.RawMessage
	if len(r.Metadata) > 0 && r.Metadata[0] == '{' && json.Unmarshal(r.Metadata, &meta) == nil {
		for name, raw := range meta {
			if s, ok := jsonText(raw); ok {
				if k.Metadata == nil {
					k.Metadata = make(map[string]string, len(meta)+1)
				}
				k.Metadata[name] = s
			}
		}
	}
	// token_counts is not read: these keys are written by other programs too, so the assembler counts.
	source, _ := jsonText(r.Source)
	if title, ok := jsonText(r.Title); ok {
		k.Source = cmp.Or(source, title)
		if k.Metadata == nil {
			k.Metadata = map[string]string{}
		}
		k.Metadata["title"] = title
	} else {
		delete(k.Metadata, "title")
		if _, ok := k.Metadata["source"]; !ok && source != "" {
			if k.Metadata == nil {
				k.Metadata = map[string]string{}
			}
			k.Metadata["source"] = source
		}
	}
	if len(k.Metadata) == 0 {
		k.Metadata = nil
	}
	return k, true
}

// decodeKB decodes knowledge list values; entries decodeKBEntry cannot read are skipped.
func decodeKB(vals []string) []store.Knowledge {
	if len(vals) == 0 {
		return nil
	}
	out := make([]store.Knowledge, 0, len(vals))
	for _, v := range vals {
		if k, ok := decodeKBEntry(v); ok {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isObject reports whether v starts as a JSON object does; a JSON null, array, string or number is no
// entry (decoding null into a struct would succeed and give an empty one).
func isObject(v string) bool {
	return strings.HasPrefix(strings.TrimLeft(v, " \t\r\n"), "{")
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// jsonString is raw's value if it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// jsonText is raw as text: a string's value, else its compact JSON (a number as written, true, false, an
// object or an array). ok is false when raw is absent or null.
func jsonText(raw json.RawMessage) (string, bool) {
	if isNull(raw) {
		return "", false
	}
	if s, ok := jsonString(raw); ok {
		return s, true
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw), true
	}
	return b.String(), true
}

// jsonNumber is raw's value if it is a finite JSON number or a string holding one.
func jsonNumber(raw json.RawMessage) (float64, bool) {
	var f float64
	if s, ok := jsonString(raw); ok {
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
			return 0, false
		}
	} else if isNull(raw) || json.Unmarshal(raw, &f) != nil {
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// jsonInt is raw's value if jsonNumber reads it as a whole number an int holds.
func jsonInt(raw json.RawMessage) (int, bool) {
	f, ok := jsonNumber(raw)
	if !ok || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// Knowledge implements store.Backend.
func (c *Backend) Knowledge(ctx context.Context, tenant, session string) ([]store.Knowledge, error) {
	if err := c.checkTenant(tenant); err != nil {
		return nil, err
	}
	r, err := c.conn.Do(ctx, c.conn.Client.B().Lrange().Key(kbKey(session)).Start(0).Stop(-1).Build())
	if err != nil {
		return nil, err
	}
	vals, err := r.AsStrSlice()
	if err != nil {
		return nil, c.conn.Fail(ctx, err)
	}
	return decodeKB(vals), nil
}

// DeleteSession implements store.Backend: DEL of chat:<session>, kb:results:<session> and every step
// key, one command per key (they may live on different cluster nodes).
func (c *Backend) DeleteSession(ctx context.Context, tenant, session string) error {
	if err := c.checkTenant(tenant); err != nil {
		return err
	}
	steps, err := c.steps(ctx, session)
	if err != nil {
		return err
	}
	b := c.conn.Client.B()
	cmds := []valkeygo.Completed{b.Del().Key(chatKey(session)).Build(), b.Del().Key(kbKey(session)).Build()}
	for _, s := range steps {
		cmds = append(cmds, b.Del().Key(s.key).Build())
	}
	rs, err := c.conn.DoMulti(ctx, cmds...)
	if err != nil {
		return err
	}
	var total int64
	for _, r := range rs {
		n, err := r.AsInt64()
		if err != nil {
			return c.conn.Fail(ctx, err)
		}
		total += n
	}
	if total == 0 {
		return fmt.Errorf("session %q: %w", session, store.ErrNotFound)
	}
	return nil
}

// Load implements store.Loader: one DoMulti for the agent, the memory, the newest messages (the first page of
// readChat) and the knowledge, and concurrently the SCAN for the tool steps followed by one DoMulti that
// reads them.
func (c *Backend) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	if err := c.checkTenant(tenant); err != nil {
		return nil, err
	}
	history := q.History()
	b := c.conn.Client.B()
	var groups [][]valkeygo.Completed
	agentAt, memAt, chatAt, kbAt := -1, -1, -1, -1
	cachedAgent := q.Agent != "" && c.conn.CacheTTL > 0
	if q.Agent != "" && !cachedAgent {
		agentAt = len(groups)
		groups = append(groups, []valkeygo.Completed{b.Hgetall().Key(agentConfigKey(q.Agent)).Build()})
	}
	if q.User != "" {
		memAt = len(groups)
		groups = append(groups, c.factCmds(q.User))
	}
	if q.Session != "" {
		chatAt = len(groups)
		cmds, _ := c.chatPageCmds(chatKey(q.Session), 0, store.FirstPageSize(history))
		groups = append(groups, cmds)
		kbAt = len(groups)
		groups = append(groups, []valkeygo.Completed{b.Lrange().Key(kbKey(q.Session)).Start(0).Stop(-1).Build()})
	}

	var (
		wg                 sync.WaitGroup
		agentRes           valkeygo.ValkeyResult
		agentErr, toolsErr error
		tools              []store.ToolOutput
	)
	if cachedAgent {
		wg.Go(func() { agentRes, agentErr = c.getAgent(ctx, q.Agent) })
	}
	if q.Session != "" {
		wg.Go(func() { tools, toolsErr = c.toolOutputs(ctx, q.Session) })
	}
	var rs [][]valkeygo.ValkeyResult
	var err error
	if len(groups) > 0 {
		rs, err = c.conn.DoGroups(ctx, groups...)
	} else if err = c.conn.Alive(ctx); err != nil {
		err = c.conn.Fail(ctx, err)
	}
	wg.Wait()
	for _, e := range []error{err, agentErr, toolsErr} {
		if e != nil && conn.Whole(e) {
			return nil, e
		}
	}
	if err != nil {
		return nil, err
	}
	snap := &store.Snapshot{Errors: map[store.Source]error{}}
	if agentAt >= 0 {
		agentRes = rs[agentAt][0]
	}
	if q.Agent != "" {
		if agentErr != nil {
			snap.Errors[store.SourceAgent] = agentErr
		} else if a, err := c.decodeAgent(ctx, q.Agent, agentRes); err != nil {
			snap.Errors[store.SourceAgent] = err
		} else {
			snap.Agent = &a
		}
	}
	if memAt >= 0 {
		if snap.Facts, err = c.decodeFacts(ctx, rs[memAt]); err != nil {
			snap.Errors[store.SourceMemory] = err
		}
	}
	if chatAt >= 0 {
		if msgs, next, err := c.readChat(ctx, chatKey(q.Session), history, rs[chatAt]); err != nil {
			if conn.Whole(err) {
				return nil, err
			}
			snap.Errors[store.SourceHistory] = err
		} else {
			snap.Messages, snap.NextBefore = msgs, next
		}
		if vals, err := rs[kbAt][0].AsStrSlice(); err != nil {
			snap.Errors[store.SourceKnowledge] = c.conn.Fail(ctx, err)
		} else {
			snap.Knowledge = decodeKB(vals)
		}
		if toolsErr != nil {
			snap.Errors[store.SourceToolOutputs] = toolsErr
		} else {
			snap.ToolOutputs = tools
		}
	}
	return snap, nil
}

// FactsOrdered implements store.OrderedFacts: a memory hash's facts come in the server's order (insertion
// order for small hashes), as the cookbook shows them.
func (c *Backend) FactsOrdered() bool { return true }

// Ping implements store.Backend: PING, and the run_id of every primary.
func (c *Backend) Ping(ctx context.Context) error { return c.conn.Ping(ctx) }

// Close implements store.Backend: it closes the connections, waiting for calls in flight.
func (c *Backend) Close() error { return c.conn.Close() }
