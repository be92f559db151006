package assembler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// CacheControl is an Anthropic cache breakpoint (a content block's, a tool's or the system prompt's
// cache_control): the prompt up to and including what carries it is cached. Type is "ephemeral"; TTL is
// "" (the API's default, five minutes) or "1h".
type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// The values of Request.CacheBreakpoints and Request.CacheTTL.
const (
	CacheBreakpointsAuto = "auto"
	CacheBreakpointsOff  = "off"
	CacheTTL5m           = "5m"
	CacheTTL1h           = "1h"
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
	switch req.CacheBreakpoints {
	case "", CacheBreakpointsAuto, CacheBreakpointsOff:
	default:
		return fmt.Errorf("%w: cache_breakpoints %q (known: auto, off)", ErrInvalidRequest, req.CacheBreakpoints)
	}
	switch req.CacheTTL {
	case "":
	case CacheTTL5m, CacheTTL1h:
		if f.Name() != FormatAnthropic {
			return fmt.Errorf("%w: cache_ttl is for the anthropic format's breakpoints, and the format is %q", ErrInvalidRequest, f.Name())
		}
		if req.CacheBreakpoints == CacheBreakpointsOff {
			return fmt.Errorf("%w: cache_ttl %q with cache_breakpoints \"off\"", ErrInvalidRequest, req.CacheTTL)
		}
	default:
		return fmt.Errorf("%w: cache_ttl %q (known: 5m, 1h)", ErrInvalidRequest, req.CacheTTL)
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
	last               int // the count of the whole prompt but the reply priming
}

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
// A breakpoint is placed only where the prompt up to it counts at least the model's minimum cacheable
// length (CacheMinTokens), and only on a block that may carry one (see cacheable). All carry the
// request's TTL, so the API's rule that a longer TTL comes before a shorter one holds. The counts are
// unchanged: a cache_control is not billed as tokens. It changes nothing but the fields it sets, which
// are copies: the tools' shared bytes and the plan are not written.
func placeBreakpoints(a *assembly, out *output) {
	if a.req.CacheBreakpoints == CacheBreakpointsOff {
		return
	}
	cc := CacheControl{Type: "ephemeral"}
	if a.req.CacheTTL == CacheTTL1h {
		cc.TTL = CacheTTL1h
	}
	min := CacheMinTokens(a.model.Name)
	k := &out.marks
	if n := len(out.tools); n > 0 && k.tools >= min {
		tools := make([]json.RawMessage, n)
		copy(tools, out.tools)
		tools[n-1] = withCacheControl(tools[n-1], cc)
		out.tools = tools
	}
	if out.system != "" && k.system >= min {
		out.systemBlocks = []Block{{Type: "text", Text: out.system, CacheControl: cc}}
	}
	mark := func(i, j int) {
		m := &out.messages[i]
		m.Blocks = append([]Block(nil), m.Blocks...) // a copy: the plan's rendered blocks are not written
		m.Blocks[j].CacheControl = cc
	}
	last := len(out.messages) - 1
	if last < 0 {
		return
	}
	lastBlock := len(out.messages[last].Blocks) - 1
	if k.histMsg >= 0 && (k.histMsg != last || k.histBlock != lastBlock) && k.history >= min &&
		cacheable(&out.messages[k.histMsg].Blocks[k.histBlock]) {
		mark(k.histMsg, k.histBlock)
	}
	if lastBlock >= 0 && k.last >= min && cacheable(&out.messages[last].Blocks[lastBlock]) {
		mark(last, lastBlock)
	}
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
