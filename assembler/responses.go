package assembler

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// responses is the Responses API format (see Responses).
type responses struct{ markup }

func (responses) Name() string { return FormatResponses }

func (responses) prepare(a *assembly) error { return openAI{}.prepare(a) }

func (responses) body(text string) string { return text }

// turnCost is what the message costs as Chat Completions bills it (see openAI.turnCost), as the
// Responses API sends it: without its name, which no input item has, and without a text of white space
// beside its tool calls or its content parts, which is not sent; each call is an item, counted as a message of its own (the
// model's tool rule counts them so too).
func (responses) turnCost(a *assembly, msg *Message, content []tokenizer.Part) int {
	m := *msg
	m.Name = ""
	if (len(m.ToolCalls) > 0 || len(m.Parts) > 0) && loom.IsBlank(m.Content) { // not sent
		m.Content, content = "", nil
	}
	if len(m.ToolCalls) == 0 || a.model.Tools.Namespace {
		return openAI{}.turnCost(a, &m, content)
	}
	n := 0
	if m.Content != "" {
		n = a.chatCost(m.Role, content, "", nil, "")
	}
	for _, c := range openAICalls(m.ToolCalls) {
		n += a.chatCost(m.Role, nil, "", []ToolCall{c}, "")
	}
	return n
}

// render lays the plan out as Chat Completions' messages are (see openAI.render), counted as they are,
// and writes them as the Responses API's input: the stable prefix is the instructions, and every other
// message an item (see InputItem).
func (responses) render(a *assembly, out *output) {
	renderChat(a, out, FormatResponses)
	msgs := out.messages
	out.messages = nil
	if out.stableFirst {
		out.instructions = msgs[0].Content
		msgs = msgs[1:]
	}
	items := make([]InputItem, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Role == "tool":
			items = append(items, InputItem{Type: ItemFunctionCallOutput, CallID: m.ToolCallID, Output: m.Content})
		case m.Role == "assistant":
			if !loom.IsBlank(m.Content) || len(m.ToolCalls) == 0 {
				items = append(items, InputItem{Type: ItemMessage, Role: "assistant", Content: []InputContent{{Type: "output_text", Text: m.Content}}})
			}
			for _, c := range m.ToolCalls {
				items = append(items, InputItem{Type: ItemFunctionCall, CallID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
		case m.Parts != nil:
			content := make([]InputContent, 0, len(m.Parts))
			for j, p := range m.Parts {
				if j == 0 && p.Type == "text" && loom.IsBlank(p.Text) && len(m.Parts) > 1 { // the message's Content: not sent (see turnCost)
					continue
				}
				if p.Type == "image_url" {
					content = append(content, InputContent{Type: "input_image", ImageURL: p.ImageURL.URL, Detail: cmpOr(p.ImageURL.Detail, loom.DetailAuto)})
				} else {
					content = append(content, InputContent{Type: "input_text", Text: p.Text})
				}
			}
			items = append(items, InputItem{Type: ItemMessage, Role: m.Role, Content: content})
		default:
			items = append(items, InputItem{Type: ItemMessage, Role: m.Role, Content: []InputContent{{Type: "input_text", Text: m.Content}}})
		}
	}
	out.input = items
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// check holds the request to the Responses API's rules (https://platform.openai.com/docs/api-reference/
// responses/create, "input"; the guide "Function calling"):
//
//   - there is something to send: instructions or an input item (ErrNoMessages);
//   - a message's role is user, system or assistant (developer too; Loom sends none), its content a
//     non-empty list of parts: input_text and input_image for the user and the system, output_text for
//     the assistant (the API answers another with "Supported values are: 'output_text' and 'refusal'");
//     no text part is white space;
//   - a function_call has a call_id of its own and a name as Chat Completions' (loom.CheckToolName), and
//     each is answered by one function_call_output of its call_id ("No tool output found for function
//     call") before the next message; an output answers a call before it;
//   - a tool's name is loom.CheckToolName's.
//
// The rendering keeps each of them by construction (see prepareHistory); check proves it.
func (responses) check(a *assembly, out *output) error {
	if len(out.input) == 0 && out.instructions == "" {
		return fmt.Errorf("%w: responses: there are no instructions, message, context or history within the budget to send", ErrNoMessages)
	}
	for i, t := range a.req.Tools {
		if err := loom.CheckToolName(t.Function.Name); err != nil {
			return fmt.Errorf("%w: responses: tools[%d]: %w", ErrProviderRule, i, err)
		}
	}
	var open, called []string // the calls not answered yet; every call
	for i := range out.input {
		it := &out.input[i]
		switch it.Type {
		case ItemMessage:
			if len(open) > 0 {
				return fmt.Errorf("%w: responses: input[%d] follows the function call %q, which no output answers", ErrProviderRule, i, open[0])
			}
			if len(it.Content) == 0 {
				return fmt.Errorf("%w: responses: input[%d] is a message without content", ErrProviderRule, i)
			}
			for j, c := range it.Content {
				ok := false
				switch c.Type {
				case "output_text":
					ok = it.Role == "assistant" && !loom.IsBlank(c.Text)
				case "input_text":
					ok = (it.Role == "user" || it.Role == "system") && !loom.IsBlank(c.Text)
				case "input_image":
					ok = it.Role == "user" && c.ImageURL != "" && c.Detail != ""
				}
				if !ok {
					return fmt.Errorf("%w: responses: input[%d].content[%d] is not a %s part the API takes (%s)", ErrProviderRule, i, j, it.Role, c.Type)
				}
			}
		case ItemFunctionCall:
			if err := loom.CheckToolName(it.Name); err != nil {
				return fmt.Errorf("%w: responses: input[%d]: %w", ErrProviderRule, i, err)
			}
			if it.CallID == "" || slices.Contains(called, it.CallID) {
				return fmt.Errorf("%w: responses: input[%d] is a function call without a call_id of its own", ErrProviderRule, i)
			}
			open, called = append(open, it.CallID), append(called, it.CallID)
		case ItemFunctionCallOutput:
			k := slices.Index(open, it.CallID)
			if k < 0 {
				return fmt.Errorf("%w: responses: input[%d] is the output of %q, which is no call before it", ErrProviderRule, i, it.CallID)
			}
			open = slices.Delete(open, k, k+1)
		default:
			return fmt.Errorf("%w: responses: input[%d] has the type %q", ErrProviderRule, i, it.Type)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("%w: responses: the function call %q is never answered", ErrProviderRule, open[0])
	}
	return nil
}

// responsesTool is a tool definition as the Responses API takes it: a function tool, flat, with its
// parameters (an empty object's schema when it has none) and strict always said, for the API's default
// is strict, and Chat Completions' is not.
func responsesTool(t Tool) []byte {
	schema := t.Function.Parameters
	if len(schema) == 0 {
		schema = []byte(`{"properties":{},"type":"object"}`)
	}
	strict := t.Function.Strict != nil && *t.Function.Strict
	b, _ := marshalRaw(struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	}{"function", t.Function.Name, t.Function.Description, schema, strict})
	return b
}

// The types of InputItem.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
)

// InputItem is an item of a Responses API request's input: a message (Type "message": its Role and
// Content), a function call (Type "function_call": CallID, Name, Arguments) or a function call's output
// (Type "function_call_output": CallID, Output). It is written as the API takes it, each type with its
// own fields.
type InputItem struct {
	Type      string
	Role      string
	Content   []InputContent
	CallID    string
	Name      string
	Arguments string
	Output    string
}

// InputContent is a part of a Responses API message: "input_text" (Text) or "input_image" (ImageURL, a
// data: URL for an image's bytes, and Detail) of the user or the system, "output_text" (Text) of the
// assistant.
type InputContent struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// MarshalJSON writes the part with the fields of its type: an output_text with its (empty) annotations.
func (c InputContent) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case "input_text":
		return marshalRaw(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	case "output_text":
		return marshalRaw(struct {
			Type        string   `json:"type"`
			Text        string   `json:"text"`
			Annotations []string `json:"annotations"`
		}{c.Type, c.Text, []string{}})
	}
	type plain InputContent
	return marshalRaw(plain(c))
}

// MarshalJSON writes the item with the fields of its type.
func (it InputItem) MarshalJSON() ([]byte, error) {
	switch it.Type {
	case ItemFunctionCall:
		return marshalRaw(struct {
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}{it.Type, it.CallID, it.Name, it.Arguments})
	case ItemFunctionCallOutput:
		return marshalRaw(struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
		}{it.Type, it.CallID, it.Output})
	}
	return marshalRaw(struct {
		Type    string         `json:"type"`
		Role    string         `json:"role"`
		Content []InputContent `json:"content"`
	}{it.Type, it.Role, it.Content})
}

// UnmarshalJSON reads an item as MarshalJSON writes it.
func (it *InputItem) UnmarshalJSON(data []byte) error {
	var raw struct {
		Type      string         `json:"type"`
		Role      string         `json:"role"`
		Content   []InputContent `json:"content"`
		CallID    string         `json:"call_id"`
		Name      string         `json:"name"`
		Arguments string         `json:"arguments"`
		Output    string         `json:"output"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*it = InputItem(raw)
	return nil
}
