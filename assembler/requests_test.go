package assembler

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
)

// The requests below are the assembler's, and the SDK conformance tests (module internal/sdktest, which
// keeps the SDKs out of Loom's go.mod) have copies of them.

// toolConversation is a finished tool-calling turn: the user asks, the assistant calls two tools (no
// text), both results come back, the assistant answers; then the user asks again.
func toolConversation() *Request {
	strict := true
	return &Request{
		Model:        "gpt-4o",
		Instructions: "You answer questions about the weather. Use the tools.",
		Tools: []Tool{
			{Type: "function", Function: ToolFunction{Name: "weather", Description: "Current weather in a city.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"City name"}},"required":["city"],"additionalProperties":false}`),
				Strict:     &strict}},
			{Type: "function", Function: ToolFunction{Name: "local_time"}}, // no parameters
		},
		Knowledge: []Knowledge{{ID: "k1", Content: "Umbrellas are advised when rain is forecast.", Score: 0.9, Source: "tips.md"}},
		History: []Message{
			{Role: "user", Content: "What's the weather in Paris and in Rome?"},
			{Role: "assistant", ToolCalls: []ToolCall{
				{ID: "call_paris", Type: "function", Function: ToolCallFunction{Name: "weather", Arguments: `{"city":"Paris"}`}},
				{ID: "call_rome", Type: "function", Function: ToolCallFunction{Name: "weather", Arguments: `{"city": "Rome"}`}},
			}},
			{Role: "tool", ToolCallID: "call_paris", Content: "sunny, 24°C"},
			{Role: "tool", ToolCallID: "call_rome", Content: "rain, 18°C"},
			{Role: "assistant", Content: "Paris is sunny (24°C); Rome has rain (18°C)."},
		},
		Message: "Should I take an umbrella to Rome?",
	}
}

// midTask is a conversation that ends with a tool exchange and no new user message: the model is to
// continue from the tool results.
func midTask() *Request {
	req := toolConversation()
	req.History = req.History[:4]
	req.Message = ""
	return req
}

// variedRandomRequest is randomRequest in format, with more varied history and tools: text beside tool
// calls, two calls in one message (with arguments that are not a JSON object), names, system messages
// in the history, strict and parameterless tools. Half of the requests get a small budget, so that
// history and other regions are trimmed.
func variedRandomRequest(r *rand.Rand, format string) *Request {
	req := randomRequest(r)
	req.Format = format
	if r.IntN(2) == 0 {
		req.MaxTokens = 50 + r.IntN(1500)
	}
	var h []Message
	for i := 0; i < len(req.History); i++ {
		m := req.History[i]
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			if r.IntN(3) == 0 {
				m.Content = "Let me look that up."
			}
			var extra []Message
			if r.IntN(3) == 0 && i+1 < len(req.History) && req.History[i+1].ToolCallID == m.ToolCalls[0].ID {
				id := m.ToolCalls[0].ID + "_b"
				args := []string{`{"q":"y","n":[1,2,{"deep":true}]}`, `{ "q" : "spaced" }`, ``, `[1,2]`, `"text"`, `{"broken":`}[r.IntN(6)]
				m.ToolCalls = append(slices.Clone(m.ToolCalls), ToolCall{ID: id, Type: "function", Function: ToolCallFunction{Name: "lookup", Arguments: args}})
				extra = append(extra, Message{Role: "tool", ToolCallID: id, Content: "second result"})
			}
			h = append(h, m)
			for i+1 < len(req.History) && req.History[i+1].Role == "tool" {
				i++
				h = append(h, req.History[i])
			}
			h = append(h, extra...)
		case m.Role == "user":
			if r.IntN(8) == 0 {
				h = append(h, Message{Role: "system", Content: "Note: the user is on the free plan."})
			}
			if r.IntN(5) == 0 {
				m.Name = "alice"
			}
			h = append(h, m)
		default:
			h = append(h, m)
		}
	}
	req.History = h
	if len(req.Tools) > 0 {
		if r.IntN(2) == 0 {
			strict := r.IntN(2) == 0
			req.Tools[0].Function.Strict = &strict
		}
		if r.IntN(2) == 0 {
			req.Tools = append(req.Tools, Tool{Type: "function", Function: ToolFunction{Name: "now"}})
		}
	}
	return req
}
