// SPDX-License-Identifier: Apache-2.0

package promptcount_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/context-loom/loom/promptcount"
)

// agentRequest is a Chat Completions body of an agent's turn: 20 tools, and 50 messages with tool
// exchanges.
func agentRequest() []byte {
	var tools []any
	for i := range 20 {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": fmt.Sprintf("tool_%d", i), "description": "Does thing number " + fmt.Sprint(i),
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "What to look for"},
				"limit": map[string]any{"type": "integer"},
				"mode":  map[string]any{"type": "string", "enum": []string{"fast", "full"}}}, "required": []string{"query"}}}})
	}
	msgs := []any{map[string]any{"role": "system", "content": "You are an agent. Use the tools when they help."}}
	for i := range 12 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "user", "content": fmt.Sprintf("Please look up item %d and summarize what you find about it.", i)},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "tool_3", "arguments": `{"query":"item","limit":5}`}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": "Found five results about the item, each with a title and a summary."},
			map[string]any{"role": "assistant", "content": "Here is what I found: the item is well documented."})
	}
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs, "tools": tools, "tool_choice": "auto"})
	return b
}

func BenchmarkCountRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"cookbook", []byte(cookbookRequest(b, "gpt-4o"))},
		{"agent", agentRequest()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := promptcount.CountRequest(context.Background(), bc.body, promptcount.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
