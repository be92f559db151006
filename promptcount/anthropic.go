// SPDX-License-Identifier: Apache-2.0

package promptcount

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/context-loom/loom"
)

// anthropic counts a Messages API body as the assembler's anthropic format counts what it renders, an
// estimate: the system prompt with the per-message overhead; each message framed (the overhead and the
// role), its text blocks, its images by the model's image rule, a tool_use's id, name and input (compact
// JSON), a tool_result's id and content; the tools' JSON with the model's tool overhead (for a Claude model,
// the system prompt Anthropic adds for tools, the larger of its sizes by tool choice); the reply priming.
// Consecutive messages of one role, which the API merges, are each framed: that errs high.
func (k *counting) anthropic(r *request) error {
	m := k.m
	if sys := r.system; !sys.null {
		n := m.TokensPerMessage + k.c.Count(sys.text) // the system prompt has no role
		for j, b := range sys.blocks {
			if b.Type != "text" || b.Text == nil {
				return fmt.Errorf("%w: system[%d] is not a text block", ErrBody, j)
			}
			n += k.c.Count(*b.Text)
		}
		k.out.System = &PartCount{Tokens: n}
	}
	k.out.Messages = make([]MessageCount, 0, len(r.Messages))
	for i := range r.Messages {
		msg := &r.Messages[i]
		if msg.Role != "user" && msg.Role != "assistant" {
			return fmt.Errorf("%w: messages[%d] of role %q (the Messages API has user and assistant)", ErrBody, i, msg.Role)
		}
		mc := MessageCount{Index: i, Role: msg.Role}
		mc.Overhead = m.TokensPerMessage + k.c.CountShort(msg.Role)
		mc.Tokens = mc.Overhead
		c := r.content[i]
		if c.null {
			return fmt.Errorf("%w: messages[%d] without content", ErrBody, i)
		}
		mc.Tokens += k.c.Count(c.text)
		for j := range c.blocks {
			if err := k.anthropicBlock(&mc, msg.Role, j, nil, &c.blocks[j]); err != nil {
				return fmt.Errorf("messages[%d].content[%d]: %w", i, j, err)
			}
		}
		k.out.Messages = append(k.out.Messages, mc)
	}
	if len(r.Tools) > 0 {
		text, err := anthropicTools(r.Tools)
		if err != nil {
			return err
		}
		tc := &ToolsCount{Count: len(r.Tools), Tokens: k.c.Count(text)}
		if rule := m.Tools; !rule.Namespace {
			tc.Overhead = rule.DefinitionOverhead(k.out.System != nil)
			tc.Tokens += tc.Overhead
		}
		k.out.Tools = tc
	}
	k.out.ReplyPriming = m.ReplyPriming
	return nil
}

// anthropicBlock counts block j of a message of role (sub: its index in a tool_result's content).
func (k *counting) anthropicBlock(mc *MessageCount, role string, j int, sub *int, b *block) error {
	switch b.Type {
	case "text":
		if b.Text == nil {
			return fmt.Errorf("%w: a text block without text", ErrBody)
		}
		mc.Tokens += k.c.Count(*b.Text)
	case "image":
		if role != "user" {
			return fmt.Errorf("%w: an image in a message of role %s (only the user's have them)", loom.ErrInvalid, role)
		}
		im, err := anthropicImage(b.Source)
		if err != nil {
			return err
		}
		ic, err := k.image(j, im)
		if err != nil {
			return err
		}
		ic.Sub, ic.Exact = sub, false
		mc.Images = append(mc.Images, ic)
		mc.Tokens += ic.Tokens
	case "tool_use":
		if b.ID == "" || b.Name == "" {
			return fmt.Errorf("%w: a tool_use block without its id or name", ErrBody)
		}
		var input bytes.Buffer
		if err := json.Compact(&input, b.Input); err != nil || input.Len() == 0 || input.Bytes()[0] != '{' {
			return fmt.Errorf("%w: a tool_use block whose input is not a JSON object", ErrBody)
		}
		mc.Tokens += k.c.CountShort(b.ID) + k.c.CountShort(b.Name) + k.c.Count(input.String())
	case "tool_result":
		if sub != nil {
			return fmt.Errorf("%w: a tool_result inside a tool_result", ErrBody)
		}
		mc.Tokens += k.c.CountShort(b.ToolUseID) + k.c.Count(b.result.text)
		for s := range b.result.blocks {
			r := &b.result.blocks[s]
			if r.Type != "text" && r.Type != "image" {
				return fmt.Errorf("%w: content[%d] of a tool_result of type %q", ErrNotCounted, s, r.Type)
			}
			if err := k.anthropicBlock(mc, role, j, &s, r); err != nil {
				return fmt.Errorf("content[%d]: %w", s, err)
			}
		}
	case "thinking", "redacted_thinking": // a previous turn's thinking, which the API may not bill: errs high
		text := b.Thinking
		if b.Type == "redacted_thinking" {
			text = b.Data
		}
		if text != nil {
			mc.Tokens += k.c.Count(*text)
		}
	case "":
		return fmt.Errorf("%w: a block without a type", ErrBody)
	default:
		return fmt.Errorf("%w: a block of type %q", ErrNotCounted, b.Type)
	}
	return nil
}

// anthropicImage returns the image of an image block's source: base64 data, or a URL with the size
// Loom's extension gives.
func anthropicImage(s *imageSource) (*loom.Image, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: an image block without a source", ErrBody)
	}
	switch s.Type {
	case "base64":
		data, err := decodeBase64(s.Data)
		if err != nil {
			return nil, err
		}
		return &loom.Image{Data: data, MediaType: s.MediaType, Width: s.Width, Height: s.Height}, nil
	case "url":
		return &loom.Image{URL: s.URL, Width: s.Width, Height: s.Height}, nil
	}
	return nil, fmt.Errorf("%w: an image source of type %q", ErrNotCounted, s.Type)
}

// anthropicTools returns the tools' JSON as the assembler's anthropic format writes it: a custom tool as
// {"name","description","input_schema"}, compact; a server tool (web search, ...) as its compact JSON.
func anthropicTools(tools []tool) (string, error) {
	raw := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		if t.Name == "" {
			return "", fmt.Errorf("%w: tools[%d] without a name", ErrBody, i)
		}
		if t.Type != "" && t.Type != "custom" { // a server tool
			var b bytes.Buffer
			if err := json.Compact(&b, t.raw); err != nil {
				return "", fmt.Errorf("%w: tools[%d]: %v", ErrBody, i, err)
			}
			raw[i] = b.Bytes()
			continue
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		b, err := marshalRaw(struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			InputSchema json.RawMessage `json:"input_schema"`
		}{t.Name, t.Description, schema})
		if err != nil {
			return "", fmt.Errorf("%w: tools[%d]: %v", ErrBody, i, err)
		}
		raw[i] = b
	}
	all, err := marshalRaw(raw)
	return string(all), err
}

// marshalRaw marshals v without escaping <, > and &, as the assembler writes JSON.
func marshalRaw(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
