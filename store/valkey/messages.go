package valkey

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/internal/conn"
	"github.com/context-loom/loom/tokenizer"
)

// How a store.MessageQuery is answered. A session's messages are a list whose value at index i has seq i+1
// (values are only ever appended; the list goes as a whole). A query without MaxTokens is one LRANGE. With
// MaxTokens, the server counts (countBack): the values carry their counts, so only the messages kept come
// back. In the estimate, which the values have no counts for, they are read a page at a time
// (store.ReadNewest), as package cookbook reads its chat lists, whose values have no counts at all.

// countBackSrc walks a native message list newest first, from the message before seq ARGV[1] (0: from the
// newest), and keeps values while at most ARGV[2] of them (0: no limit) cost at most ARGV[3] tokens as
// store.MessageTokens counts them: the count named ARGV[4] in the value's token_counts, plus ARGV[5], plus
// with ARGV[6] > 0 the length of its tool_calls array over ARGV[6]. It returns {stop, uncounted, sum,
// values...}: the kept values newest first and what they cost; stop is the seq of the newest message not
// kept (0 when the walk reached the list's start), and uncounted is 1 when that message has no such count
// (the caller counts it and goes on).
//
// The keys are found as text: json.Marshal writes them in this order (name, tool_calls, tool_call_id, ts,
// token_counts), and none of `"tool_calls":[`, `"tool_call_id":"`, `"ts":"`, `"token_counts":{` and an
// encoding's `"o200k_base":` can occur inside a string, whose quotes are escaped: the last is a key of
// token_counts alone.
const countBackSrc = `
local key = KEYS[1]
local len = redis.call('LLEN', key)
local before, limit, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local field, overhead, perToken = '"' .. ARGV[4] .. '":', tonumber(ARGV[5]), tonumber(ARGV[6])
local seq = len
if before > 0 and before <= len then seq = before - 1 end
local out = {0, 0, 0}
local sum, kept, chunk = 0, 0, 16
while seq >= 1 and (limit == 0 or kept < limit) do
  -- The values at seq-n+1..seq, a chunk at a time: no more than the bound could keep (a message costs at
  -- least overhead), and more as the walk goes on.
  local n = math.min(chunk, seq, math.floor((budget - sum) / overhead) + 1)
  if limit > 0 then n = math.min(n, limit - kept) end
  local vals = redis.call('LRANGE', key, seq - n, seq - 1)
  if #vals == 0 then break end
  for i = #vals, 1, -1 do
    local v = vals[i]
    local at = string.find(v, field, math.max(1, #v - 128), true) or string.find(v, field, 1, true)
    local c = at and tonumber(string.match(v, '^%d+', at + #field))
    if not c then
      out[1], out[2], out[3] = seq, 1, sum
      return out
    end
    c = c + overhead
    if perToken > 0 and string.find(v, '^{"seq":%d+,"role":"assistant"') then -- only an assistant calls tools
      local tc = string.find(v, '"tool_calls":[', 1, true)
      if tc then
        local e = string.find(v, '"tool_call_id":"', tc, true) or string.find(v, '"ts":"', tc, true) or string.find(v, '"token_counts":{', tc, true) or at
        c = c + math.floor((e - tc - 14) / perToken)
      end
    end
    if sum + c > budget then
      out[1], out[3] = seq, sum
      return out
    end
    sum, kept = sum + c, kept + 1
    out[#out + 1] = v
    seq = seq - 1
  end
  chunk = math.min(chunk * 2, 128)
end
out[1], out[3] = seq, sum
return out
`

var (
	countBack    = valkeygo.NewLuaScriptReadOnly(countBackSrc)
	countBackSHA = func() string { s := sha1.Sum([]byte(countBackSrc)); return hex.EncodeToString(s[:]) }()
)

// countsCached reports whether the native layout's values carry counts in q's encoding.
func countsCached(q store.MessageQuery) bool {
	return q.Encoding == "" || q.Encoding == tokenizer.O200KBase || q.Encoding == tokenizer.CL100KBase
}

// countBackArgs are countBackSrc's ARGV for q, from before (a seq, 0: the newest) with at most limit
// messages and tokens.
func countBackArgs(q store.MessageQuery, before int64, limit, tokens int) []string {
	enc := q.Encoding
	if enc == "" {
		enc = tokenizer.O200KBase
	}
	perToken := 0
	if q.CountToolCalls {
		perToken = store.ToolCallBytesPerToken
	}
	return []string{strconv.FormatInt(before, 10), strconv.Itoa(limit), strconv.Itoa(tokens), enc,
		strconv.Itoa(store.MessageOverhead), strconv.Itoa(perToken)}
}

// firstCmd is the command that begins to answer q on the native list key: countBack's EVALSHA, or an
// LRANGE of what q reads (without MaxTokens) or of store.ReadNewest's first page (in the estimate).
func (n *Backend) firstCmd(key string, q store.MessageQuery) valkeygo.Completed {
	b := n.conn.Client.B()
	switch {
	case q.MaxTokens == 0:
		return cmdOf(conn.LRange(b, key, q.Before, limitOrAll(q.Limit)))
	case countsCached(q):
		return b.EvalshaRo().Sha1(countBackSHA).Numkeys(1).Key(key).Arg(countBackArgs(q, q.Before, q.Limit, q.MaxTokens)...).Build()
	}
	return cmdOf(conn.LRange(b, key, q.Before, store.FirstPageSize(q)))
}

func cmdOf(c valkeygo.Completed, _ int64) valkeygo.Completed { return c }

func limitOrAll(limit int) int {
	if limit <= 0 {
		return math.MaxInt
	}
	return limit
}

// readMessages answers q (a checked query) on the native list key, first from the reply r of
// firstCmd(key, q) when it was sent already (nil: send it), and returns the before of the messages it left
// out.
func (n *Backend) readMessages(ctx context.Context, key string, q store.MessageQuery, r *valkeygo.ValkeyResult) ([]store.Message, int64, error) {
	if q.MaxTokens > 0 && countsCached(q) {
		if r == nil {
			res, err := n.conn.Do(ctx, n.firstCmd(key, q))
			if err != nil {
				return nil, 0, err
			}
			r = &res
		}
		return n.countBack(ctx, key, q, *r)
	}
	page := func(before int64, size int) ([]store.Message, int64, error) {
		var vals []string
		var err error
		if r != nil { // the page firstCmd read
			vals, err = r.AsStrSlice()
			if err != nil {
				return nil, 0, n.conn.Fail(ctx, err)
			}
			r = nil
		} else if vals, err = n.values(ctx, key, before, size); err != nil {
			return nil, 0, err
		}
		msgs, err := decodeMessages(vals)
		if err != nil || len(msgs) == 0 {
			return nil, 0, err
		}
		return msgs, conn.NextBefore(msgs[0].Seq), nil
	}
	if q.MaxTokens == 0 {
		msgs, next, err := page(q.Before, limitOrAll(q.Limit))
		return msgs, next, err
	}
	return store.ReadNewest(q, page)
}

// values is the LRANGE of up to n values before seq before (0: the newest); a before past the newest
// reads from the newest.
func (n *Backend) values(ctx context.Context, key string, before int64, size int) ([]string, error) {
	cmd, first := conn.LRange(n.conn.Client.B(), key, before, size)
	r, err := n.conn.Do(ctx, cmd)
	if err != nil {
		return nil, err
	}
	vals, err := r.AsStrSlice()
	if err != nil {
		return nil, n.conn.Fail(ctx, err)
	}
	if conn.PastEnd(first, size, len(vals)) {
		return n.values(ctx, key, 0, size)
	}
	return vals, nil
}

// countBack runs countBackSrc until q is answered, r being the reply of its first run (an EVALSHA, which
// it runs again with the script when the server does not have it): a message without the count it reads
// and counts here, and goes on.
func (n *Backend) countBack(ctx context.Context, key string, q store.MessageQuery, r valkeygo.ValkeyResult) ([]store.Message, int64, error) {
	var pages [][]store.Message // newest first
	before, limit, tokens, kept := q.Before, q.Limit, q.MaxTokens, 0
	var next int64
	for {
		if err := r.Error(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			if r, err = n.runCountBack(ctx, key, countBackArgs(q, before, limit, tokens)); err != nil {
				return nil, 0, err
			}
		}
		arr, err := r.ToArray()
		if err != nil || len(arr) < 3 {
			return nil, 0, n.conn.Fail(ctx, fmt.Errorf("valkey: count messages: %w", err))
		}
		var reply [3]int64
		for i := range reply {
			if reply[i], err = arr[i].AsInt64(); err != nil {
				return nil, 0, n.conn.Fail(ctx, err)
			}
		}
		stop, uncounted, sum := reply[0], reply[1], int(reply[2])
		vals := make([]string, len(arr)-3)
		for i := range vals { // newest first: reversed
			if vals[len(vals)-1-i], err = arr[3+i].ToString(); err != nil {
				return nil, 0, n.conn.Fail(ctx, err)
			}
		}
		msgs, err := decodeMessages(vals)
		if err != nil {
			return nil, 0, err
		}
		pages = append(pages, msgs)
		kept += len(msgs)
		tokens -= sum
		next = conn.NextBefore(stop + 1)
		if stop == 0 {
			next = 0
		}
		if uncounted == 0 || (q.Limit > 0 && kept >= q.Limit) {
			break
		}
		// The message at stop has no count in the encoding: counted here.
		v, err := n.values(ctx, key, stop+1, 1)
		if err != nil {
			return nil, 0, err
		}
		m, err := decodeMessages(v)
		if err != nil {
			return nil, 0, err
		}
		if len(m) == 0 { // gone meanwhile
			break
		}
		c := store.MessageTokens(m[0], q.Encoding, q.CountToolCalls)
		if c > tokens {
			break
		}
		pages = append(pages, m)
		kept++
		tokens -= c
		if next = conn.NextBefore(stop); next == 0 || (q.Limit > 0 && kept >= q.Limit) {
			break
		}
		before = stop
		if q.Limit > 0 {
			limit = q.Limit - kept
		}
		if r, err = n.runCountBack(ctx, key, countBackArgs(q, before, limit, tokens)); err != nil {
			return nil, 0, err
		}
	}
	out := make([]store.Message, 0, kept)
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	if len(out) == 0 {
		out = nil
	}
	return out, next, nil
}

// runCountBack runs countBackSrc (loading it on the server if it lacks it).
func (n *Backend) runCountBack(ctx context.Context, key string, args []string) (valkeygo.ValkeyResult, error) {
	cctx, cancel, err := n.conn.Call(ctx)
	if err != nil {
		return valkeygo.ValkeyResult{}, n.conn.Fail(ctx, err)
	}
	defer cancel()
	r := countBack.Exec(cctx, n.conn.Client, []string{key}, args)
	if err := r.NonValkeyError(); err != nil {
		return r, n.conn.Fail(ctx, err)
	}
	return r, nil
}
