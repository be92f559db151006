package assembler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/context-loom/loom"
)

// CacheControl is an Anthropic cache breakpoint (a content block's, a tool's or the system prompt's
// cache_control): the prompt up to and including what carries it is cached. Type is "ephemeral"; TTL is
// "" (the API's default, five minutes) or "1h".
type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// The values of Request.CacheBreakpoints and Request.CacheTTL (see [loom.CacheTTL1h5m]).
const (
	CacheBreakpointsAuto = loom.CacheBreakpointsAuto
	CacheBreakpointsOff  = loom.CacheBreakpointsOff
	CacheTTL5m           = loom.CacheTTL5m
	CacheTTL1h           = loom.CacheTTL1h
	CacheTTL1h5m         = loom.CacheTTL1h5m
)

// MaxCacheBreakpoints is the most cache_control breakpoints a Messages API request may carry (a fifth is
// a 400: https://platform.claude.com/docs/en/build-with-claude/prompt-caching).
const MaxCacheBreakpoints = 4

// DefaultCacheMinTokens is the minimum cacheable prefix of a model the table of CacheMinTokens does not
// know: the smallest of the known ones, for a breakpoint before a model's minimum is ignored by the API
// (the request is processed without caching), never refused.
const DefaultCacheMinTokens = 1024

// cacheMinTokens is the minimum cacheable prompt length of Anthropic's models, by the registry's model
// names (tokenizer.ForModel), from "Cache limitations" in Anthropic's prompt caching guide
// (https://platform.claude.com/docs/en/build-with-claude/prompt-caching): a prefix shorter than that is
// not cached even if marked.
var cacheMinTokens = map[string]int{
	"claude-opus-4-5":   4096,
	"claude-haiku-4-5":  4096,
	"claude-sonnet-4-5": 1024,
	"claude-opus-4-1":   1024,
	"claude-opus-4":     1024,
	"claude-sonnet-4":   1024,
	"claude-3-7-sonnet": 1024,
	"claude-3-5-sonnet": 1024,
	"claude-3-opus":     1024,
	"claude-3-5-haiku":  2048,
	"claude-3-haiku":    2048,
}

// CacheMinTokens returns the minimum cacheable prompt length of the model (its registered name, see
// tokenizer.ForModel): the prefix up to a cache breakpoint must count at least that many tokens to be
// cached. A model the table does not know gets DefaultCacheMinTokens.
func CacheMinTokens(model string) int {
	if n, ok := cacheMinTokens[model]; ok {
		return n
	}
	return DefaultCacheMinTokens
}

// checkCache returns an error wrapping ErrInvalidRequest unless the request's cache options are known
// values, and its TTL is asked of a format that places breakpoints.
func checkCache(req *Request, f Format) error {
	if err := loom.CheckCacheOptions(req.CacheBreakpoints, req.CacheTTL); err != nil {
		return invalidRequest(err)
	}
	if req.CacheTTL != "" && f.Name() != FormatAnthropic {
		return fmt.Errorf("%w: cache_ttl is for the anthropic format's breakpoints, and the format is %q", ErrInvalidRequest, f.Name())
	}
	return nil
}

// cacheMarks are where a Messages API rendering's stable parts end, with the count of the prompt up to
// each (in the order the provider reads it: tools, system, messages), for the breakpoints.
type cacheMarks struct {
	tools, system int // the count up to the end of the tools, and of the system prompt
	// The history's last block (message index and block index; msg -1: no history is sent), and the
	// count up to it.
	histMsg, histBlock int
	history            int
	// The message before the history's latest assistant message (0 with turn 0: none), whose end is where
	// the call before this one ended, and the count up to it.
	turnMsg, turn int
	last          int // the count of the whole prompt but the reply priming
}

// cacheLookback is how many blocks before a breakpoint the Messages API looks back for a cached prefix:
// "up to approximately 20 blocks" (https://platform.claude.com/docs/en/build-with-claude/prompt-caching),
// less a margin for the approximation.
const cacheLookback = 20 - 4

// cacheable reports whether b may carry a cache_control: a text that is not blank, an image, a tool_use
// or a tool_result (not a thinking block, which Loom does not write, nor an empty text).
func cacheable(b *Block) bool {
	switch b.Type {
	case "text":
		return strings.TrimSpace(b.Text) != ""
	case "image", "tool_use", "tool_result":
		return true
	}
	return false
}

// placeBreakpoints puts the request's cache breakpoints on a rendered Messages API request: at most one
// at the end of each stable part, in the provider's order, four in all (MaxCacheBreakpoints):
//
//  1. the last tool definition (the tools);
//  2. the system prompt (instructions and pinned memory, with the tools before them), which is then also
//     written as one text block (output.systemBlocks, Result.SystemBlocks);
//  3. the history's last block, when the context or the message follows it: the conversation so far,
//     whose bytes the next turn repeats (its history is this one's and the new turn), for the history is
//     cut in steps that keep its start (Policy.HistoryTrim); they change only when the cut moves, a
//     summary or clearing rewrites the history, or the stable parts change;
//  4. the last block of the newest turn, the whole prompt, which the next turn finds by the API's look
//     back from its own breakpoints.
//
// The API looks back only about 20 blocks from a breakpoint (cacheLookback): when the history's latest
// assistant message and what follows it (a turn of many parallel tool calls and their results) put the
// first of 3 and 4 further than that from where the call before this one ended (the block before that
// message, where its breakpoints were), a bridge breakpoint goes on that block, which finds what the call
// before wrote; then, for four at most, the tools' goes, whose prefix the system prompt's holds.
//
// A breakpoint is placed only where the prompt up to it counts at least the model's minimum cacheable
// length (CacheMinTokens), and only on a block that may carry one (see cacheable). All carry the
// request's TTL, but for CacheTTL1h5m: an hour on the tools' and the system prompt's, five minutes on the
// messages'; so the API's rule that a longer TTL comes before a shorter one holds. The counts are
// unchanged: a cache_control is not billed as tokens. It changes nothing but the fields it sets, which
// are copies: the tools' shared bytes and the plan are not written.
func placeBreakpoints(a *assembly, out *output) {
	if a.req.CacheBreakpoints == CacheBreakpointsOff {
		return
	}
	cc, prefix := CacheControl{Type: "ephemeral"}, CacheControl{Type: "ephemeral"} // the messages', the stable prefix's
	switch a.req.CacheTTL {
	case CacheTTL1h:
		cc.TTL, prefix.TTL = CacheTTL1h, CacheTTL1h
	case CacheTTL1h5m:
		prefix.TTL = CacheTTL1h
	}
	min := CacheMinTokens(a.model.Name)
	k := &out.marks
	// The messages' breakpoints, each a message and block index, in order.
	type at struct{ msg, block int }
	var buf [3]at
	marks := buf[:0]
	if last := len(out.messages) - 1; last >= 0 {
		lastBlock := len(out.messages[last].Blocks) - 1
		if k.histMsg >= 0 && (k.histMsg != last || k.histBlock != lastBlock) && k.history >= min &&
			cacheable(&out.messages[k.histMsg].Blocks[k.histBlock]) {
			marks = append(marks, at{k.histMsg, k.histBlock})
		}
		if lastBlock >= 0 && k.last >= min && cacheable(&out.messages[last].Blocks[lastBlock]) {
			marks = append(marks, at{last, lastBlock})
		}
		if bridge := (at{k.turnMsg, len(out.messages[k.turnMsg].Blocks) - 1}); k.turn > 0 && k.turn >= min && len(marks) > 0 &&
			blocksBetween(out.messages, bridge.msg, bridge.block, marks[0].msg, marks[0].block) > cacheLookback &&
			cacheable(&out.messages[bridge.msg].Blocks[bridge.block]) {
			marks = append(marks, at{})
			copy(marks[1:], marks)
			marks[0] = bridge
		}
	}
	tools := len(out.tools) > 0 && k.tools >= min
	system := out.system != "" && k.system >= min
	if tools && system && len(marks) > MaxCacheBreakpoints-2 {
		tools = false
	}
	if tools {
		n := len(out.tools)
		t := make([]json.RawMessage, n)
		copy(t, out.tools)
		t[n-1] = withCacheControl(t[n-1], prefix)
		out.tools = t
	}
	if system {
		out.systemBlocks = []Block{{Type: "text", Text: out.system, CacheControl: prefix}}
	}
	copied := -1
	for _, m := range marks {
		msg := &out.messages[m.msg]
		if copied != m.msg {
			msg.Blocks = append([]Block(nil), msg.Blocks...) // a copy: the plan's rendered blocks are not written
			copied = m.msg
		}
		msg.Blocks[m.block].CacheControl = cc
	}
}

// blocksBetween is how many blocks msgs holds after block j of message i, up to and including block l of
// message k (k, l after i, j).
func blocksBetween(msgs []ChatMessage, i, j, k, l int) int {
	n := l + 1 - (j + 1)
	for m := i; m < k; m++ {
		n += len(msgs[m].Blocks)
	}
	return n
}

// The cache_control members that withCacheControl writes, with the closing brace of the object after them.
var (
	cacheControl5m = []byte(`,"cache_control":{"type":"ephemeral"}}`)
	cacheControl1h = []byte(`,"cache_control":{"type":"ephemeral","ttl":"1h"}}`)
)

// cacheControlMember is the last member that withCacheControl writes for c, and the object's closing
// brace: c is {ephemeral} or {ephemeral, 1h}, the breakpoints placeBreakpoints places.
func cacheControlMember(c CacheControl) []byte {
	if c.TTL == CacheTTL1h {
		return cacheControl1h
	}
	return cacheControl5m
}

// withCacheControl returns a copy of the tool definition raw (a JSON object) with c as its cache_control.
func withCacheControl(raw json.RawMessage, c CacheControl) json.RawMessage {
	member := cacheControlMember(c)
	if c != (CacheControl{Type: "ephemeral"}) && c != (CacheControl{Type: "ephemeral", TTL: CacheTTL1h}) {
		cc, _ := marshalRaw(c)
		member = append(append([]byte(`,"cache_control":`), cc...), '}')
	}
	raw = bytes.TrimRight(raw, " \t\r\n")
	out := make(json.RawMessage, 0, len(raw)-1+len(member))
	out = append(out, raw[:len(raw)-1]...)
	return append(out, member...)
}
