package conn

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/store"
)

// What both key layouts' keys need.

// GlobEscape escapes the characters SCAN MATCH treats as a pattern.
func GlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// AgentFields are the field-value pairs of an agent's hash, in both layouts: the instructions under
// role ("role" in the cookbook's, "instructions" in the native one), constraints, output_format,
// updated_at, and model, max_tokens, tools, policy (JSON), cache_breakpoints and cache_ttl when set.
func AgentFields(a store.Agent, role string) ([]string, error) {
	f := []string{role, a.Instructions, "updated_at", a.UpdatedAt.Format(time.RFC3339Nano)}
	for _, kv := range [][2]string{{"constraints", a.Constraints}, {"output_format", a.OutputFormat}, {"model", a.Model},
		{"cache_breakpoints", a.CacheBreakpoints}, {"cache_ttl", a.CacheTTL}} {
		if kv[1] != "" {
			f = append(f, kv[0], kv[1])
		}
	}
	if a.MaxTokens != 0 {
		f = append(f, "max_tokens", strconv.Itoa(a.MaxTokens))
	}
	if len(a.Tools) > 0 {
		b, err := json.Marshal(a.Tools)
		if err != nil {
			return nil, fmt.Errorf("valkey: encode agent tools: %w", err)
		}
		f = append(f, "tools", string(b))
	}
	if a.Policy != nil {
		b, err := json.Marshal(a.Policy)
		if err != nil {
			return nil, fmt.Errorf("valkey: encode agent policy: %w", err)
		}
		f = append(f, "policy", string(b))
	}
	return f, nil
}

// DecodeAgentHash is AgentFields' inverse; an empty hash (a missing key) is store.ErrNotFound.
func DecodeAgentHash(id string, h map[string]string, role string) (store.Agent, error) {
	if len(h) == 0 {
		return store.Agent{}, fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	}
	a := store.Agent{ID: id, Instructions: h[role], Constraints: h["constraints"], OutputFormat: h["output_format"], Model: h["model"],
		CacheBreakpoints: h["cache_breakpoints"], CacheTTL: h["cache_ttl"]}
	var err error
	if v := h["max_tokens"]; v != "" {
		if a.MaxTokens, err = strconv.Atoi(v); err != nil {
			return store.Agent{}, fmt.Errorf("valkey: agent %q: max_tokens %q is not a number", id, v)
		}
	}
	if v := h["tools"]; v != "" {
		if err := json.Unmarshal([]byte(v), &a.Tools); err != nil {
			return store.Agent{}, fmt.Errorf("valkey: decode agent %q tools: %w", id, err)
		}
	}
	if v := h["policy"]; v != "" {
		a.Policy = new(loom.Policy)
		if err := json.Unmarshal([]byte(v), a.Policy); err != nil {
			return store.Agent{}, fmt.Errorf("valkey: decode agent %q policy: %w", id, err)
		}
	}
	if v := h["updated_at"]; v != "" {
		if a.UpdatedAt, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return store.Agent{}, fmt.Errorf("valkey: agent %q: updated_at %q is not a time", id, v)
		}
	}
	return a, nil
}

// LRange is the LRANGE of up to n values (math.MaxInt: all) before seq before (0: the newest), and the
// seq of the first value it returns when before is known (0 when it is not: the values say).
func LRange(b valkeygo.Builder, key string, before int64, n int) (valkeygo.Completed, int64) {
	if before <= 0 {
		start := int64(0)
		if n < math.MaxInt {
			start = -int64(n)
		}
		return b.Lrange().Key(key).Start(start).Stop(-1).Build(), 0
	}
	if before == 1 { // nothing before the first: a range that is empty
		return b.Lrange().Key(key).Start(1).Stop(0).Build(), 1
	}
	start := int64(0)
	if n < math.MaxInt {
		start = max(before-1-int64(n), 0)
	}
	return b.Lrange().Key(key).Start(start).Stop(before - 2).Build(), start + 1
}

// PastEnd reports whether a page that LRange read, whose first value has seq first (0: the newest values,
// so never), came back with fewer than the size values it asked for because its before is past the list's
// newest value: a range that starts after the list's first value is short only then, since values are
// only ever appended (a list goes as a whole).
func PastEnd(first int64, size, got int) bool {
	return first > 1 && size < math.MaxInt && got < size
}

// NextBefore is the before of the messages older than seq first: 0 when it is the first.
func NextBefore(first int64) int64 {
	if first <= 1 {
		return 0
	}
	return first
}

// HGetAll reads a hash: an agent's, from the client-side cache when it is on (CacheTTL).
func (c *Conn) HGetAll(ctx context.Context, key string) (valkeygo.ValkeyResult, error) {
	if c.CacheTTL <= 0 {
		return c.Do(ctx, c.Client.B().Hgetall().Key(key).Build())
	}
	cctx, cancel, err := c.Call(ctx)
	if err != nil {
		return valkeygo.ValkeyResult{}, c.Fail(ctx, err)
	}
	defer cancel()
	r := c.Client.DoCache(cctx, c.Client.B().Hgetall().Key(key).Cache(), c.CacheTTL)
	if err := r.NonValkeyError(); err != nil {
		return r, c.Fail(ctx, err)
	}
	return r, nil
}
