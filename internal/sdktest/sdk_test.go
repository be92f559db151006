package sdktest

// These tests hold the assembler's provider formats to the official SDKs (openai-go, anthropic-sdk-go)
// and to the providers' conversation rules. For each assembled Result they
//
//  1. unmarshal every message and tool we return into the SDK's request param type, build the SDK's
//     request params (openai.ChatCompletionNewParams, anthropic.MessageNewParams), marshal them as the SDK
//     would send them, and compare the "messages" and "tools" arrays with ours;
//  2. build the same params field by field with the SDK's constructors (openai.SystemMessage,
//     openai.ToolMessage, anthropic.NewToolUseBlock, ...) from our JSON decoded strictly (unknown fields
//     are an error), and compare again;
//  3. check the provider's rules on roles, alternation and tool pairing.
//
// The comparison is of JSON values (decoded to any, compared with reflect.DeepEqual), so key order,
// HTML escaping and number spelling do not matter. What the SDK legitimately spells differently is
// normalised in our JSON before comparing, and only that:
//
//   - OpenAI: `"content": null` of an assistant message with tool calls is removed: the SDK omits the
//     field, and the API reads a missing and a null content alike ("required unless tool_calls").
//   - Anthropic: a tool_result's `"content": "text"` becomes `[{"type":"text","text":"text"}]`: the API
//     accepts both forms, the SDK only has the array. The top-level system string is compared with the
//     SDK's `[{"type":"text","text":...}]` form of it.
//
// Anything else the SDK adds, drops or changes is a mismatch.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"image"
	"image/png"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
)

// cookbookRequest is the Valkey cookbook's "Putting It Together" scenario as a request.
func cookbookRequest() *assembler.Request {
	return &assembler.Request{
		Model:        "gpt-4o",
		Instructions: "You are a helpful AI assistant.\n\nConstraints: Be concise and accurate.\nFormat: Plain text.",
		Memory: []assembler.MemoryFact{
			{Key: "name", Value: "Bob"},
			{Key: "preferred_language", Value: "English"},
			{Key: "tier", Value: "free"},
		},
		History: []assembler.Message{
			{Role: "user", Content: "Hi, I need help with my account"},
			{Role: "assistant", Content: "Sure! What do you need help with?"},
			{Role: "user", Content: "I want to upgrade to premium"},
		},
		ToolOutputs: []assembler.ToolOutput{{Tool: "check_account", CallID: "step_1", Result: `{"plan": "free", "eligible_upgrade": true}`}},
		Message:     "How much does premium cost?",
	}
}

// sdkToolConversation is a finished tool-calling turn: the user asks, the assistant calls two tools (no
// text), both results come back, the assistant answers; then the user asks again. It, sdkMidTask,
// cookbookRequest, randomRequest and sdkRandomRequest are copies of the assembler's tests' requests (tests
// of another module cannot share them).
func sdkToolConversation() *assembler.Request {
	strict := true
	return &assembler.Request{
		Model:        "gpt-4o",
		Instructions: "You answer questions about the weather. Use the tools.",
		Tools: []assembler.Tool{
			{Type: "function", Function: assembler.ToolFunction{Name: "weather", Description: "Current weather in a city.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"City name"}},"required":["city"],"additionalProperties":false}`),
				Strict:     &strict}},
			{Type: "function", Function: assembler.ToolFunction{Name: "local_time"}}, // no parameters
		},
		Knowledge: []assembler.Knowledge{{ID: "k1", Content: "Umbrellas are advised when rain is forecast.", Score: 0.9, Source: "tips.md"}},
		History: []assembler.Message{
			{Role: "user", Content: "What's the weather in Paris and in Rome?"},
			{Role: "assistant", ToolCalls: []assembler.ToolCall{
				{ID: "call_paris", Type: "function", Function: assembler.ToolCallFunction{Name: "weather", Arguments: `{"city":"Paris"}`}},
				{ID: "call_rome", Type: "function", Function: assembler.ToolCallFunction{Name: "weather", Arguments: `{"city": "Rome"}`}},
			}},
			{Role: "tool", ToolCallID: "call_paris", Content: "sunny, 24°C"},
			{Role: "tool", ToolCallID: "call_rome", Content: "rain, 18°C"},
			{Role: "assistant", Content: "Paris is sunny (24°C); Rome has rain (18°C)."},
		},
		Message: "Should I take an umbrella to Rome?",
	}
}

// sdkMidTask is a conversation that ends with a tool exchange and no new user message: the model is to
// continue from the tool results.
func sdkMidTask() *assembler.Request {
	req := sdkToolConversation()
	req.History = req.History[:4]
	req.Message = ""
	return req
}

// sdkImages is a question about two pictures: one as PNG data, one at a URL of a given size.
func sdkImages() *assembler.Request {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 640, 480))); err != nil {
		panic(err)
	}
	url := loom.ImageURLPart("https://example.com/chart.png", loom.DetailLow)
	url.Image.Width, url.Image.Height = 1024, 768
	return &assembler.Request{
		Model:        "claude-sonnet-4-5",
		Instructions: "You describe pictures.",
		History: []assembler.Message{
			{Role: "user", Content: "What are these?", Parts: []loom.Part{loom.ImageDataPart(b.Bytes(), loom.DetailHigh), loom.TextPart("and"), url}},
			{Role: "assistant", Content: "A blank page and a chart."},
		},
		Message: "Which is larger?",
	}
}

// sdkCases are the fixed requests of the SDK tests.
func sdkCases() map[string]func() *assembler.Request {
	return map[string]func() *assembler.Request{
		"cookbook":          cookbookRequest,
		"tool conversation": sdkToolConversation,
		"mid task":          sdkMidTask,
		"images":            sdkImages,
	}
}

func TestSDK_OpenAIMatchesTheSDKAndTheRules(t *testing.T) {
	t.Parallel()
	for name, mk := range sdkCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := mk()
			req.Format = assembler.FormatOpenAI
			res, err := assembler.AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range sdkCheckOpenAI(res) {
				t.Error(p)
			}
		})
	}
	t.Run("tool conversation shape", func(t *testing.T) {
		t.Parallel()
		res, err := assembler.AssembleRequest(context.Background(), sdkToolConversation())
		if err != nil {
			t.Fatal(err)
		}
		msgs := sdkOurJSON(t, res.Messages)
		want := []string{"system", "user", "assistant", "tool", "tool", "assistant", "system", "user"}
		if got := sdkRoles(res); !slices.Equal(got, want) {
			t.Fatalf("roles %v, want %v", got, want)
		}
		// The assistant's tool call has no text: its content is null (or absent), never "".
		if c, ok := msgs[2].(map[string]any)["content"]; ok && c != nil {
			t.Errorf("assistant tool call message has content %#v, want null or none", c)
		}
		if len(res.Tools) != 2 {
			t.Errorf("%d tools, want 2", len(res.Tools))
		}
	})
}

func TestSDK_AnthropicMatchesTheSDKAndTheRules(t *testing.T) {
	t.Parallel()
	t.Run("cache breakpoints", func(t *testing.T) {
		t.Parallel()
		for _, ttl := range []string{"", assembler.CacheTTL1h} {
			req := sdkToolConversation()
			req.Format, req.Model, req.CacheTTL = assembler.FormatAnthropic, "claude-sonnet-4-5", ttl
			req.Instructions = strings.Repeat("Answer from the records and say which. ", 150)
			req.Tools[len(req.Tools)-1].Function.Description = strings.Repeat("Look it up. ", 400)
			res, err := assembler.AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(res)
			if n := strings.Count(string(raw), `"cache_control":`); n != 4 || res.SystemBlocks == nil {
				t.Fatalf("ttl %q: %d breakpoints (want 4) in %s", ttl, n, raw)
			}
			if ttl != "" && strings.Count(string(raw), `"ttl":"1h"`) != 4 {
				t.Errorf("ttl %q: not every breakpoint has it: %s", ttl, raw)
			}
			for _, p := range sdkCheckAnthropic(res) { // the SDK keeps every cache_control, as sent
				t.Error(p)
			}
		}
	})
	for name, mk := range sdkCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := mk()
			req.Format = assembler.FormatAnthropic
			res, err := assembler.AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range sdkCheckAnthropic(res) {
				t.Error(p)
			}
		})
	}
	t.Run("tool conversation shape", func(t *testing.T) {
		t.Parallel()
		req := sdkToolConversation()
		req.Format = assembler.FormatAnthropic
		res, err := assembler.AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.System == "" || !strings.Contains(res.System, "weather") {
			t.Errorf("system %q lacks the instructions", res.System)
		}
		// user, assistant [tool_use, tool_use], user [tool_result, tool_result], assistant [text],
		// user [context, message].
		var got []string
		for _, m := range res.Messages {
			var types []string
			for _, b := range m.Blocks {
				types = append(types, b.Type)
			}
			got = append(got, m.Role+"["+strings.Join(types, ",")+"]")
		}
		want := []string{"user[text]", "assistant[tool_use,tool_use]", "user[tool_result,tool_result]", "assistant[text]", "user[text,text]"}
		if !slices.Equal(got, want) {
			t.Errorf("messages %v, want %v", got, want)
		}
		if len(res.Tools) != 2 {
			t.Errorf("%d tools, want 2", len(res.Tools))
		}
	})
}

func TestSDK_OpenAIRandomRequests(t *testing.T) {
	t.Parallel()
	testRandomSDK(t, assembler.FormatOpenAI, rand.New(rand.NewPCG(3, 4)), sdkCheckOpenAI)
}

func TestSDK_AnthropicRandomRequests(t *testing.T) {
	t.Parallel()
	testRandomSDK(t, assembler.FormatAnthropic, rand.New(rand.NewPCG(5, 6)), sdkCheckAnthropic)
}

// historyHasUserBeforeCalls reports whether a user message comes before the history's first tool call.
func historyHasUserBeforeCalls(h []assembler.Message) bool {
	for _, m := range h {
		if m.Role == "user" {
			return true
		}
		if len(m.ToolCalls) > 0 {
			return false
		}
	}
	return true
}

// testRandomSDK checks 200 random requests that fit their budget; it reports the first few that fail,
// each with its request.
func testRandomSDK(t *testing.T, format string, r *rand.Rand, check func(*assembler.Result) []string) {
	t.Helper()
	const want = 200
	fits, failed := 0, 0
	withCalls, withTwoCalls, withTools := 0, 0, 0
	for attempt := 0; fits < want && attempt < 5*want; attempt++ {
		req := sdkRandomRequest(r, format)
		res, err := assembler.AssembleRequest(context.Background(), req)
		var be *assembler.BudgetError
		if errors.As(err, &be) {
			continue
		}
		if errors.Is(err, assembler.ErrNoUserTurn) {
			if historyHasUserBeforeCalls(req.History) {
				t.Fatalf("request %d: %v, but a user message comes before the first tool call", attempt, err)
			}
			continue // a conversation cannot start with the assistant's tool call
		}
		if err != nil {
			t.Fatalf("request %d: %v", attempt, err)
		}
		fits++
		calls := 0
		for _, m := range res.Messages {
			n := len(m.ToolCalls)
			for _, b := range m.Blocks {
				if b.Type == "tool_use" {
					n++
				}
			}
			calls = max(calls, n)
		}
		run := 0 // the responses format's function calls in a row
		for _, it := range res.Input {
			if it.Type == "function_call" {
				run++
				calls = max(calls, run)
			} else {
				run = 0
			}
		}
		for _, c := range res.Contents {
			n := 0
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					n++
				}
			}
			calls = max(calls, n)
		}
		withCalls += min(calls, 1)
		if calls >= 2 {
			withTwoCalls++
		}
		if len(res.Tools) > 0 {
			withTools++
		}
		if problems := check(res); len(problems) > 0 {
			failed++
			if failed <= 3 {
				b, _ := json.Marshal(req)
				t.Errorf("request %d:\n  %s\nrequest: %s", attempt, strings.Join(problems, "\n  "), b)
			}
		}
	}
	if fits < want {
		t.Errorf("only %d requests fit their budget, want %d", fits, want)
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed the checks", failed, fits)
	}
	// The requests must exercise what the checks are about, or they prove little.
	if withCalls < want/4 || withTwoCalls < want/20 || withTools < want/4 {
		t.Errorf("of %d results, %d have tool calls, %d two calls in one message, %d tools: too few", fits, withCalls, withTwoCalls, withTools)
	}
	t.Logf("%d results: %d with tool calls, %d with two calls in one message, %d with tools", fits, withCalls, withTwoCalls, withTools)
}

// randomRequest builds a request with random regions.
func randomRequest(r *rand.Rand) *assembler.Request {
	words := []string{"premium", "plan", "costs", "the", "user", "中文", "Привет", "😀", "&", "<tag>", "\"q\"", "\n", "data", "42"}
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	req := &assembler.Request{Model: []string{"gpt-4o", "gpt-4", "claude-sonnet-4-5"}[r.IntN(3)], Instructions: text(r.IntN(30)), Message: text(1 + r.IntN(20))}
	for i := range r.IntN(6) {
		req.Memory = append(req.Memory, assembler.MemoryFact{Key: fmt.Sprintf("k%d", i), Value: text(1 + r.IntN(8)), Pinned: r.IntN(3) == 0, UpdatedAt: time.Unix(int64(r.IntN(1000)), 0)})
	}
	for i := range r.IntN(30) {
		req.Knowledge = append(req.Knowledge, assembler.Knowledge{ID: fmt.Sprintf("kb%d", i), Content: text(1 + r.IntN(80)), Score: r.Float64(), Source: "doc" + fmt.Sprint(r.IntN(5))})
	}
	if r.IntN(4) > 0 {
		req.History = append(req.History, assembler.Message{Role: "user", Content: text(1 + r.IntN(40))})
	}
	for i := range r.IntN(20) {
		switch r.IntN(4) {
		case 0:
			id := fmt.Sprintf("call%d", i)
			req.History = append(req.History,
				assembler.Message{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: `{"q":"x"}`}}}},
				assembler.Message{Role: "tool", ToolCallID: id, Content: text(1 + r.IntN(30))})
		case 1:
			req.History = append(req.History, assembler.Message{Role: "assistant", Content: text(1 + r.IntN(40))})
		default:
			req.History = append(req.History, assembler.Message{Role: "user", Content: text(1 + r.IntN(40))})
		}
	}
	for i := range r.IntN(4) {
		req.ToolOutputs = append(req.ToolOutputs, assembler.ToolOutput{Tool: "search", CallID: fmt.Sprintf("s%d", i), Result: text(1 + r.IntN(300))})
	}
	if r.IntN(2) == 0 {
		req.Tools = []assembler.Tool{{Type: "function", Function: assembler.ToolFunction{Name: "lookup", Description: text(5), Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}}
	}
	return req
}

// sdkRandomRequest is randomRequest in format, with more varied history and tools: text beside tool
// calls, two calls in one message (with arguments that are not a JSON object), names, system messages
// in the history, strict and parameterless tools. Half of the requests get a small budget, so that
// history and other regions are trimmed.
func sdkRandomRequest(r *rand.Rand, format string) *assembler.Request {
	req := randomRequest(r)
	req.Format = format
	if r.IntN(2) == 0 {
		req.MaxTokens = 50 + r.IntN(1500)
	}
	var h []assembler.Message
	for i := 0; i < len(req.History); i++ {
		m := req.History[i]
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			if r.IntN(3) == 0 {
				m.Content = "Let me look that up."
			}
			var extra []assembler.Message
			if r.IntN(3) == 0 && i+1 < len(req.History) && req.History[i+1].ToolCallID == m.ToolCalls[0].ID {
				id := m.ToolCalls[0].ID + "_b"
				args := []string{`{"q":"y","n":[1,2,{"deep":true}]}`, `{ "q" : "spaced" }`, ``, `[1,2]`, `"text"`, `{"broken":`}[r.IntN(6)]
				m.ToolCalls = append(slices.Clone(m.ToolCalls), assembler.ToolCall{ID: id, Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: args}})
				extra = append(extra, assembler.Message{Role: "tool", ToolCallID: id, Content: "second result"})
			}
			h = append(h, m)
			for i+1 < len(req.History) && req.History[i+1].Role == "tool" {
				i++
				h = append(h, req.History[i])
			}
			h = append(h, extra...)
		case m.Role == "user":
			if r.IntN(8) == 0 {
				h = append(h, assembler.Message{Role: "system", Content: "Note: the user is on the free plan."})
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
			req.Tools = append(req.Tools, assembler.Tool{Type: "function", Function: assembler.ToolFunction{Name: "now"}})
		}
	}
	return req
}

func TestSDK_TextIsOnePrompt(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, req *assembler.Request) {
		t.Helper()
		res, err := assembler.AssembleRequest(context.Background(), req)
		var be *assembler.BudgetError
		if errors.As(err, &be) || errors.Is(err, assembler.ErrNoUserTurn) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var problems []string
		if res.Text == "" {
			problems = append(problems, "empty text")
		}
		if !strings.HasSuffix(res.Text, "Assistant:") {
			problems = append(problems, fmt.Sprintf("text does not end with %q: ...%q", "Assistant:", sdkTail(res.Text, 40)))
		}
		if strings.TrimSpace(req.Message) != "" && !strings.Contains(res.Text, "User: "+indented(req.Message)) {
			problems = append(problems, "text lacks the message")
		}
		if req.Instructions != "" && !strings.Contains(res.Text, req.Instructions) {
			problems = append(problems, "text lacks the instructions")
		}
		for _, tool := range req.Tools {
			if !strings.Contains(res.Text, `"`+tool.Function.Name+`"`) {
				problems = append(problems, "text lacks tool "+tool.Function.Name)
			}
		}
		if len(res.Messages) > 0 || res.System != "" || len(res.Tools) > 0 {
			problems = append(problems, fmt.Sprintf("text format has %d messages, system %q, %d tools", len(res.Messages), res.System, len(res.Tools)))
		}
		if len(problems) > 0 {
			b, _ := json.Marshal(req)
			t.Errorf("%s\nrequest: %s", strings.Join(problems, "\n"), b)
		}
	}
	for name, mk := range sdkCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := mk()
			req.Format = assembler.FormatText
			check(t, req)
		})
	}
	t.Run("random", func(t *testing.T) {
		t.Parallel()
		r := rand.New(rand.NewPCG(7, 8))
		for range 200 {
			check(t, sdkRandomRequest(r, assembler.FormatText))
		}
	})
}

// TestSDK_EdgeHistories feeds histories that a provider-ready output must repair or reject: the
// assembled output must still pass the SDK comparison and the provider's rules.
func TestSDK_EdgeHistories(t *testing.T) {
	t.Parallel()
	call := func(ids ...string) assembler.Message {
		m := assembler.Message{Role: "assistant"}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, assembler.ToolCall{ID: id, Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: `{"q":"x"}`}})
		}
		return m
	}
	result := func(id string) assembler.Message {
		return assembler.Message{Role: "tool", ToolCallID: id, Content: "found it"}
	}
	user := func(s string) assembler.Message { return assembler.Message{Role: "user", Content: s} }
	assistant := func(s string) assembler.Message { return assembler.Message{Role: "assistant", Content: s} }
	cases := map[string]struct {
		history []assembler.Message
		message string
	}{
		"unanswered call at the end":      {[]assembler.Message{user("Look it up."), call("c1")}, "And?"},
		"unanswered call mid history":     {[]assembler.Message{user("Look it up."), call("c1"), user("Never mind."), assistant("OK.")}, "Something else."},
		"partly answered calls":           {[]assembler.Message{user("Look both up."), call("c1", "c2"), result("c1"), assistant("One found.")}, "And the other?"},
		"exchange without a user message": {[]assembler.Message{call("c1"), result("c1")}, "What did you find?"},
		"assistant message with no text":  {[]assembler.Message{user("Hi."), assistant(""), user("Hello?")}, "Anyone?"},
		"whitespace-only assistant text":  {[]assembler.Message{user("Hi."), assistant("\n")}, "Hello?"},
		"whitespace-only message":         {[]assembler.Message{user("Hi."), assistant("Hello.")}, "\n"},
		"whitespace-only text beside a call": {[]assembler.Message{user("Look it up."),
			{Role: "assistant", Content: " \n ", ToolCalls: call("c1").ToolCalls}, result("c1")}, ""},
		"final assistant text ending in whitespace":    {[]assembler.Message{user("Write a haiku."), assistant("Leaves fall  \n")}, ""},
		"nothing but instructions":                     {nil, ""},
		"nothing but instructions and a blank message": {nil, " \t\n"},
		"result answered twice":                        {[]assembler.Message{user("Look it up."), call("c1"), result("c1"), result("c1"), assistant("Done.")}, "Thanks."},
		"tool result with a name": {[]assembler.Message{user("Look it up."), call("c1"),
			{Role: "tool", ToolCallID: "c1", Name: "lookup", Content: "found it"}, assistant("Done.")}, "Thanks."},
		"call ids outside [a-zA-Z0-9_-]": {[]assembler.Message{user("Look it up."), call("functions.lookup:0"), result("functions.lookup:0"), assistant("Done.")}, "Thanks."},
		"system message in the history":  {[]assembler.Message{{Role: "system", Content: "Be brief."}, user("Hi."), assistant("Hello.")}, "Bye."},
		"arguments that are not an object": {[]assembler.Message{user("Look it up."),
			{Role: "assistant", ToolCalls: []assembler.ToolCall{
				{ID: "c1", Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: ``}},
				{ID: "c2", Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: `[1]`}},
				{ID: "c3", Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: `{"a":`}},
			}}, result("c1"), result("c2"), result("c3"), assistant("Done.")}, "Thanks."},
	}
	for name, c := range cases {
		for _, format := range []string{assembler.FormatOpenAI, assembler.FormatAnthropic} {
			t.Run(name+"/"+format, func(t *testing.T) {
				t.Parallel()
				req := &assembler.Request{Model: "gpt-4o", Format: format, Instructions: "Be helpful.", History: c.history, Message: c.message}
				res, err := assembler.AssembleRequest(context.Background(), req)
				if err != nil {
					if errors.Is(err, assembler.ErrInvalidRequest) {
						return // rejecting the history is also a correct answer
					}
					t.Fatal(err)
				}
				check := sdkCheckOpenAI
				if format == assembler.FormatAnthropic {
					check = sdkCheckAnthropic
				}
				if problems := check(res); len(problems) > 0 {
					b, _ := json.Marshal(req)
					out, _ := json.Marshal(res.Messages)
					t.Errorf("%s\nrequest:  %s\nmessages: %s", strings.Join(problems, "\n"), b, out)
				}
			})
		}
	}
}

// TestSDK_ChecksCatchBrokenOutput makes sure the checks above are not vacuous: each broken output is
// reported, with the reason.
func TestSDK_ChecksCatchBrokenOutput(t *testing.T) {
	t.Parallel()
	call := []assembler.ToolCall{{ID: "c1", Type: "function", Function: assembler.ToolCallFunction{Name: "f", Arguments: "{}"}}}
	text := func(s string) assembler.Block { return assembler.Block{Type: "text", Text: s} }
	use := assembler.Block{Type: "tool_use", ID: "c1", Name: "f", Input: json.RawMessage(`{}`)}
	answer := assembler.Block{Type: "tool_result", ToolUseID: "c1", Content: "r"}
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}
	for name, c := range map[string]struct {
		res  *assembler.Result
		want string
	}{
		"openai: result before its call": {&assembler.Result{Format: assembler.FormatOpenAI, Messages: []assembler.ChatMessage{
			{Role: "user", Content: "q"}, {Role: "tool", ToolCallID: "c1", Content: "r"}}}, "answers no unanswered call"},
		"openai: call without result": {&assembler.Result{Format: assembler.FormatOpenAI, Messages: []assembler.ChatMessage{
			{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: call}, {Role: "user", Content: "q"}}}, "comes before the results"},
		"openai: unknown role": {&assembler.Result{Format: assembler.FormatOpenAI, Messages: []assembler.ChatMessage{{Role: "robot", Content: "q"}}}, "cannot read"},
		"openai: field the SDK drops": {&assembler.Result{Format: assembler.FormatOpenAI, Messages: []assembler.ChatMessage{
			{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: call}, {Role: "tool", ToolCallID: "c1", Name: "f", Content: "r"}}}, "differs"},
		"openai: tool the SDK cannot read": {&assembler.Result{Format: assembler.FormatOpenAI, Messages: []assembler.ChatMessage{{Role: "user", Content: "q"}},
			Tools: []json.RawMessage{json.RawMessage(`{"name":"f","input_schema":{}}`)}}, "tools[0]"},
		"anthropic: first message the assistant's": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{
			{Role: "assistant", Blocks: []assembler.Block{text("a")}}, {Role: "user", Blocks: []assembler.Block{text("q")}}}}, "must be the user's"},
		"anthropic: roles do not alternate": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{
			{Role: "user", Blocks: []assembler.Block{text("q")}}, {Role: "user", Blocks: []assembler.Block{text("q")}}}}, "alternate"},
		"anthropic: text before a tool result": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{
			{Role: "user", Blocks: []assembler.Block{text("q")}}, {Role: "assistant", Blocks: []assembler.Block{use}}, {Role: "user", Blocks: []assembler.Block{text("x"), answer}}}}, "come first"},
		"anthropic: unanswered tool use": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{
			{Role: "user", Blocks: []assembler.Block{text("q")}}, {Role: "assistant", Blocks: []assembler.Block{use}}, {Role: "user", Blocks: []assembler.Block{text("x")}}}}, "not answered"},
		"anthropic: empty text": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{{Role: "user", Blocks: []assembler.Block{{Type: "text"}}}}}, "empty text"},
		"anthropic: a whitespace text beside a tool use": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{
			{Role: "user", Blocks: []assembler.Block{text("q")}}, {Role: "assistant", Blocks: []assembler.Block{text(" \n"), use}}, {Role: "user", Blocks: []assembler.Block{answer}}}}, "text block of whitespace"},
		"anthropic: a final assistant text ending in whitespace": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{
			{Role: "user", Blocks: []assembler.Block{text("q")}}, {Role: "assistant", Blocks: []assembler.Block{text("a ")}}}}, "ends with whitespace"},
		"anthropic: no messages": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{}, System: "s"}, "no messages"},
		"anthropic: input not an object": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{
			{Role: "user", Blocks: []assembler.Block{text("q")}}, {Role: "assistant", Blocks: []assembler.Block{{Type: "tool_use", ID: "c1", Name: "f", Input: json.RawMessage(`"x"`)}}}}}, "not a JSON object"},
		"anthropic: string content": {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{{Role: "user", Content: "q"}}}, "not an array of blocks"},
		"anthropic: openai tools":   {&assembler.Result{Format: assembler.FormatAnthropic, Messages: []assembler.ChatMessage{{Role: "user", Blocks: []assembler.Block{text("q")}}}, Tools: tools}, "tools[0]"},
	} {
		check := sdkCheckOpenAI
		if c.res.Format == assembler.FormatAnthropic {
			check = sdkCheckAnthropic
		}
		c.res.Model = "gpt-4o"
		if problems := strings.Join(check(c.res), "\n"); !strings.Contains(problems, c.want) {
			t.Errorf("%s: problems %q, want one with %q", name, problems, c.want)
		}
	}
}

// sdkCheckOpenAI returns what is wrong with an OpenAI result: mismatches with the SDK, broken rules.
func sdkCheckOpenAI(res *assembler.Result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if res.Format != assembler.FormatOpenAI {
		fail("format %q", res.Format)
	}
	msgs, tools, err := sdkRawJSON(res)
	if err != nil {
		return []string{err.Error()}
	}
	ours := map[string]any{"messages": sdkNormalizeOpenAI(sdkDecodeAll(msgs)), "tools": sdkDecodeAll(tools)}

	// 1. Our JSON, unmarshalled into the SDK's params.
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(res.Model)}
	for i, raw := range msgs {
		var p openai.ChatCompletionMessageParamUnion
		if err := json.Unmarshal(raw, &p); err != nil {
			fail("messages[%d]: the SDK cannot read %s: %v", i, raw, err)
		}
		params.Messages = append(params.Messages, p)
	}
	for i, raw := range tools {
		var p openai.ChatCompletionToolUnionParam
		if err := json.Unmarshal(raw, &p); err != nil || p.OfFunction == nil {
			fail("tools[%d]: the SDK cannot read %s as a function tool: %v", i, raw, err)
		}
		params.Tools = append(params.Tools, p)
	}
	problems = append(problems, sdkCompareSent("openai (unmarshalled)", params, ours, []string{"messages", "tools"})...)

	// 2. The same params, built with the SDK's constructors.
	built := openai.ChatCompletionNewParams{Model: shared.ChatModel(res.Model)}
	for i, raw := range msgs {
		p, err := sdkBuildOpenAIMessage(raw)
		if err != nil {
			fail("messages[%d] %s: %v", i, raw, err)
			continue
		}
		built.Messages = append(built.Messages, p)
	}
	for i, raw := range tools {
		p, err := sdkBuildOpenAITool(raw)
		if err != nil {
			fail("tools[%d] %s: %v", i, raw, err)
			continue
		}
		built.Tools = append(built.Tools, p)
	}
	problems = append(problems, sdkCompareSent("openai (constructed)", built, ours, []string{"messages", "tools"})...)

	// 3. OpenAI's rules.
	problems = append(problems, sdkOpenAIRules(msgs, tools)...)
	return problems
}

// sdkOpenAIWire is an OpenAI Chat Completions message as we send it; decoded strictly.
type sdkOpenAIWire struct {
	Role    string  `json:"role"`
	Content *string `json:"-"` // a string content
	Parts   []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		} `json:"image_url"`
	} `json:"-"` // an array content: a user message's content parts
	RawContent json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// decodeContent reads w.RawContent into Content (a string) or Parts (an array of content parts).
func (w *sdkOpenAIWire) decodeContent() error {
	switch c := bytes.TrimSpace(w.RawContent); {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '[':
		dec := json.NewDecoder(bytes.NewReader(c))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&w.Parts); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		if len(w.Parts) == 0 {
			return errors.New("an empty array of content parts")
		}
	default:
		w.Content = new(string)
		return json.Unmarshal(c, w.Content)
	}
	return nil
}

func sdkBuildOpenAIMessage(raw json.RawMessage) (openai.ChatCompletionMessageParamUnion, error) {
	var w sdkOpenAIWire
	if err := sdkDecodeStrict(raw, &w); err != nil {
		return openai.ChatCompletionMessageParamUnion{}, err
	}
	if err := w.decodeContent(); err != nil {
		return openai.ChatCompletionMessageParamUnion{}, err
	}
	if w.Parts != nil { // a user message's content parts, built with the SDK's constructors
		if w.Role != "user" {
			return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("content parts in a %s message", w.Role)
		}
		var parts []openai.ChatCompletionContentPartUnionParam
		for j, p := range w.Parts {
			switch p.Type {
			case "text":
				parts = append(parts, openai.TextContentPart(p.Text))
			case "image_url":
				parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: p.ImageURL.URL, Detail: p.ImageURL.Detail}))
			default:
				return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("content[%d]: part type %q", j, p.Type)
			}
		}
		m := openai.UserMessage(parts)
		if w.Name != "" {
			m.OfUser.Name = openai.String(w.Name)
		}
		return m, nil
	}
	content := ""
	if w.Content != nil {
		content = *w.Content
	} else if w.Role != "assistant" {
		return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("a %s message needs content", w.Role)
	}
	switch w.Role {
	case "system":
		m := openai.SystemMessage(content)
		if w.Name != "" {
			m.OfSystem.Name = openai.String(w.Name)
		}
		return m, nil
	case "user":
		m := openai.UserMessage(content)
		if w.Name != "" {
			m.OfUser.Name = openai.String(w.Name)
		}
		return m, nil
	case "assistant":
		var a openai.ChatCompletionAssistantMessageParam
		if w.Content != nil {
			a = *openai.AssistantMessage(content).OfAssistant
		}
		if w.Name != "" {
			a.Name = openai.String(w.Name)
		}
		for _, c := range w.ToolCalls {
			if c.Type != "function" {
				return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call of type %q", c.Type)
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: c.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Function.Name, Arguments: c.Function.Arguments}},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	case "tool":
		// OpenAI's tool message is {role, content, tool_call_id}: a name has no place in it.
		return openai.ToolMessage(content, w.ToolCallID), nil
	}
	return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("role %q", w.Role)
}

func sdkBuildOpenAITool(raw json.RawMessage) (openai.ChatCompletionToolUnionParam, error) {
	var w struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description *string        `json:"description"`
			Parameters  map[string]any `json:"parameters"`
			Strict      *bool          `json:"strict"`
		} `json:"function"`
	}
	if err := sdkDecodeStrict(raw, &w); err != nil {
		return openai.ChatCompletionToolUnionParam{}, err
	}
	if w.Type != "function" {
		return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool type %q", w.Type)
	}
	fd := shared.FunctionDefinitionParam{Name: w.Function.Name}
	if w.Function.Description != nil {
		fd.Description = openai.String(*w.Function.Description)
	}
	if w.Function.Parameters != nil {
		fd.Parameters = shared.FunctionParameters(w.Function.Parameters)
	}
	if w.Function.Strict != nil {
		fd.Strict = openai.Bool(*w.Function.Strict)
	}
	return openai.ChatCompletionFunctionTool(fd), nil
}

// sdkNormalizeOpenAI drops `"content": null`, which the SDK omits (see the file comment).
func sdkNormalizeOpenAI(msgs []any) []any {
	for _, m := range msgs {
		if obj, ok := m.(map[string]any); ok {
			if c, ok := obj["content"]; ok && c == nil {
				delete(obj, "content")
			}
		}
	}
	return msgs
}

var (
	sdkOpenAIToolName    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	sdkAnthropicToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	sdkAnthropicToolID   = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// sdkOpenAIRules checks Chat Completions' rules: roles are system, user, assistant or tool; an assistant
// message with tool_calls is followed by exactly its results (one per call) before any other message;
// every tool message answers a call of the assistant message before it that is not answered yet.
func sdkOpenAIRules(msgs, tools []json.RawMessage) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(msgs) == 0 {
		fail("no messages")
	}
	pending := map[string]bool{} // calls of the last assistant message not answered yet
	pendingAt := -1
	seen := map[string]bool{}
	for i, raw := range msgs {
		var m sdkOpenAIWire
		if err := json.Unmarshal(raw, &m); err != nil {
			fail("messages[%d]: %v", i, err)
			continue
		}
		if err := m.decodeContent(); err != nil {
			fail("messages[%d]: %v", i, err)
			continue
		}
		if m.Parts != nil && m.Role != "user" {
			fail("messages[%d] (%s) has content parts; only a user message may have images", i, m.Role)
		}
		if m.Role != "tool" && len(pending) > 0 {
			fail("messages[%d] (%s) comes before the results of calls %v of messages[%d]", i, m.Role, sdkKeys(pending), pendingAt)
			pending = map[string]bool{}
		}
		switch m.Role {
		case "system", "user":
			if m.Content == nil && m.Parts == nil {
				fail("messages[%d] (%s) has no content", i, m.Role)
			}
		case "assistant":
			if m.Content == nil && len(m.ToolCalls) == 0 {
				fail("messages[%d]: assistant message with neither content nor tool_calls", i)
			}
			for _, c := range m.ToolCalls {
				switch {
				case c.ID == "" || c.Function.Name == "":
					fail("messages[%d]: tool call without id or name", i)
				case seen[c.ID]:
					fail("messages[%d]: tool call id %q used twice", i, c.ID)
				case c.Type != "function":
					fail("messages[%d]: tool call %q of type %q", i, c.ID, c.Type)
				}
				seen[c.ID] = true
				pending[c.ID] = true
				pendingAt = i
			}
		case "tool":
			if m.Content == nil {
				fail("messages[%d] (tool) has no content", i)
			}
			if !pending[m.ToolCallID] {
				fail("messages[%d]: tool result for %q answers no unanswered call of the assistant message before it", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
		default:
			fail("messages[%d]: role %q", i, m.Role)
		}
	}
	if len(pending) > 0 {
		fail("calls %v of messages[%d] have no results", sdkKeys(pending), pendingAt)
	}
	for i, raw := range tools {
		var tool struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil || tool.Type != "function" || !sdkOpenAIToolName.MatchString(tool.Function.Name) {
			fail("tools[%d] %s: want a function tool named by ^[a-zA-Z0-9_-]{1,64}$", i, raw)
		}
	}
	return problems
}

// sdkCheckAnthropic returns what is wrong with an Anthropic result: mismatches with the SDK, broken rules.
func sdkCheckAnthropic(res *assembler.Result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if res.Format != assembler.FormatAnthropic {
		fail("format %q", res.Format)
	}
	msgs, tools, err := sdkRawJSON(res)
	if err != nil {
		return []string{err.Error()}
	}
	ours := map[string]any{"messages": sdkNormalizeAnthropic(sdkDecodeAll(msgs)), "tools": sdkDecodeAll(tools)}
	var system, builtSystem []anthropic.TextBlockParam
	switch {
	case res.SystemBlocks != nil: // the system prompt as blocks, a breakpoint on them: read as the SDK reads them
		raw, err := json.Marshal(res.SystemBlocks)
		if err != nil {
			return []string{err.Error()}
		}
		if err := json.Unmarshal(raw, &system); err != nil {
			fail("system_blocks: the SDK cannot read %s: %v", raw, err)
		}
		var blocks []sdkAnthropicBlock
		if err := sdkDecodeStrict(raw, &blocks); err != nil {
			fail("system_blocks %s: %v", raw, err)
		}
		for _, b := range blocks {
			if b.Type != "text" || b.Text == nil || *b.Text != res.System {
				fail("system_blocks %s: want one text block of the system prompt", raw)
				continue
			}
			tb := anthropic.TextBlockParam{Text: *b.Text}
			if b.CacheControl != nil {
				tb.CacheControl = sdkCacheControl(b.CacheControl)
			}
			builtSystem = append(builtSystem, tb)
		}
		ours["system"] = sdkDecodeAll([]json.RawMessage{raw})[0]
	case res.System != "":
		system = []anthropic.TextBlockParam{{Text: res.System}}
		builtSystem = system
		ours["system"] = []any{map[string]any{"type": "text", "text": res.System}}
	}

	// 1. Our JSON, unmarshalled into the SDK's params.
	params := anthropic.MessageNewParams{Model: anthropic.Model(res.Model), MaxTokens: 1024, System: system}
	for i, raw := range msgs {
		var p anthropic.MessageParam
		if err := json.Unmarshal(raw, &p); err != nil {
			fail("messages[%d]: the SDK cannot read %s: %v", i, raw, err)
		}
		params.Messages = append(params.Messages, p)
	}
	for i, raw := range tools {
		var p anthropic.ToolUnionParam
		if err := json.Unmarshal(raw, &p); err != nil || p.OfTool == nil {
			fail("tools[%d]: the SDK cannot read %s as a custom tool: %v", i, raw, err)
		}
		params.Tools = append(params.Tools, p)
	}
	problems = append(problems, sdkCompareSent("anthropic (unmarshalled)", params, ours, []string{"messages", "tools", "system"})...)

	// 2. The same params, built with the SDK's constructors.
	built := anthropic.MessageNewParams{Model: anthropic.Model(res.Model), MaxTokens: 1024, System: builtSystem}
	for i, raw := range msgs {
		p, err := sdkBuildAnthropicMessage(raw)
		if err != nil {
			fail("messages[%d] %s: %v", i, raw, err)
			continue
		}
		built.Messages = append(built.Messages, p)
	}
	for i, raw := range tools {
		p, err := sdkBuildAnthropicTool(raw)
		if err != nil {
			fail("tools[%d] %s: %v", i, raw, err)
			continue
		}
		built.Tools = append(built.Tools, p)
	}
	problems = append(problems, sdkCompareSent("anthropic (constructed)", built, ours, []string{"messages", "tools", "system"})...)

	// 3. Anthropic's rules.
	problems = append(problems, sdkAnthropicRules(msgs, tools)...)
	return problems
}

// sdkAnthropicWire is an Anthropic message as we send it; decoded strictly, so its content must be an
// array of blocks.
type sdkAnthropicWire struct {
	Role    string              `json:"role"`
	Content []sdkAnthropicBlock `json:"content"`
}

// sdkAnthropicBlock is a content block as we send it.
type sdkAnthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   *string         `json:"content"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	CacheControl *sdkCacheControlWire `json:"cache_control"`
}

// sdkCacheControlWire is a cache breakpoint as we send it.
type sdkCacheControlWire struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

// sdkCacheControl is the SDK's breakpoint of ours: an ephemeral one, of the default TTL or of an hour.
func sdkCacheControl(c *sdkCacheControlWire) anthropic.CacheControlEphemeralParam {
	cc := anthropic.NewCacheControlEphemeralParam()
	if c.TTL != "" {
		cc.TTL = anthropic.CacheControlEphemeralTTL(c.TTL)
	}
	return cc
}

func sdkBuildAnthropicMessage(raw json.RawMessage) (anthropic.MessageParam, error) {
	var w sdkAnthropicWire
	if err := sdkDecodeStrict(raw, &w); err != nil {
		return anthropic.MessageParam{}, err
	}
	var blocks []anthropic.ContentBlockParamUnion
	for j, b := range w.Content {
		switch b.Type {
		case "text":
			if b.Text == nil {
				return anthropic.MessageParam{}, fmt.Errorf("content[%d]: text block without text", j)
			}
			blocks = append(blocks, anthropic.NewTextBlock(*b.Text))
		case "tool_use":
			var input any
			if err := json.Unmarshal(b.Input, &input); err != nil {
				return anthropic.MessageParam{}, fmt.Errorf("content[%d]: tool_use input: %w", j, err)
			}
			blocks = append(blocks, anthropic.NewToolUseBlock(b.ID, input, b.Name))
		case "tool_result":
			// Not anthropic.NewToolResultBlock: it always sends is_error and a text block, even an empty one.
			tr := anthropic.ToolResultBlockParam{ToolUseID: b.ToolUseID}
			if b.Content != nil {
				tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: *b.Content}}}
			}
			blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &tr})
		case "image":
			switch {
			case b.Source == nil:
				return anthropic.MessageParam{}, fmt.Errorf("content[%d]: image block without a source", j)
			case b.Source.Type == "base64":
				blocks = append(blocks, anthropic.NewImageBlockBase64(b.Source.MediaType, b.Source.Data))
			case b.Source.Type == "url":
				blocks = append(blocks, anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: b.Source.URL}))
			default:
				return anthropic.MessageParam{}, fmt.Errorf("content[%d]: image source of type %q", j, b.Source.Type)
			}
		default:
			return anthropic.MessageParam{}, fmt.Errorf("content[%d]: block type %q", j, b.Type)
		}
		if b.CacheControl != nil {
			if b.CacheControl.Type != "ephemeral" {
				return anthropic.MessageParam{}, fmt.Errorf("content[%d]: cache_control of type %q", j, b.CacheControl.Type)
			}
			*blocks[len(blocks)-1].GetCacheControl() = sdkCacheControl(b.CacheControl)
		}
	}
	switch w.Role {
	case "user":
		return anthropic.NewUserMessage(blocks...), nil
	case "assistant":
		return anthropic.NewAssistantMessage(blocks...), nil
	}
	return anthropic.MessageParam{}, fmt.Errorf("role %q (Anthropic's messages are user or assistant)", w.Role)
}

func sdkBuildAnthropicTool(raw json.RawMessage) (anthropic.ToolUnionParam, error) {
	var w struct {
		Name         string               `json:"name"`
		Description  *string              `json:"description"`
		InputSchema  map[string]any       `json:"input_schema"`
		CacheControl *sdkCacheControlWire `json:"cache_control"`
	}
	if err := sdkDecodeStrict(raw, &w); err != nil {
		return anthropic.ToolUnionParam{}, err
	}
	var schema anthropic.ToolInputSchemaParam
	for k, v := range w.InputSchema {
		switch k {
		case "type": // the SDK's constant "object"; sdkAnthropicRules checks ours
		case "properties":
			schema.Properties = v
		case "required":
			list, _ := v.([]any)
			for _, s := range list {
				name, _ := s.(string)
				schema.Required = append(schema.Required, name)
			}
		default:
			if schema.ExtraFields == nil {
				schema.ExtraFields = map[string]any{}
			}
			schema.ExtraFields[k] = v
		}
	}
	tool := anthropic.ToolParam{Name: w.Name, InputSchema: schema}
	if w.Description != nil {
		tool.Description = anthropic.String(*w.Description)
	}
	if w.CacheControl != nil {
		if w.CacheControl.Type != "ephemeral" {
			return anthropic.ToolUnionParam{}, fmt.Errorf("cache_control of type %q", w.CacheControl.Type)
		}
		tool.CacheControl = sdkCacheControl(w.CacheControl)
	}
	return anthropic.ToolUnionParam{OfTool: &tool}, nil
}

// sdkNormalizeAnthropic spells a tool_result's string content as the SDK does, as one text block (see the
// file comment).
func sdkNormalizeAnthropic(msgs []any) []any {
	for _, m := range msgs {
		obj, _ := m.(map[string]any)
		blocks, _ := obj["content"].([]any)
		for _, b := range blocks {
			block, _ := b.(map[string]any)
			if s, ok := block["content"].(string); ok && block["type"] == "tool_result" {
				block["content"] = []any{map[string]any{"type": "text", "text": s}}
			}
		}
	}
	return msgs
}

// sdkAnthropicRules checks the Messages API's rules: the first message is the user's; roles alternate
// user/assistant; content is a non-empty array of blocks; text blocks are not empty, nor only
// whitespace; tool_use blocks are the assistant's, with ids matching ^[a-zA-Z0-9_-]+$,
// used once, and an object input; every tool_use is answered in the next message when the conversation
// goes on; every tool_result is the user's, answers an unanswered tool_use of the message just before,
// and comes before the message's other blocks; a final assistant message does not end with whitespace.
// Tools have a name matching ^[a-zA-Z0-9_-]{1,128}$ and an object input_schema.
func sdkAnthropicRules(msgs, tools []json.RawMessage) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(msgs) == 0 {
		fail("no messages")
	}
	used := map[string]bool{}
	var open map[string]bool // tool_use ids of the previous message not answered yet
	prevRole := ""
	for i, raw := range msgs {
		var m sdkAnthropicWire
		if err := json.Unmarshal(raw, &m); err != nil {
			var role struct{ Role string }
			_ = json.Unmarshal(raw, &role)
			fail("messages[%d]: content is not an array of blocks: %s", i, raw)
			open, prevRole = nil, role.Role
			continue
		}
		switch {
		case m.Role != "user" && m.Role != "assistant":
			fail("messages[%d]: role %q", i, m.Role)
		case i == 0 && m.Role != "user":
			fail("messages[0] is the %s's; the first message must be the user's", m.Role)
		case i > 0 && prevRole == m.Role:
			fail("messages[%d] and messages[%d] are both %s: roles must alternate", i-1, i, m.Role)
		}
		if len(m.Content) == 0 {
			fail("messages[%d] (%s) has no content blocks", i, m.Role)
		}
		answered := map[string]bool{}
		for j, b := range m.Content {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					fail("messages[%d].content[%d]: empty text block", i, j)
				} else if strings.TrimSpace(*b.Text) == "" { // "text content blocks must contain non-whitespace text"
					fail("messages[%d].content[%d]: a text block of whitespace", i, j)
				}
			case "tool_use":
				var input any
				_ = json.Unmarshal(b.Input, &input)
				if _, ok := input.(map[string]any); !ok {
					fail("messages[%d].content[%d]: tool_use input %s is not a JSON object", i, j, b.Input)
				}
				if m.Role != "assistant" {
					fail("messages[%d].content[%d]: tool_use in a %s message", i, j, m.Role)
				}
				if !sdkAnthropicToolID.MatchString(b.ID) {
					fail("messages[%d].content[%d]: tool_use id %q does not match ^[a-zA-Z0-9_-]+$", i, j, b.ID)
				}
				if b.Name == "" {
					fail("messages[%d].content[%d]: tool_use without a name", i, j)
				}
				if used[b.ID] {
					fail("messages[%d].content[%d]: tool_use id %q used twice", i, j, b.ID)
				}
				used[b.ID] = true
			case "tool_result":
				if m.Role != "user" {
					fail("messages[%d].content[%d]: tool_result in a %s message", i, j, m.Role)
				}
				if j > 0 && m.Content[j-1].Type != "tool_result" {
					fail("messages[%d].content[%d]: tool_result after a %s block; tool results come first", i, j, m.Content[j-1].Type)
				}
				if !open[b.ToolUseID] {
					fail("messages[%d].content[%d]: tool_result for %q answers no unanswered tool_use of the message before", i, j, b.ToolUseID)
				}
				delete(open, b.ToolUseID)
				answered[b.ToolUseID] = true
			case "image": // https://platform.claude.com/docs/en/build-with-claude/vision
				switch {
				case m.Role != "user":
					fail("messages[%d].content[%d]: an image in a %s message", i, j, m.Role)
				case b.Source == nil || !(b.Source.Type == "base64" && b.Source.Data != "" && slices.Contains([]string{"image/jpeg", "image/png", "image/gif", "image/webp"}, b.Source.MediaType) ||
					b.Source.Type == "url" && strings.HasPrefix(b.Source.URL, "https://")):
					fail("messages[%d].content[%d]: an image block without a base64 or url source", i, j)
				}
			default:
				fail("messages[%d].content[%d]: block type %q", i, j, b.Type)
			}
		}
		if len(open) > 0 {
			fail("tool_use %v of messages[%d] not answered in messages[%d]", sdkKeys(open), i-1, i)
		}
		prevRole = m.Role
		open = map[string]bool{}
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				open[b.ID] = true
			}
		}
		if i == len(msgs)-1 && m.Role == "assistant" && len(m.Content) > 0 {
			if last := m.Content[len(m.Content)-1]; last.Type == "text" && last.Text != nil && strings.TrimRight(*last.Text, " \t\n\r") != *last.Text {
				fail("messages[%d]: the final assistant message ends with whitespace", i)
			}
		}
	}
	for i, raw := range tools {
		var tool struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil || !sdkAnthropicToolName.MatchString(tool.Name) || tool.InputSchema["type"] != "object" {
			fail("tools[%d] %s: want a name matching ^[a-zA-Z0-9_-]{1,128}$ and an input_schema of type object", i, raw)
		}
	}
	return problems
}

// sdkRawJSON is each message and tool of res as we send them.
func sdkRawJSON(res *assembler.Result) (msgs, tools []json.RawMessage, err error) {
	for i, m := range res.Messages {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		msgs = append(msgs, b)
	}
	for i, tool := range res.Tools {
		if !json.Valid(tool) {
			return nil, nil, fmt.Errorf("tools[%d] is not JSON: %s", i, tool)
		}
		tools = append(tools, tool)
	}
	return msgs, tools, nil
}

// sdkCompareSent marshals the SDK's params as the SDK sends them and compares fields with ours.
func sdkCompareSent(what string, params any, ours map[string]any, fields []string) []string {
	b, err := json.Marshal(params)
	if err != nil {
		return []string{fmt.Sprintf("%s: the SDK cannot marshal the params: %v", what, err)}
	}
	var sent map[string]any
	if err := json.Unmarshal(b, &sent); err != nil {
		return []string{fmt.Sprintf("%s: %v", what, err)}
	}
	var problems []string
	for _, field := range fields {
		want, _ := ours[field].([]any)
		got, _ := sent[field].([]any)
		if len(want) != len(got) {
			problems = append(problems, fmt.Sprintf("%s: %d %s sent, we have %d", what, len(got), field, len(want)))
			continue
		}
		for i := range want {
			if !reflect.DeepEqual(want[i], got[i]) {
				w, _ := json.Marshal(want[i])
				g, _ := json.Marshal(got[i])
				problems = append(problems, fmt.Sprintf("%s: %s[%d] differs\n    ours: %s\n    sdk:  %s", what, field, i, w, g))
			}
		}
	}
	return problems
}

func sdkDecodeAll(raws []json.RawMessage) []any {
	out := []any{}
	for _, raw := range raws {
		var v any
		_ = json.Unmarshal(raw, &v)
		out = append(out, v)
	}
	return out
}

func sdkDecodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func sdkOurJSON(t *testing.T, msgs []assembler.ChatMessage) []any {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func sdkRoles(res *assembler.Result) []string {
	var out []string
	for _, m := range res.Messages {
		out = append(out, m.Role)
	}
	return out
}

func sdkKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

func sdkTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// textBreaks are the line breaks of the text format (CR LF as one), as its godoc names them.
var textBreaks = regexp.MustCompile("\r\n|[\n\v\f\r\u0085\u2028\u2029]")

// indented is s as the text format renders a body: two spaces after each line break.
func indented(s string) string {
	return textBreaks.ReplaceAllStringFunc(s, func(b string) string { return b + "  " })
}
