package assembler

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// providerLookback is how far back from a breakpoint the Messages API looks for a cached prefix: "up to
// approximately 20 blocks before your explicit breakpoint" (the prompt caching guide).
const providerLookback = 20

// messagePrefixes returns, for each content block of res's messages in order, the hash of the prompt up
// to and including it (the tools, the system prompt, the messages before it and their roles, its own
// message's blocks up to it), cache_control aside, and which of them carry a breakpoint.
func messagePrefixes(t *testing.T, res *Result) (hashes []string, marked []bool) {
	t.Helper()
	h := sha256.New()
	for _, raw := range res.Tools {
		var tool map[string]json.RawMessage
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		delete(tool, "cache_control")
		b, _ := json.Marshal(tool)
		h.Write(b)
	}
	fmt.Fprintf(h, "system %q\n", res.System)
	for _, m := range res.Messages {
		fmt.Fprintf(h, "role %s\n", m.Role)
		for _, b := range m.Blocks {
			marked = append(marked, b.CacheControl != (CacheControl{}))
			b.CacheControl = CacheControl{}
			j, _ := json.Marshal(b)
			h.Write(j)
			hashes = append(hashes, fmt.Sprintf("%x", h.Sum(nil)))
		}
	}
	return hashes, marked
}

// TestBreakpoints_HitWithinTheLookback: an agent's conversation, assembled call after call (the user's
// message, the model's parallel tool calls and their results, its answer), as the API caches it: each
// call writes the prefixes up to its breakpoints, and a call's breakpoint reads one of them if it is
// within providerLookback blocks before it, its bytes identical. However many tool calls a turn makes
// (more than twenty blocks between the previous call's end and this one's), every call after the first
// reads the messages the call before it wrote, with at most four breakpoints.
func TestBreakpoints_HitWithinTheLookback(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(20, 20))
	base := cacheRequest()
	base.Knowledge, base.Memory = nil, nil
	var history []Message
	var written map[string]bool // the message prefixes the call before wrote
	calls, bridged := 0, 0
	call := func(message string) {
		t.Helper()
		req := *base
		req.History, req.Message = history, message
		if r.IntN(3) == 0 {
			req.Knowledge = []Knowledge{{ID: "k", Content: fmt.Sprint("A note of call ", calls, "."), Score: 1}}
		}
		res, err := AssembleRequest(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		hashes, marked := messagePrefixes(t, res)
		if n := len(breakpoints(t, res)); n > MaxCacheBreakpoints {
			t.Fatalf("call %d: %d breakpoints", calls, n)
		}
		if written != nil {
			hit := false
			for p := range hashes {
				for q := p; marked[p] && q >= 0 && q > p-providerLookback && !hit; q-- {
					hit = written[hashes[q]]
				}
			}
			if !hit {
				t.Fatalf("call %d (%d blocks): no breakpoint finds what call %d wrote within %d blocks", calls, len(hashes), calls-1, providerLookback)
			}
		}
		written = map[string]bool{}
		n := 0
		for p := range hashes {
			if marked[p] {
				written[hashes[p]] = true
				n++
			}
		}
		if n > 2 {
			bridged++
		}
		calls++
		if message != "" {
			history = append(history, Message{Role: "user", Content: message})
		}
	}
	for turn := range 12 {
		call(fmt.Sprintf("Question %d: what is the weather in each city?", turn))
		k := []int{1, 2, 12, 15, 25}[r.IntN(5)]
		var tc []ToolCall
		var results []Message
		for i := range k {
			id := fmt.Sprintf("call_%d_%d", turn, i)
			tc = append(tc, ToolCall{ID: id, Type: "function", Function: ToolCallFunction{Name: "get_weather", Arguments: fmt.Sprintf(`{"city":"c%d"}`, i)}})
			results = append(results, Message{Role: "tool", ToolCallID: id, Content: strings.Repeat("dry ", 1+i%3)})
		}
		history = append(history, Message{Role: "assistant", ToolCalls: tc})
		history = append(history, results...)
		call("")
		history = append(history, Message{Role: "assistant", Content: fmt.Sprintf("Answer %d.", turn)})
	}
	if bridged == 0 {
		t.Error("no call placed a breakpoint between the history's end and the call before's: the test proves little")
	}
}
