// SPDX-License-Identifier: Apache-2.0

package promptcount_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/promptcount"
)

// randomAssembly is a random request of instructions, tools and a tool choice, a history with tool
// exchanges and names, knowledge, and a message with images.
func randomAssembly(r *rand.Rand, images [][]byte, model, format string) *assembler.Request {
	req := &assembler.Request{Model: model, Format: format, Message: "What now, " + fmt.Sprint(r.IntN(1000)) + "?"}
	if r.IntN(3) > 0 {
		req.Instructions = "You are a careful assistant.\nAnswer briefly."
	}
	all := []assembler.Tool{
		{Type: "function", Function: assembler.ToolFunction{Name: "get_weather", Description: "Get the weather",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"The city"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}`)}},
		{Type: "function", Function: assembler.ToolFunction{Name: "search", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}}}`)}},
		{Type: "function", Function: assembler.ToolFunction{Name: "noop"}},
	}
	req.Tools = all[:r.IntN(len(all)+1)]
	if len(req.Tools) > 0 && format == assembler.FormatOpenAI {
		switch r.IntN(4) {
		case 1:
			req.ToolChoice.Mode = assembler.ToolChoiceNone
		case 2:
			req.ToolChoice.Mode = assembler.ToolChoiceRequired
		case 3:
			req.ToolChoice = assembler.ToolChoice{Mode: assembler.ToolChoiceFunction, Function: req.Tools[0].Function.Name}
		}
	}
	for i := range r.IntN(4) {
		req.History = append(req.History, assembler.Message{Role: "user", Content: fmt.Sprintf("Question %d: é 漢字 %d", i, r.IntN(99))})
		if r.IntN(2) == 0 {
			id := fmt.Sprintf("call_%d", i)
			req.History = append(req.History,
				assembler.Message{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Type: "function",
					Function: assembler.ToolCallFunction{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
				assembler.Message{Role: "tool", ToolCallID: id, Content: "18C and sunny"})
		}
		msg := assembler.Message{Role: "assistant", Content: fmt.Sprintf("Answer %d.", i)}
		if r.IntN(3) == 0 {
			msg.Name = "helper"
		}
		req.History = append(req.History, msg)
	}
	if r.IntN(2) == 0 {
		req.Knowledge = []assembler.Knowledge{{ID: "k1", Content: "Paris is in France.", Source: "atlas", Score: 0.9}}
	}
	if r.IntN(2) == 0 {
		req.MessageParts = []loom.Part{loom.ImageDataPart(images[r.IntN(len(images))], []string{"", "low", "high"}[r.IntN(3)]),
			loom.TextPart("and this")}
	}
	return req
}

// TestCountRequest_AgreesWithAssembler: what an assembly returns, sent as a provider request (its
// messages, system prompt and tools, and the tool choice), counts to its TotalTokens, exactly as the
// assembler counted it: two ways of counting the same request, in the openai format with OpenAI's
// models (the tools' namespace, the tool choice, calls, results, names, images) and in the anthropic
// format with a Claude model.
func TestCountRequest_AgreesWithAssembler(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 4))
	var images [][]byte // sizes of one tile, of several, and one the tile rule scales down
	for _, size := range [][2]int{{100, 60}, {1024, 768}, {1600, 3000}} {
		images = append(images, pngData(t, size[0], size[1]))
	}
	for _, tc := range []struct{ model, format string }{
		{"gpt-4o", assembler.FormatOpenAI},
		{"gpt-4", assembler.FormatOpenAI},
		{"gpt-4.1-mini", assembler.FormatOpenAI},
		{"claude-sonnet-4-5", assembler.FormatAnthropic},
	} {
		for i := range 12 {
			req := randomAssembly(r, images, tc.model, tc.format)
			if tc.model == "gpt-4" {
				req.MessageParts = nil // gpt-4 takes no images
			}
			res, err := assembler.AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatalf("%s %d: %v", tc.model, i, err)
			}
			body := map[string]any{"model": tc.model, "messages": res.Messages}
			if res.System != "" {
				body["system"] = res.System
			}
			if len(res.Tools) > 0 {
				body["tools"] = res.Tools
				if req.ToolChoice.Mode != "" {
					body["tool_choice"] = req.ToolChoice
				}
			}
			data, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			c := count(t, string(data), promptcount.Options{Shape: tc.format})
			if c.Tokens != res.TotalTokens || c.Exact != res.Exact {
				t.Errorf("%s %d: promptcount %d (exact %v), the assembly %d (exact %v)\n%s", tc.model, i, c.Tokens, c.Exact, res.TotalTokens, res.Exact, data)
			}
		}
	}
}
