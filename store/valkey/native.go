package valkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/internal/conn"
)

// Backend is the store.Backend of LayoutNative: Loom's own keys. It is also a store.MessageSelector (it
// counts on the server and returns only the messages kept), a store.Loader (one DoMulti), a
// store.CollectionBackend and a collection.Epocher. It is safe for concurrent use.
type Backend struct {
	conn   *conn.Conn
	prefix string
	maxLen string // the change stream's MAXLEN ~, from store.Options.ChangesKept
}

// escape percent-encodes the bytes of id that could break a key's structure: '%', ':', '{', '}', space and
// control bytes. It is injective, so distinct ids give distinct keys.
func escape(id string) string {
	n := 0
	for i := 0; i < len(id); i++ {
		if mustEscape(id[i]) {
			n++
		}
	}
	if n == 0 {
		return id
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(id)+2*n)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if mustEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

// unescape is escape's inverse; ok is false for a string escape cannot have made.
func unescape(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, escape(s) == s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b = append(b, byte(v))
		i += 2
	}
	out := string(b)
	return out, escape(out) == s
}

func mustEscape(c byte) bool {
	return c <= ' ' || c == 0x7f || c == '%' || c == ':' || c == '{' || c == '}'
}

// sessionKeys are the keys of one session; they share a hash tag.
type sessionKeys struct{ msgs, tools, kb, summary, asms, cache string }

func (n *Backend) session(tenant, session string) sessionKeys {
	base := n.prefix + ":{t:" + escape(tenant) + ":s:" + escape(session) + "}:"
	return sessionKeys{base + "msgs", base + "tools", base + "kb", base + "summary", base + "asms", base + "cache"}
}

func (n *Backend) memKey(tenant, user string) string {
	return n.prefix + ":{t:" + escape(tenant) + ":u:" + escape(user) + "}:mem"
}

// recordedKey is the tenant's index of the sessions that have recorded assemblies (a sorted set: session
// id -> its newest record's time in Unix microseconds).
func (n *Backend) recordedKey(tenant string) string {
	return n.prefix + ":{t:" + escape(tenant) + "}:recorded"
}

func (n *Backend) agentKey(tenant, id string) string {
	return n.prefix + ":{t:" + escape(tenant) + "}:agent:" + escape(id)
}

// PutAgent implements store.Backend: the agent's hash (see agentFields), replaced in one MULTI.
func (n *Backend) PutAgent(ctx context.Context, tenant string, a store.Agent) error {
	fields, err := conn.AgentFields(a, "instructions")
	if err != nil {
		return err
	}
	key := n.agentKey(tenant, a.ID)
	h := n.conn.Client.B().Hset().Key(key).FieldValue()
	for i := 0; i < len(fields); i += 2 {
		h = h.FieldValue(fields[i], fields[i+1])
	}
	_, err = n.conn.Tx(ctx, n.conn.Client.B().Del().Key(key).Build(), h.Build())
	return err
}

// getAgent reads an agent's hash: from the client-side cache when it is on.
func (n *Backend) getAgent(ctx context.Context, tenant, id string) (valkeygo.ValkeyResult, error) {
	if n.conn.CacheTTL <= 0 {
		return n.conn.Do(ctx, n.conn.Client.B().Hgetall().Key(n.agentKey(tenant, id)).Build())
	}
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return valkeygo.ValkeyResult{}, n.conn.Fail(ctx, err)
	}
	defer cancel()
	r := n.conn.Client.DoCache(cctx, n.conn.Client.B().Hgetall().Key(n.agentKey(tenant, id)).Cache(), n.conn.CacheTTL)
	if err := r.NonValkeyError(); err != nil {
		return r, n.conn.Fail(ctx, err)
	}
	return r, nil
}

// GetAgent implements store.Backend.
func (n *Backend) GetAgent(ctx context.Context, tenant, id string) (store.Agent, error) {
	r, err := n.getAgent(ctx, tenant, id)
	if err != nil {
		return store.Agent{}, err
	}
	return n.decodeAgent(ctx, tenant, id, r)
}

func (n *Backend) decodeAgent(ctx context.Context, tenant, id string, r valkeygo.ValkeyResult) (store.Agent, error) {
	h, err := r.AsStrMap()
	if err != nil {
		if isWrongType(err) {
			return n.legacyAgent(ctx, tenant, id)
		}
		return store.Agent{}, n.conn.Fail(ctx, err)
	}
	return conn.DecodeAgentHash(id, h, "instructions")
}

// legacyAgent reads an agent that an earlier Loom stored as one JSON string (before agents were hashes);
// the next PutAgent of it writes the hash.
func (n *Backend) legacyAgent(ctx context.Context, tenant, id string) (store.Agent, error) {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Get().Key(n.agentKey(tenant, id)).Build())
	if err != nil {
		return store.Agent{}, err
	}
	b, err := r.AsBytes()
	if valkeygo.IsValkeyNil(err) { // deleted meanwhile
		return store.Agent{}, fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Agent{}, n.conn.Fail(ctx, err)
	}
	var a store.Agent
	if err := json.Unmarshal(b, &a); err != nil {
		return store.Agent{}, fmt.Errorf("valkey: decode agent %q: %w", id, err)
	}
	a.ID = id
	return a, nil
}

// isWrongType reports whether err is the server's WRONGTYPE error (a key holding another type).
func isWrongType(err error) bool {
	var ve *valkeygo.ValkeyError
	return errors.As(err, &ve) && strings.HasPrefix(ve.Error(), "WRONGTYPE")
}

// DeleteAgent implements store.Backend.
func (n *Backend) DeleteAgent(ctx context.Context, tenant, id string) error {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Del().Key(n.agentKey(tenant, id)).Build())
	return n.conn.Deleted(ctx, r, err, "agent", id)
}

// SetFact implements store.Backend.
func (n *Backend) SetFact(ctx context.Context, tenant, user string, f store.Fact) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("valkey: encode fact %q: %w", f.Key, err)
	}
	_, err = n.conn.Do(ctx, n.conn.Client.B().Hset().Key(n.memKey(tenant, user)).FieldValue().FieldValue(f.Key, string(b)).Build())
	return err
}

// Facts implements store.Backend.
func (n *Backend) Facts(ctx context.Context, tenant, user string) ([]store.Fact, error) {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Hgetall().Key(n.memKey(tenant, user)).Build())
	if err != nil {
		return nil, err
	}
	m, err := r.AsStrMap()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	return decodeFacts(m)
}

func decodeFacts(m map[string]string) ([]store.Fact, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make([]store.Fact, 0, len(m))
	for k, v := range m {
		var f store.Fact
		if err := json.Unmarshal([]byte(v), &f); err != nil {
			return nil, fmt.Errorf("valkey: decode fact %q: %w", k, err)
		}
		f.Key = k
		out = append(out, f)
	}
	return out, nil
}

// DeleteFact implements store.Backend.
func (n *Backend) DeleteFact(ctx context.Context, tenant, user, key string) error {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Hdel().Key(n.memKey(tenant, user)).Field(key).Build())
	return n.conn.Deleted(ctx, r, err, "fact", key)
}

// write runs cmds on a session's keys in one transaction that ends by refreshing the TTL of all of them,
// and returns the commands' replies.
func (n *Backend) write(ctx context.Context, k sessionKeys, cmds ...valkeygo.Completed) ([]valkeygo.ValkeyMessage, error) {
	if n.conn.TTL > 0 {
		ms := n.conn.TTL.Milliseconds()
		for _, key := range []string{k.msgs, k.tools, k.kb, k.summary, k.asms, k.cache} {
			cmds = append(cmds, n.conn.Client.B().Pexpire().Key(key).Milliseconds(ms).Build())
		}
	}
	return n.conn.Tx(ctx, cmds...)
}

// appendMessages appends a batch of messages to a session's list atomically, numbering them from the
// list's length: each value (a JSON object without seq) is stored with "seq" as its first member, so that a
// read of the newest N needs no LLEN beside it. Then it refreshes the TTL of all of the session's keys.
// KEYS are the session's msgs, tools, kb, summary, asms and cache; ARGV[1] is the TTL in milliseconds (0:
// none), the rest the values. A session that starts (again: its messages expired) has no summary or cache
// state left over. It returns the list's new length.
var appendMessages = valkeygo.NewLuaScript(`
local n = redis.call('LLEN', KEYS[1])
if n == 0 then redis.call('DEL', KEYS[4], KEYS[6]) end
local batch = {}
for i = 2, #ARGV do
  batch[#batch + 1] = '{"seq":' .. string.format('%d', n + i - 1) .. ',' .. string.sub(ARGV[i], 2)
  if #batch == 500 then
    redis.call('RPUSH', KEYS[1], unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call('RPUSH', KEYS[1], unpack(batch)) end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return n + #ARGV - 1
`)

// AppendMessages implements store.Backend with one script (appendMessages): atomic, seqs contiguous.
func (n *Backend) AppendMessages(ctx context.Context, tenant, session string, msgs []store.Message) ([]store.Message, error) {
	args := make([]string, 1, len(msgs)+1)
	args[0] = strconv.FormatInt(max(n.conn.TTL.Milliseconds(), 0), 10)
	for i, m := range msgs {
		b, err := json.Marshal(m) // Seq is 0: omitted, so b starts with {"role":
		if err != nil {
			return nil, fmt.Errorf("valkey: encode message %d: %w", i, err)
		}
		args = append(args, string(b))
	}
	k := n.session(tenant, session)
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	defer cancel()
	length, err := appendMessages.Exec(cctx, n.conn.Client, []string{k.msgs, k.tools, k.kb, k.summary, k.asms, k.cache}, args).AsInt64()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	for i := range msgs {
		msgs[i].Seq = length - int64(len(msgs)) + int64(i) + 1
	}
	return msgs, nil
}

// SelectMessages implements store.MessageSelector: one LRANGE, or with q.MaxTokens a script that counts on
// the server and returns only the messages kept (see readMessages).
func (n *Backend) SelectMessages(ctx context.Context, tenant, session string, q store.MessageQuery) ([]store.Message, int64, error) {
	return n.readMessages(ctx, n.session(tenant, session).msgs, q, nil)
}

// ReadMessages implements store.Backend: one LRANGE.
func (n *Backend) ReadMessages(ctx context.Context, tenant, session string, before int64, size int) ([]store.Message, int64, error) {
	return n.readMessages(ctx, n.session(tenant, session).msgs, store.MessageQuery{Before: before, Limit: size}, nil)
}

// decodeMessages decodes a message list's values; each has its seq.
func decodeMessages(vals []string) ([]store.Message, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := make([]store.Message, len(vals))
	for i, v := range vals {
		if err := decodeMessage(v, &out[i]); err != nil {
			return nil, fmt.Errorf("valkey: decode message: %w", err)
		}
	}
	return out, nil
}

// AppendToolOutput implements store.Backend.
func (n *Backend) AppendToolOutput(ctx context.Context, tenant, session string, o store.ToolOutput) (store.ToolOutput, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return store.ToolOutput{}, fmt.Errorf("valkey: encode tool output: %w", err)
	}
	k := n.session(tenant, session)
	rs, err := n.write(ctx, k, n.conn.Client.B().Rpush().Key(k.tools).Element(string(b)).Build())
	if err != nil {
		return store.ToolOutput{}, err
	}
	if o.Seq, err = rs[0].AsInt64(); err != nil {
		return store.ToolOutput{}, n.conn.Fail(ctx, err)
	}
	return o, nil
}

// ToolOutputs implements store.Backend.
func (n *Backend) ToolOutputs(ctx context.Context, tenant, session string) ([]store.ToolOutput, error) {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Lrange().Key(n.session(tenant, session).tools).Start(0).Stop(-1).Build())
	if err != nil {
		return nil, err
	}
	vals, err := r.AsStrSlice()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	return decodeToolOutputs(vals)
}

func decodeToolOutputs(vals []string) ([]store.ToolOutput, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := make([]store.ToolOutput, len(vals))
	for i, v := range vals {
		if err := json.Unmarshal([]byte(v), &out[i]); err != nil {
			return nil, fmt.Errorf("valkey: decode tool output %d: %w", i+1, err)
		}
		out[i].Seq = int64(i + 1)
	}
	return out, nil
}

// SetKnowledge implements store.Backend.
func (n *Backend) SetKnowledge(ctx context.Context, tenant, session string, items []store.Knowledge) error {
	k := n.session(tenant, session)
	cmds := []valkeygo.Completed{n.conn.Client.B().Del().Key(k.kb).Build()}
	if len(items) > 0 {
		vals := make([]string, len(items))
		for i, it := range items {
			b, err := json.Marshal(it)
			if err != nil {
				return fmt.Errorf("valkey: encode knowledge %d: %w", i, err)
			}
			vals[i] = string(b)
		}
		cmds = append(cmds, n.conn.Client.B().Rpush().Key(k.kb).Element(vals...).Build())
	}
	_, err := n.write(ctx, k, cmds...)
	return err
}

// Knowledge implements store.Backend.
func (n *Backend) Knowledge(ctx context.Context, tenant, session string) ([]store.Knowledge, error) {
	r, err := n.conn.Do(ctx, n.conn.Client.B().Lrange().Key(n.session(tenant, session).kb).Start(0).Stop(-1).Build())
	if err != nil {
		return nil, err
	}
	vals, err := r.AsStrSlice()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	return decodeKnowledge(vals)
}

func decodeKnowledge(vals []string) ([]store.Knowledge, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := make([]store.Knowledge, len(vals))
	for i, v := range vals {
		if err := decodeKnowledgeItem(v, &out[i]); err != nil {
			return nil, fmt.Errorf("valkey: decode knowledge %d: %w", i, err)
		}
	}
	return out, nil
}

// DeleteSession implements store.Backend: one DEL of the session's keys (one slot).
func (n *Backend) DeleteSession(ctx context.Context, tenant, session string) error {
	k := n.session(tenant, session)
	b := n.conn.Client.B()
	// The session leaves the tenant's index of recorded sessions too (a listing would skip it anyway).
	rs, err := n.conn.DoMulti(ctx, b.Del().Key(k.msgs, k.tools, k.kb, k.summary, k.asms, k.cache).Build(),
		b.Zrem().Key(n.recordedKey(tenant)).Member(session).Build())
	if err != nil {
		return n.conn.Deleted(ctx, valkeygo.ValkeyResult{}, err, "session", session)
	}
	return n.conn.Deleted(ctx, rs[0], nil, "session", session)
}

// Load implements store.Loader with one DoMulti: HGETALL of the agent and of the user's memory, the
// messages' first command (see readMessages: an LRANGE, or the script that counts them), and LRANGE of the
// tool outputs and the knowledge. With the agent cache on, the agent comes from the cache, or on a miss
// from an HGETALL sent concurrently.
func (n *Backend) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	history := q.History()
	b := n.conn.Client.B()
	cmds := make([]valkeygo.Completed, 0, 5)
	agentAt, memAt, sessAt := -1, -1, -1
	cachedAgent := q.Agent != "" && n.conn.CacheTTL > 0
	if q.Agent != "" && !cachedAgent {
		agentAt = len(cmds)
		cmds = append(cmds, b.Hgetall().Key(n.agentKey(tenant, q.Agent)).Build())
	}
	if q.User != "" {
		memAt = len(cmds)
		cmds = append(cmds, b.Hgetall().Key(n.memKey(tenant, q.User)).Build())
	}
	if q.Session != "" {
		k := n.session(tenant, q.Session)
		sessAt = len(cmds)
		cmds = append(cmds, n.firstCmd(k.msgs, history),
			b.Lrange().Key(k.tools).Start(0).Stop(-1).Build(),
			b.Lrange().Key(k.kb).Start(0).Stop(-1).Build())
		if q.Summary {
			cmds = append(cmds, b.Hmget().Key(k.summary).Field("rev", "v").Build())
		}
		if q.CacheState {
			cmds = append(cmds, b.Get().Key(k.cache).Build())
		}
	}

	var (
		wg       sync.WaitGroup
		agentRes valkeygo.ValkeyResult
		agentErr error
	)
	if cachedAgent {
		wg.Go(func() { agentRes, agentErr = n.getAgent(ctx, tenant, q.Agent) })
	}
	var rs []valkeygo.ValkeyResult
	var err error
	if len(cmds) > 0 {
		rs, err = n.conn.DoMulti(ctx, cmds...)
	} else if err = n.conn.Alive(ctx); err != nil {
		err = n.conn.Fail(ctx, err)
	}
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if agentErr != nil {
		return nil, agentErr
	}

	snap := &store.Snapshot{Errors: map[store.Source]error{}}
	if agentAt >= 0 {
		agentRes = rs[agentAt]
	}
	if q.Agent != "" {
		if a, err := n.decodeAgent(ctx, tenant, q.Agent, agentRes); err != nil {
			snap.Errors[store.SourceAgent] = err
		} else {
			snap.Agent = &a
		}
	}
	if memAt >= 0 {
		m, err := rs[memAt].AsStrMap()
		if err == nil {
			snap.Facts, err = decodeFacts(m)
		} else {
			err = n.conn.Fail(ctx, err)
		}
		if err != nil {
			snap.Errors[store.SourceMemory] = err
		}
	}
	if sessAt >= 0 {
		if msgs, next, err := n.readMessages(ctx, n.session(tenant, q.Session).msgs, history, &rs[sessAt]); err != nil {
			if conn.Whole(err) {
				return nil, err
			}
			snap.Errors[store.SourceHistory] = err
		} else {
			snap.Messages, snap.NextBefore = msgs, next
		}
		if vals, err := rs[sessAt+1].AsStrSlice(); err != nil {
			snap.Errors[store.SourceToolOutputs] = n.conn.Fail(ctx, err)
		} else if snap.ToolOutputs, err = decodeToolOutputs(vals); err != nil {
			snap.Errors[store.SourceToolOutputs] = err
		}
		if vals, err := rs[sessAt+2].AsStrSlice(); err != nil {
			snap.Errors[store.SourceKnowledge] = n.conn.Fail(ctx, err)
		} else if snap.Knowledge, err = decodeKnowledge(vals); err != nil {
			snap.Errors[store.SourceKnowledge] = err
		}
		if q.Summary {
			switch sum, err := n.decodeSummary(ctx, q.Session, rs[sessAt+3]); {
			case err == nil:
				snap.Summary = &sum
			case !errors.Is(err, store.ErrNotFound):
				snap.Errors[store.SourceSummary] = err
			}
		}
		if q.CacheState {
			at := sessAt + 3
			if q.Summary {
				at++
			}
			switch state, err := n.decodeCacheState(ctx, q.Session, rs[at]); {
			case err == nil:
				snap.CacheState = state
			case !errors.Is(err, store.ErrNotFound):
				snap.Errors[store.SourceCacheState] = err
			}
		}
	}
	return snap, nil
}

// decodeSummary decodes the reply of HMGET summary rev v; ErrNotFound when there is none.
func (n *Backend) decodeSummary(ctx context.Context, session string, r valkeygo.ValkeyResult) (store.Summary, error) {
	vals, err := r.ToArray()
	if err != nil {
		return store.Summary{}, n.conn.Fail(ctx, err)
	}
	if len(vals) != 2 || vals[0].IsNil() || vals[1].IsNil() {
		return store.Summary{}, fmt.Errorf("summary of session %q: %w", session, store.ErrNotFound)
	}
	revText, err1 := vals[0].ToString()
	data, err2 := vals[1].ToString()
	if err := errors.Join(err1, err2); err != nil {
		return store.Summary{}, n.conn.Fail(ctx, err)
	}
	rev, err := strconv.ParseInt(revText, 10, 64)
	if err != nil {
		return store.Summary{}, fmt.Errorf("valkey: decode summary revision: %w", err)
	}
	var sum store.Summary
	if err := json.Unmarshal([]byte(data), &sum); err != nil {
		return store.Summary{}, fmt.Errorf("valkey: decode summary: %w", err)
	}
	sum.Rev = rev
	return sum, nil
}

// Summary implements store.SummaryBackend: one HMGET.
func (n *Backend) Summary(ctx context.Context, tenant, session string) (store.Summary, error) {
	k := n.session(tenant, session)
	cmd := n.conn.Client.B().Hmget().Key(k.summary).Field("rev", "v").Build()
	rs, err := n.conn.DoMulti(ctx, cmd)
	if err != nil {
		return store.Summary{}, err
	}
	return n.decodeSummary(ctx, session, rs[0])
}

// swapSummary writes a session's summary hash {rev, v} if its rev is ARGV[1] (none: "0"), with the TTL
// that the session's messages have left, so that it expires with them. KEYS are the session's summary and
// msgs; ARGV[2] is the new rev, ARGV[3] the summary's JSON. It returns 1 when it wrote, 0 when the rev
// did not match, -1 when the session has no messages.
var swapSummary = valkeygo.NewLuaScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local cur = redis.call('HGET', KEYS[1], 'rev')
if not cur then cur = '0' end
if cur ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'v', ARGV[3])
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
return 1
`)

// SwapSummary implements store.SummaryBackend with one script (swapSummary), atomic on the server.
func (n *Backend) SwapSummary(ctx context.Context, tenant, session string, rev int64, sum store.Summary) (bool, error) {
	data, err := json.Marshal(sum)
	if err != nil {
		return false, fmt.Errorf("valkey: encode summary: %w", err)
	}
	k := n.session(tenant, session)
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return false, n.conn.Fail(ctx, err)
	}
	defer cancel()
	args := []string{strconv.FormatInt(rev, 10), strconv.FormatInt(sum.Rev, 10), string(data)}
	got, err := swapSummary.Exec(cctx, n.conn.Client, []string{k.summary, k.msgs}, args).AsInt64()
	switch {
	case err != nil:
		return false, n.conn.Fail(ctx, err)
	case got < 0:
		return false, fmt.Errorf("session %q: %w", session, store.ErrNotFound)
	}
	return got == 1, nil
}

// decodeCacheState decodes the reply of GET cache; ErrNotFound when there is none.
func (n *Backend) decodeCacheState(ctx context.Context, session string, r valkeygo.ValkeyResult) ([]byte, error) {
	b, err := r.AsBytes()
	switch {
	case valkeygo.IsValkeyNil(err):
		return nil, fmt.Errorf("cache state of session %q: %w", session, store.ErrNotFound)
	case err != nil:
		return nil, n.conn.Fail(ctx, err)
	}
	return b, nil
}

// CacheState implements store.CacheStateBackend: one GET.
func (n *Backend) CacheState(ctx context.Context, tenant, session string) ([]byte, error) {
	k := n.session(tenant, session)
	rs, err := n.conn.DoMulti(ctx, n.conn.Client.B().Get().Key(k.cache).Build())
	if err != nil {
		return nil, err
	}
	return n.decodeCacheState(ctx, session, rs[0])
}

// putCacheState sets a session's cache state to ARGV[1], with the TTL that the session's messages have
// left, so that it expires with them. KEYS are the session's cache and msgs. It returns 1 when it wrote,
// -1 when the session has no messages.
var putCacheState = valkeygo.NewLuaScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl) else redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`)

// PutCacheState implements store.CacheStateBackend with one script (putCacheState), atomic on the server.
func (n *Backend) PutCacheState(ctx context.Context, tenant, session string, state []byte) error {
	k := n.session(tenant, session)
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return n.conn.Fail(ctx, err)
	}
	defer cancel()
	got, err := putCacheState.Exec(cctx, n.conn.Client, []string{k.cache, k.msgs}, []string{string(state)}).AsInt64()
	switch {
	case err != nil:
		return n.conn.Fail(ctx, err)
	case got < 0:
		return fmt.Errorf("session %q: %w", session, store.ErrNotFound)
	}
	return nil
}

// recordAssembly pushes an assembly record on the head of a session's list of them (newest first), as its
// JSON object (ARGV[3]) with "seq" as its first member, the seq after the newest one's; trims the list to
// ARGV[2] records and refreshes the TTL (ARGV[1] milliseconds, 0: none) of all of the session's keys,
// KEYS, the first of which is the list. It returns the record's seq.
var recordAssembly = valkeygo.NewLuaScript(`
local seq = 1
local top = redis.call('LINDEX', KEYS[1], 0)
if top then seq = tonumber(string.match(top, '^{"seq":(%d+),')) + 1 end
redis.call('LPUSH', KEYS[1], '{"seq":' .. string.format('%d', seq) .. ',' .. string.sub(ARGV[3], 2))
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return seq
`)

// RecordAssembly implements store.AssemblyBackend with one script (recordAssembly), atomic on the server.
func (n *Backend) RecordAssembly(ctx context.Context, tenant, session string, rec store.AssemblyRecord, keep int) (store.AssemblyRecord, error) {
	// Written by hand, not by json.Marshal, which would escape the data's HTML characters: the data is kept
	// byte for byte as given.
	b, err := json.Marshal(rec.Time)
	if err != nil {
		return store.AssemblyRecord{}, fmt.Errorf("valkey: encode assembly record: %w", err)
	}
	b = append(append(append(append([]byte(`{"time":`), b...), `,"data":`...), rec.Data...), '}')
	k := n.session(tenant, session)
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return store.AssemblyRecord{}, n.conn.Fail(ctx, err)
	}
	defer cancel()
	args := []string{strconv.FormatInt(max(n.conn.TTL.Milliseconds(), 0), 10), strconv.Itoa(keep), string(b)}
	seq, err := recordAssembly.Exec(cctx, n.conn.Client, []string{k.asms, k.msgs, k.tools, k.kb, k.summary, k.cache}, args).AsInt64()
	if err != nil {
		return store.AssemblyRecord{}, n.conn.Fail(ctx, err)
	}
	rec.Seq = seq
	// Then the session is indexed by its newest record's time (GT: a slower concurrent record does not
	// move it back), and the index is cut to its newest recordedKept. Written after the record, the index
	// never names a session whose newest record is not written yet.
	cmd, idx := n.conn.Client.B(), n.recordedKey(tenant)
	_, err = n.conn.DoMulti(ctx, cmd.Zadd().Key(idx).Gt().ScoreMember().ScoreMember(float64(rec.Time.UnixMicro()), session).Build(),
		cmd.Zremrangebyrank().Key(idx).Start(0).Stop(-recordedKept-1).Build())
	if err != nil {
		return store.AssemblyRecord{}, err
	}
	return rec, nil
}

// recordedKept bounds a tenant's index of recorded sessions: its newest 1000 are kept.
const recordedKept = 1000

// assemblyHead reads a session's records list (KEYS[1]) for a listing: {count, newest seq, newest time}
// (the seq and time as the record's JSON begins with them), or 0 when it has none.
var assemblyHead = valkeygo.NewLuaScript(`
local top = redis.call('LINDEX', KEYS[1], 0)
if not top then return 0 end
return {redis.call('LLEN', KEYS[1]), string.match(top, '^{"seq":(%d+),"time":"([^"]*)"')}
`)

// pruneRecorded removes session ARGV[1] from the index KEYS[1] if its score is still ARGV[2]: a session
// recorded again since a listing found it empty keeps its place.
var pruneRecorded = valkeygo.NewLuaScript(`
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
`)

// AssemblySessions implements store.AssemblyBackend from the tenant's index of recorded sessions: the
// newest entries read a page at a time (ZRANGE REV), each page's sessions looked at with one script each
// (assemblyHead) in one pipeline, and those whose records are gone pruned from the index, until limit
// live ones are found or the index (at most recordedKept) is read.
func (n *Backend) AssemblySessions(ctx context.Context, tenant string, limit int) ([]store.AssemblySession, error) {
	b, idx := n.conn.Client.B(), n.recordedKey(tenant)
	var out []store.AssemblySession
	seen := map[string]bool{}
	// read bounds the entries read: concurrent records and deletes move entries while a listing pages.
	for start, read := int64(0), 0; len(out) < limit && start < recordedKept && read < 2*recordedKept; {
		page := int64(limit - len(out))
		r, err := n.conn.Do(ctx, b.Zrange().Key(idx).Min(strconv.FormatInt(start, 10)).Max(strconv.FormatInt(start+page-1, 10)).Rev().Withscores().Build())
		if err != nil {
			return nil, err
		}
		entries, err := r.AsZScores()
		if err != nil {
			return nil, n.conn.Fail(ctx, err)
		}
		if len(entries) == 0 {
			break
		}
		start, read = start+int64(len(entries)), read+len(entries)
		heads := make([]valkeygo.LuaExec, len(entries))
		for i, e := range entries {
			heads[i] = valkeygo.LuaExec{Keys: []string{n.session(tenant, e.Member).asms}}
		}
		var prune []valkeygo.LuaExec
		got, err := n.execMulti(ctx, assemblyHead, heads)
		if err != nil {
			return nil, err
		}
		for i, g := range got {
			a, ok, err := decodeAssemblyHead(entries[i].Member, g)
			if err != nil {
				return nil, n.conn.Fail(ctx, err)
			}
			if !ok {
				prune = append(prune, valkeygo.LuaExec{Keys: []string{idx}, Args: []string{entries[i].Member, strconv.FormatFloat(entries[i].Score, 'f', -1, 64)}})
				continue
			}
			if !seen[a.Session] {
				seen[a.Session] = true
				out = append(out, a)
			}
		}
		if len(prune) > 0 {
			if _, err := n.execMulti(ctx, pruneRecorded, prune); err != nil {
				return nil, err
			}
			start -= int64(len(prune)) // the pruned entries' places are taken by the next ones
		}
	}
	slices.SortFunc(out, store.CompareAssemblySessions)
	return out, nil
}

// execMulti runs script once for each of execs in one pipeline, within the store's timeout.
func (n *Backend) execMulti(ctx context.Context, script *valkeygo.Lua, execs []valkeygo.LuaExec) ([]valkeygo.ValkeyResult, error) {
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	defer cancel()
	rs := script.ExecMulti(cctx, n.conn.Client, execs...)
	for _, r := range rs {
		if err := r.Error(); err != nil {
			return nil, n.conn.Fail(ctx, err)
		}
	}
	return rs, nil
}

// decodeAssemblyHead decodes assemblyHead's reply for session; ok is false when it has no records.
func decodeAssemblyHead(session string, r valkeygo.ValkeyResult) (store.AssemblySession, bool, error) {
	if n, err := r.AsInt64(); err == nil && n == 0 {
		return store.AssemblySession{}, false, nil
	}
	vs, err := r.ToArray()
	if err != nil {
		return store.AssemblySession{}, false, err
	}
	if len(vs) != 3 {
		return store.AssemblySession{}, false, fmt.Errorf("valkey: the newest assembly record of session %q does not begin with its seq and time", session)
	}
	count, err := vs[0].AsInt64()
	if err != nil {
		return store.AssemblySession{}, false, err
	}
	seq, err := vs[1].AsInt64()
	if err != nil {
		return store.AssemblySession{}, false, err
	}
	ts, err := vs[2].ToString()
	if err != nil {
		return store.AssemblySession{}, false, err
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return store.AssemblySession{}, false, fmt.Errorf("valkey: the newest assembly record of session %q: %w", session, err)
	}
	return store.AssemblySession{Session: session, Assemblies: int(count), LastSeq: seq, LastTime: t.UTC()}, true, nil
}

// assemblyValue is an assembly record as the list keeps it (the script puts "seq" first).
type assemblyValue struct {
	Seq  int64           `json:"seq,omitempty"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// Assemblies implements store.AssemblyBackend: one LRANGE.
func (n *Backend) Assemblies(ctx context.Context, tenant, session string) ([]store.AssemblyRecord, error) {
	k := n.session(tenant, session)
	r, err := n.conn.Do(ctx, n.conn.Client.B().Lrange().Key(k.asms).Start(0).Stop(-1).Build())
	if err != nil {
		return nil, err
	}
	vals, err := r.AsStrSlice()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	out := make([]store.AssemblyRecord, 0, len(vals))
	for i, v := range vals {
		var a assemblyValue
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			return nil, fmt.Errorf("valkey: decode assembly record %d: %w", i, err)
		}
		out = append(out, store.AssemblyRecord{Seq: a.Seq, Time: a.Time.UTC(), Data: a.Data})
	}
	return out, nil
}
