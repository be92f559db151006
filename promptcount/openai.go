// SPDX-License-Identifier: Apache-2.0

package promptcount

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// openAI counts a Chat Completions body by the model's rules, as the assembler's openai format counts what
// it renders: each message's framing (the per-message overhead and the role), its text (each text part a
// text of its own), its name; with the model's tool rule, each tool call framed as a message of its own
// with the function's name and its arguments as compact JSON, each tool result with the name of the
// function it answers, and the definitions as the namespace the model reads, with their overhead and the
// line break after the first system message; the tool choice; the reply priming.
func (k *counting) openAI(r *request) error {
	rule := k.m.Tools
	tools, err := openAITools(r)
	if err != nil {
		return err
	}
	hasSystem, developer := false, false
	for _, m := range r.Messages {
		hasSystem = hasSystem || m.Role == "system"
		developer = developer || m.Role == "developer"
	}
	pad := len(tools) > 0 && rule.Namespace && rule.PadSystem
	padTokens := 0
	callNames := map[string]string{}
	k.out.Messages = make([]MessageCount, 0, len(r.Messages))
	for i := range r.Messages {
		msg := &r.Messages[i]
		mc, last, err := k.openAIMessage(i, msg, r.content[i], callNames)
		if err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
		if pad && msg.Role == "system" { // the first system message, with a line break after its text
			padTokens = k.c.Count(last+"\n") - k.c.Count(last)
			pad = false
		}
		k.out.Messages = append(k.out.Messages, mc)
	}
	if len(tools) > 0 {
		defs, exact := rule.DefinitionTokens(k.c, tools)
		overhead := rule.DefinitionOverhead(hasSystem) + padTokens
		k.out.Tools = &ToolsCount{Count: len(tools), Tokens: defs + overhead, Overhead: overhead,
			Exact: exact && !developer && k.m.Exact()}
	}
	if err := k.openAIChoice(r, rule, len(tools) > 0); err != nil {
		return err
	}
	if len(r.ResponseFormat) > 0 {
		k.out.ResponseFormat = k.responseFormat(r.ResponseFormat)
	}
	k.out.ReplyPriming = k.m.ReplyPriming
	return nil
}

// openAITools returns the body's tool definitions, its functions among them, checked.
func openAITools(r *request) ([]loom.Tool, error) {
	tools := make([]loom.Tool, 0, len(r.Tools)+len(r.Functions))
	for i, t := range r.Tools {
		if t.Function == nil || (t.Type != "" && t.Type != "function") {
			return nil, fmt.Errorf("%w: tools[%d] of type %q (only function tools are counted)", ErrNotCounted, i, t.Type)
		}
		tools = append(tools, loom.Tool{Type: "function", Function: *t.Function})
	}
	for _, f := range r.Functions {
		tools = append(tools, loom.Tool{Type: "function", Function: f})
	}
	for i, t := range tools {
		if err := loom.CheckToolName(t.Function.Name); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if err := tokenizer.CheckSchemaDepth(t.Function.Parameters); err != nil {
			return nil, fmt.Errorf("tools[%d] parameters: %w", i, err)
		}
	}
	return tools, nil
}

// openAIMessage counts message i. It returns the message's last text, after which the tool rule may add
// a line break.
func (k *counting) openAIMessage(i int, msg *message, c content, callNames map[string]string) (MessageCount, string, error) {
	m, rule := k.m, k.m.Tools
	mc := MessageCount{Index: i, Role: msg.Role, Exact: k.m.Exact()}
	switch msg.Role {
	case "system", "developer", "user", "assistant", "tool", "function":
	case "":
		return mc, "", fmt.Errorf("%w: a message without a role", ErrBody)
	default:
		return mc, "", fmt.Errorf("%w: role %q (want system, developer, user, assistant or tool)", ErrBody, msg.Role)
	}
	if msg.Role == "tool" && msg.ToolCallID == "" {
		return mc, "", fmt.Errorf("%w: a tool message without tool_call_id", ErrBody)
	}
	if msg.Name != "" && msg.Role != "tool" {
		if err := loom.CheckToolName(msg.Name); err != nil { // Chat Completions' rule for a name
			return mc, "", fmt.Errorf("name: %w", err)
		}
	}
	text, last, err := k.openAIContent(&mc, msg, c)
	if err != nil {
		return mc, "", err
	}
	calls := msg.ToolCalls
	if msg.FunctionCall != nil {
		calls = append(calls, toolCall{Type: "function", Function: *msg.FunctionCall})
	}
	if len(calls) > 0 && msg.Role != "assistant" {
		return mc, "", fmt.Errorf("%w: tool calls in a message of role %s", ErrBody, msg.Role)
	}
	for j, call := range calls {
		if err := loom.CheckToolName(call.Function.Name); err != nil {
			return mc, "", fmt.Errorf("tool_calls[%d]: %w", j, err)
		}
		if call.ID != "" {
			callNames[call.ID] = call.Function.Name
		}
	}
	frame := m.TokensPerMessage + k.c.CountShort(msg.Role)
	named := func() int {
		if msg.Name == "" {
			return 0
		}
		return k.c.CountShort(msg.Name) + m.TokensPerName
	}
	switch {
	case !rule.Namespace: // the calls' JSON and the result's call id, as the assembler counts them: errs high
		mc.Overhead = frame
		mc.Tokens += frame + text
		if msg.Role != "tool" {
			mc.Tokens += named()
		}
		if len(calls) > 0 {
			b, _ := json.Marshal(toLoomCalls(calls))
			mc.Tokens += k.c.Count(string(b))
		}
		mc.Tokens += k.c.CountShort(msg.ToolCallID)
		mc.Exact = mc.Exact && len(calls) == 0 && msg.Role != "tool" && msg.Role != "function"
	case msg.Role == "tool" || msg.Role == "function":
		called := msg.Name // a function message names its function
		if msg.Role == "tool" {
			var ok bool
			if called, ok = callNames[msg.ToolCallID]; !ok {
				called = msg.ToolCallID // answers no call of the body: err high
			}
		}
		mc.Overhead = m.TokensPerMessage + rule.ResultOverhead
		mc.Tokens += mc.Overhead + k.c.CountShort(called) + text
		mc.Exact = mc.Exact && rule.CallsExact
	default:
		if len(calls) == 0 || c.text != "" || len(c.blocks) > 0 || msg.Name != "" {
			mc.Overhead += frame
			mc.Tokens += frame + text + named()
		}
		for _, call := range calls {
			overhead := m.TokensPerMessage + k.c.CountShort("assistant") + rule.CallOverhead
			mc.Overhead += overhead
			mc.Tokens += overhead + k.c.CountShort(call.Function.Name) + tokenizer.ArgumentTokens(k.c, call.Function.Arguments)
		}
		if len(calls) > 0 {
			mc.Exact = mc.Exact && rule.CallsExact
		}
	}
	return mc, last, nil
}

func toLoomCalls(calls []toolCall) []loom.ToolCall {
	out := make([]loom.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = loom.ToolCall{ID: c.ID, Type: c.Type, Function: loom.ToolCallFunction(c.Function)}
	}
	return out
}

// openAIContent counts a message's content besides its framing: its text, or its parts, each text a text
// of its own and each image as the model bills it (its count in mc.Tokens, and in mc.Images). It returns
// the count of the texts, and the last text.
func (k *counting) openAIContent(mc *MessageCount, msg *message, c content) (int, string, error) {
	if c.blocks == nil {
		if c.null && len(msg.Refusal) > 0 { // an assistant's refusal, sent back
			var s string
			if err := json.Unmarshal(msg.Refusal, &s); err == nil {
				return k.c.Count(s), s, nil
			}
		}
		return k.c.Count(c.text), c.text, nil
	}
	n, last := 0, ""
	for j := range c.blocks {
		b := &c.blocks[j]
		switch b.Type {
		case "text", "refusal":
			t := b.Text
			if b.Type == "refusal" {
				t = b.Refusal
			}
			if t == nil {
				return 0, "", fmt.Errorf("%w: content[%d] of type %s without its text", ErrBody, j, b.Type)
			}
			n += k.c.Count(*t)
			last = *t
		case "image_url":
			if msg.Role != "user" {
				return 0, "", fmt.Errorf("%w: content[%d]: an image in a message of role %s (only the user's have them)", loom.ErrInvalid, j, msg.Role)
			}
			if b.ImageURL == nil {
				return 0, "", fmt.Errorf("%w: content[%d] of type image_url without image_url", ErrBody, j)
			}
			im, err := openAIImage(b.ImageURL)
			if err != nil {
				return 0, "", fmt.Errorf("content[%d]: %w", j, err)
			}
			ic, err := k.image(j, im)
			if err != nil {
				return 0, "", fmt.Errorf("content[%d]: %w", j, err)
			}
			mc.Images = append(mc.Images, ic)
			mc.Tokens += ic.Tokens
			mc.Exact = mc.Exact && ic.Exact
		case "":
			return 0, "", fmt.Errorf("%w: content[%d] without a type", ErrBody, j)
		default:
			return 0, "", fmt.Errorf("%w: content[%d] of type %q", ErrNotCounted, j, b.Type)
		}
	}
	return n, last, nil
}

// openAIImage returns the image of an image_url part: a data: URL's bytes, or an http(s) URL with the
// size Loom's extension gives.
func openAIImage(u *imageURL) (*loom.Image, error) {
	rest, ok := cutPrefixFold(u.URL, "data:")
	if !ok {
		return &loom.Image{URL: u.URL, Detail: u.Detail, Width: u.Width, Height: u.Height}, nil
	}
	meta, payload, ok := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 {
		return nil, fmt.Errorf("%w: an image data: URL that is not base64 (want data:image/png;base64,...)", loom.ErrInvalid)
	}
	data, err := decodeBase64(payload)
	if err != nil {
		return nil, err
	}
	return &loom.Image{Data: data, MediaType: strings.ToLower(mediaType), Detail: u.Detail, Width: u.Width, Height: u.Height}, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// decodeBase64 decodes an image's base64 text, whose length is checked against loom.MaxImageBytes first.
func decodeBase64(s string) ([]byte, error) {
	if base64.StdEncoding.DecodedLen(len(s)) > loom.MaxImageBytes+3 {
		return nil, fmt.Errorf("%w: image data of about %d bytes, the limit is %d", ErrTooLarge, base64.StdEncoding.DecodedLen(len(s)), loom.MaxImageBytes)
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: image data that is not base64: %v", loom.ErrInvalid, err)
	}
	return data, nil
}

// image counts the image of part j, checked as loom.CheckParts checks a part.
func (k *counting) image(j int, im *loom.Image) (ImageCount, error) {
	if err := loom.CheckParts("user", []loom.Part{{Type: loom.PartImage, Image: im}}); err != nil {
		return ImageCount{}, err
	}
	w, h, err := im.Size()
	if err != nil {
		return ImageCount{}, err
	}
	n, err := k.m.ImageTokens(w, h, im.Detail)
	if err != nil {
		return ImageCount{}, err
	}
	// Exact as the assembler reports an image: by a rule the provider published (tokenizer.ImageRule; "auto"
	// is counted as "high", as the rule says).
	exact := k.m.Exact() && !k.m.Image.Estimate
	return ImageCount{Part: j, Width: w, Height: h, Detail: im.Detail, Tokens: n, Exact: exact}, nil
}

// openAIChoice counts the body's tool_choice (or function_call) by the tool rule.
func (k *counting) openAIChoice(r *request, rule tokenizer.ToolRule, hasTools bool) error {
	raw, what := r.ToolChoice, "tool_choice"
	if len(raw) == 0 {
		raw, what = r.FunctionCall, "function_call"
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var mode, name string
	if err := json.Unmarshal(raw, &mode); err != nil {
		var named struct {
			Type     string `json:"type"`
			Name     string `json:"name"` // function_call's
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &named); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBody, what, err)
		}
		mode, name = "function", named.Name+named.Function.Name
		if named.Type != "" && named.Type != "function" {
			mode = named.Type // allowed_tools, custom, ...: counted as a named function, an estimate
		}
	}
	if !hasTools {
		return fmt.Errorf("%w: %s without tools (the API refuses it)", ErrBody, what)
	}
	n, exact := rule.ChoiceTokens(k.c, mode, name)
	k.out.ToolChoice = &PartCount{Tokens: n, Exact: exact && k.m.Exact()}
	return nil
}

// responseFormat counts a response_format: nothing for text; a JSON schema's compact JSON, an estimate
// (OpenAI does not say how it writes a schema into the prompt), and nothing for json_object, also not
// known to be exact.
func (k *counting) responseFormat(raw json.RawMessage) *PartCount {
	var rf struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil || rf.Type == "" {
		var b bytes.Buffer
		_ = json.Compact(&b, raw)
		return &PartCount{Tokens: k.c.Count(b.String())}
	}
	switch rf.Type {
	case "text":
		return &PartCount{Exact: k.m.Exact()}
	case "json_schema":
		var b bytes.Buffer
		_ = json.Compact(&b, rf.JSONSchema)
		return &PartCount{Tokens: k.c.Count(b.String())}
	}
	return &PartCount{}
}
