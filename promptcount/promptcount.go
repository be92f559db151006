// SPDX-License-Identifier: Apache-2.0

// Package promptcount counts the prompt tokens of a whole provider request, as its provider bills them:
//
//   - an OpenAI Chat Completions body (model, messages whose content is a text or content parts, names,
//     tool calls and tool results, the tool definitions, tool_choice, and the older functions and
//     function_call) by the rules of package tokenizer: the model's encoding, its per-message overhead,
//     its tool rule (the function namespace that OpenAI's chat models read) and its image rule. The
//     count is exact where every rule it used is, and says so per part;
//   - an Anthropic Messages body (system, messages of text, image, tool_use and tool_result blocks,
//     tools) as an estimate, marked approximate: Anthropic's tokenizer is not public.
//
// For the models whose tokenizer is not public, a [Provider] asks the provider's own counting endpoint
// (Anthropic's /v1/messages/count_tokens, Gemini's countTokens) for the exact count, when the user gives it
// a key; on any failure the result is the estimate, with the reason (see [Count.Degraded]). Nothing else
// in Loom calls a Provider: an assembly never waits for one.
//
// Count is the one code path of `loom tokens --request` and of POST /v1/tokens/count.
package promptcount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// The shapes of a request body.
const (
	ShapeOpenAI    = "openai"    // Chat Completions
	ShapeAnthropic = "anthropic" // the Messages API
)

// Sources of a count.
const (
	SourceTokenizer = "tokenizer" // counted here, by the model's rules
	SourceAnthropic = "anthropic" // Anthropic's /v1/messages/count_tokens
	SourceGemini    = "gemini"    // Gemini's countTokens
)

// Default limits (see [Limits]).
const (
	DefaultMaxBytes = 32 << 20
	DefaultMaxItems = 10000
)

// Limits bound what one request body may hold. Zero fields mean the defaults.
type Limits struct {
	// MaxBytes is the largest body, checked before it is parsed: DefaultMaxBytes.
	MaxBytes int
	// MaxTextBytes is the largest any one text of the body may be (a message's content, a text part, a
	// tool's parameters, a call's arguments), checked before anything is counted; an image's data is
	// bounded by loom.MaxImageBytes instead. 0: MaxBytes.
	MaxTextBytes int
	// MaxItems is the most messages, content parts, tool calls and tool definitions the body may hold
	// together: DefaultMaxItems.
	MaxItems int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxTextBytes <= 0 || l.MaxTextBytes > l.MaxBytes {
		l.MaxTextBytes = l.MaxBytes
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultMaxItems
	}
	return l
}

// Options say how to read and count a body. The zero Options detect the shape and count locally.
type Options struct {
	// Shape is ShapeOpenAI or ShapeAnthropic; "" detects it from the body (see [Count]).
	Shape string
	// Model is the model of a body that names none; a body that names one keeps its own.
	Model string
	// Limits bound the body.
	Limits Limits
	// Provider, if not nil, is asked for the provider's exact count of a request to a model whose
	// tokenizer is not public (see [Provider]).
	Provider *Provider
}

// Errors of Count.
var (
	// ErrBody is returned, wrapped with what is wrong, for a body that is not a request of a known
	// shape: not JSON, not an object, a field of the wrong type, a shape that mixes OpenAI's and
	// Anthropic's. It wraps loom.ErrInvalid.
	ErrBody = loom.NewError(loom.ErrInvalid, "promptcount: invalid request body")
	// ErrTooLarge is returned, wrapped with the limit, for a body, a text or a number of items past
	// [Limits]. It wraps loom.ErrTooLarge.
	ErrTooLarge = loom.NewError(loom.ErrTooLarge, "promptcount: the request body is too large")
	// ErrNotCounted is returned, wrapped with the part, for a part of a valid request whose cost is not
	// known (audio, files, documents, a tool that is not a function): rather than count it as nothing.
	// It wraps loom.ErrUnsupported.
	ErrNotCounted = loom.NewError(loom.ErrUnsupported, "promptcount: a part whose cost is not known")
)

// Count is what a request costs: its prompt tokens, and a breakdown of them by part.
type Count struct {
	// Shape is the body's shape, ShapeOpenAI or ShapeAnthropic.
	Shape string `json:"shape"`
	// Model is the registered name of the model the body names (see tokenizer.ForModel); Encoding its
	// encoding, or "estimate" for a model whose tokenizer is not public.
	Model    string `json:"model"`
	Encoding string `json:"encoding"`
	// Tokens is the prompt tokens the provider bills for the request: the breakdown's sum when Source is
	// SourceTokenizer, or the provider's own count.
	Tokens int `json:"tokens"`
	// Exact reports that Tokens is the provider's count: every rule used is exact, or the provider
	// counted. Approximate is its negation, as loom tokens has always written it.
	Exact       bool `json:"exact"`
	Approximate bool `json:"approximate,omitempty"`
	// Source says who counted Tokens (SourceTokenizer, SourceAnthropic, SourceGemini).
	Source string `json:"source"`
	// Estimate is the local count, the breakdown's sum, when a provider counted Tokens.
	Estimate int `json:"estimate,omitempty"`
	// Degraded, when not empty, says why a configured provider did not count: Tokens is then the local
	// estimate.
	Degraded string `json:"degraded,omitempty"`

	// The breakdown, counted locally. Its parts add up to the local count.
	System         *PartCount     `json:"system,omitempty"` // an Anthropic body's top-level system prompt
	Messages       []MessageCount `json:"messages"`
	Tools          *ToolsCount    `json:"tools,omitempty"`
	ToolChoice     *PartCount     `json:"tool_choice,omitempty"`
	ResponseFormat *PartCount     `json:"response_format,omitempty"`
	// ReplyPriming is what the chat format adds once per request (3 for OpenAI's models).
	ReplyPriming int `json:"reply_priming"`
}

// PartCount is what one part of a request costs, and whether that is the provider's count.
type PartCount struct {
	Tokens int  `json:"tokens"`
	Exact  bool `json:"exact"`
}

// MessageCount is what one message of the body costs: Tokens in all (its framing, text, name, tool calls
// and images), of which Overhead is the framing (the model's per-message overhead and the role; each tool
// call is framed as a message of its own) and Images the images.
type MessageCount struct {
	Index    int          `json:"index"`
	Role     string       `json:"role"`
	Tokens   int          `json:"tokens"`
	Overhead int          `json:"overhead"`
	Exact    bool         `json:"exact"`
	Images   []ImageCount `json:"images,omitempty"`
}

// ImageCount is what one image costs: Part is its index in the message's content (in a tool result's
// content, Part is the result block's and Sub the image's within it).
type ImageCount struct {
	Part   int    `json:"part"`
	Sub    *int   `json:"sub,omitempty"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Detail string `json:"detail,omitempty"`
	Tokens int    `json:"tokens"`
	Exact  bool   `json:"exact"`
}

// ToolsCount is what the tool definitions cost: Tokens in all, of which Overhead is what they add besides
// their rendering (tokenizer.ToolRule's overheads, and the line break after the first system message
// that OpenAI's rendering adds).
type ToolsCount struct {
	Count    int  `json:"count"`
	Tokens   int  `json:"tokens"`
	Overhead int  `json:"overhead"`
	Exact    bool `json:"exact"`
}

// local is the breakdown's sum.
func (c *Count) local() int {
	n := c.ReplyPriming
	for _, p := range []*PartCount{c.System, c.ToolChoice, c.ResponseFormat} {
		if p != nil {
			n += p.Tokens
		}
	}
	for _, m := range c.Messages {
		n += m.Tokens
	}
	if c.Tools != nil {
		n += c.Tools.Tokens
	}
	return n
}

// exact reports whether every part of the breakdown is exact.
func (c *Count) exact() bool {
	ok := true
	for _, p := range []*PartCount{c.System, c.ToolChoice, c.ResponseFormat} {
		ok = ok && (p == nil || p.Exact)
	}
	for _, m := range c.Messages {
		ok = ok && m.Exact
	}
	return ok && (c.Tools == nil || c.Tools.Exact)
}

// CountRequest counts the prompt tokens of body, a Chat Completions or Messages API request, as its
// provider bills them (see the package's documentation).
//
// The body's shape is opts.Shape, or else what the body says: Anthropic's top-level system, its content
// blocks (image with a source, tool_use, tool_result) or tools with an input_schema make it a Messages
// body; OpenAI's roles (system, developer, tool, function), tool_calls, image_url parts, tools with a
// function, or functions make it a Chat Completions body; a body that says neither is the shape of its
// model's provider (Anthropic's for a Claude model, OpenAI's otherwise), and one that says both is an
// error.
//
// Fields that do not change the prompt (temperature, max_tokens, stream, ...) are not read. An image
// needs its size: an image's data says it (a data: URL, a base64 source); an image at a URL needs
// "width" and "height" beside its URL (in image_url, or in an Anthropic url source), Loom's extension of
// the shapes, or it is an error wrapping loom.ErrImageSize.
//
// CountRequest returns an error wrapping ErrTooLarge for a body past opts.Limits (its size checked before
// it is parsed, its items and texts before anything is counted), ErrBody for a body it cannot read,
// tokenizer.ErrUnknownModel for a model it does not know (or none), ErrNotCounted for a part whose cost
// is not known, and loom.ErrInvalid for a part that breaks a provider's rule (a tool name, an image).
// The error of a configured Provider is never returned: its count degrades to the estimate.
func CountRequest(ctx context.Context, body []byte, opts Options) (*Count, error) {
	lim := opts.Limits.withDefaults()
	if len(body) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: a body of %d bytes, the limit is %d", ErrTooLarge, len(body), lim.MaxBytes)
	}
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: the body is not valid UTF-8", ErrBody)
	}
	req, err := parse(body)
	if err != nil {
		return nil, err
	}
	if err := req.check(lim); err != nil {
		return nil, err
	}
	shape, err := req.shape(opts.Shape, opts.Model)
	if err != nil {
		return nil, err
	}
	name := req.Model
	if name == "" {
		name = opts.Model
	}
	if name == "" {
		return nil, fmt.Errorf("%w: the request names no model", tokenizer.ErrUnknownModel)
	}
	m, err := tokenizer.ForModel(name)
	if err != nil {
		return nil, err
	}
	k := counting{m: m, c: tokenizer.NewMeter(m.Counter()), out: &Count{Shape: shape, Model: m.Name, Encoding: m.Encoding}}
	if !m.Exact() {
		k.out.Encoding = "estimate"
	}
	if shape == ShapeAnthropic {
		err = k.anthropic(req)
	} else {
		err = k.openAI(req)
	}
	if err != nil {
		return nil, err
	}
	out := k.out
	out.Tokens, out.Exact, out.Source = out.local(), out.exact() && m.Exact(), SourceTokenizer
	if opts.Provider != nil && !m.Exact() {
		opts.Provider.count(ctx, out, m.Provider, name, req, body)
	}
	out.Approximate = !out.Exact
	return out, nil
}

// counting is the state of one count.
type counting struct {
	m   tokenizer.Model
	c   *tokenizer.Meter
	out *Count
}

// request is a body of either shape, as far as it is read: the fields of both.
type request struct {
	Model          string          `json:"model"`
	System         json.RawMessage `json:"system"` // Anthropic: a string or text blocks
	Messages       []message       `json:"messages"`
	Tools          []tool          `json:"tools"`
	Functions      []function      `json:"functions"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	FunctionCall   json.RawMessage `json:"function_call"`
	ResponseFormat json.RawMessage `json:"response_format"`

	// system and content hold the system prompt and each message's content, parsed (see parse).
	system  content
	content []content
}

type message struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         string          `json:"name"`
	ToolCalls    []toolCall      `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall *callFunction   `json:"function_call"`
	Refusal      json.RawMessage `json:"refusal"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function callFunction `json:"function"`
}

type callFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// function is an OpenAI function definition (loom.ToolFunction's fields).
type function = loom.ToolFunction

// tool is a tool definition of either shape: OpenAI's {type, function}, Anthropic's {name, description,
// input_schema} or a server tool ({type, name, ...}, kept as its JSON).
type tool struct {
	Type        string          `json:"type"`
	Function    *function       `json:"function"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	raw         json.RawMessage
}

func (t *tool) UnmarshalJSON(data []byte) error {
	type plain tool
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*t = tool(p)
	t.raw = bytes.Clone(data)
	return nil
}

// content is a message's content: a text (or none), or blocks.
type content struct {
	text   string
	null   bool // no content (null or absent)
	blocks []block
}

// block is a content part of either shape: OpenAI's text, image_url and refusal parts, Anthropic's text,
// image, tool_use and tool_result blocks.
type block struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	Refusal   *string         `json:"refusal"`
	ImageURL  *imageURL       `json:"image_url"`
	Source    *imageSource    `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // a tool_result's: a string or blocks
	Thinking  *string         `json:"thinking"`
	Data      *string         `json:"data"` // redacted_thinking's

	result content // a tool_result's content, parsed
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
	Width  int    `json:"width"` // Loom's extension, for an image at a URL
	Height int    `json:"height"`
}

type imageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
}

// parse reads body as a request of either shape.
func parse(body []byte) (*request, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: want a JSON object", ErrBody)
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBody, err)
	}
	var err error
	if req.system, err = parseContent(req.System); err != nil {
		return nil, fmt.Errorf("%w: system: %v", ErrBody, err)
	}
	req.content = make([]content, len(req.Messages))
	for i, m := range req.Messages {
		c, err := parseContent(m.Content)
		if err != nil {
			return nil, fmt.Errorf("%w: messages[%d].content: %v", ErrBody, i, err)
		}
		req.content[i] = c
	}
	return &req, nil
}

// parseContent reads a message's content: null, a string, or an array of blocks.
func parseContent(raw json.RawMessage) (content, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return content{null: true}, nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return content{text: s}, err
	case raw[0] != '[':
		return content{}, errors.New("want a string, an array of parts, or null")
	}
	var c content
	if err := json.Unmarshal(raw, &c.blocks); err != nil {
		return content{}, err
	}
	if c.blocks == nil {
		c.blocks = []block{}
	}
	for i := range c.blocks {
		b := &c.blocks[i]
		if b.Type != "tool_result" {
			continue
		}
		r, err := parseContent(b.Content)
		if err != nil {
			return content{}, fmt.Errorf("[%d].content: %v", i, err)
		}
		for _, sub := range r.blocks {
			if sub.Type == "tool_result" {
				return content{}, fmt.Errorf("[%d].content: a tool_result inside a tool_result", i)
			}
		}
		b.result = r
	}
	return c, nil
}

// check applies the limits of items and texts, before anything is counted: every text of the body is
// held to MaxTextBytes but an image's URL or data, which loom.MaxImageURL and loom.MaxImageBytes bound.
func (r *request) check(lim Limits) error {
	items := len(r.Tools) + len(r.Functions) + len(r.Messages) + len(r.system.blocks)
	var err error
	check := func(what string, texts ...string) {
		for _, t := range texts {
			if err == nil && len(t) > lim.MaxTextBytes {
				err = fmt.Errorf("%w: %s is %d bytes, the limit for one text is %d", ErrTooLarge, what, len(t), lim.MaxTextBytes)
			}
		}
	}
	var blocks func(what string, bs []block)
	blocks = func(what string, bs []block) {
		items += len(bs)
		for j := range bs {
			b := &bs[j]
			w := fmt.Sprintf("%s[%d]", what, j)
			for _, t := range []*string{b.Text, b.Refusal, b.Thinking, b.Data} {
				if t != nil {
					check(w, *t)
				}
			}
			check(w, b.Type, string(b.Input), b.ID, b.ToolUseID, b.Name)
			if u := b.ImageURL; u != nil {
				check(w+".image_url.detail", u.Detail)
			}
			if s := b.Source; s != nil {
				check(w+".source", s.Type, s.MediaType)
			}
			blocks(w+".content", b.result.blocks)
			check(w+".content", b.result.text)
		}
	}
	check("model", r.Model)
	check("system", r.system.text)
	blocks("system", r.system.blocks)
	check("tool_choice", string(r.ToolChoice))
	check("function_call", string(r.FunctionCall))
	check("response_format", string(r.ResponseFormat))
	for i, m := range r.Messages {
		w := fmt.Sprintf("messages[%d]", i)
		c := r.content[i]
		check(w+".content", c.text)
		check(w, m.Role, m.Name, m.ToolCallID, string(m.Refusal))
		blocks(w+".content", c.blocks)
		items += len(m.ToolCalls)
		for j, call := range m.ToolCalls {
			check(fmt.Sprintf("%s.tool_calls[%d]", w, j), call.ID, call.Type, call.Function.Name, call.Function.Arguments)
		}
		if f := m.FunctionCall; f != nil {
			check(w+".function_call", f.Name, f.Arguments)
		}
	}
	fn := func(what string, f *function) {
		check(what, f.Name, f.Description, string(f.Parameters))
	}
	for i, t := range r.Tools {
		w := fmt.Sprintf("tools[%d]", i)
		check(w, t.Type, t.Name, t.Description, string(t.InputSchema))
		if t.Function != nil {
			fn(w+".function", t.Function)
		} else if t.Type != "" && t.Type != "custom" && t.Type != "function" {
			check(w, string(t.raw)) // a server tool, counted as its JSON
		}
	}
	for i := range r.Functions {
		fn(fmt.Sprintf("functions[%d]", i), &r.Functions[i])
	}
	if err != nil {
		return err
	}
	if items > lim.MaxItems {
		return fmt.Errorf("%w: %d messages, content parts, tool calls and tools, the limit is %d", ErrTooLarge, items, lim.MaxItems)
	}
	return nil
}

// shape returns the body's shape: the one asked for, or the one the body says (see CountRequest).
func (r *request) shape(asked, model string) (string, error) {
	switch asked {
	case ShapeOpenAI, ShapeAnthropic:
		return asked, nil
	case "":
	default:
		return "", fmt.Errorf("%w: shape %q (want openai or anthropic)", ErrBody, asked)
	}
	openAI, anthropic := r.openAISign(), r.anthropicSign()
	switch {
	case openAI != "" && anthropic != "":
		return "", fmt.Errorf("%w: it mixes Chat Completions (%s) and the Messages API (%s); name the shape", ErrBody, openAI, anthropic)
	case openAI != "":
		return ShapeOpenAI, nil
	case anthropic != "":
		return ShapeAnthropic, nil
	}
	if model == "" || r.Model != "" {
		model = r.Model
	}
	if m, err := tokenizer.ForModel(model); err == nil && m.Provider == "anthropic" {
		return ShapeAnthropic, nil
	}
	return ShapeOpenAI, nil
}

// openAISign names a field of the body that only Chat Completions has, or "".
func (r *request) openAISign() string {
	switch {
	case len(r.Functions) > 0:
		return "functions"
	case len(r.FunctionCall) > 0:
		return "function_call"
	case len(r.ResponseFormat) > 0:
		return "response_format"
	}
	if len(r.ToolChoice) > 0 && (r.ToolChoice[0] == '"' || bytes.Contains(r.ToolChoice, []byte(`"function"`))) {
		return "tool_choice " + string(r.ToolChoice)
	}
	for i, t := range r.Tools {
		if t.Function != nil {
			return fmt.Sprintf("tools[%d].function", i)
		}
	}
	for i, m := range r.Messages {
		switch {
		case m.Role == "system" || m.Role == "developer" || m.Role == "tool" || m.Role == "function":
			return fmt.Sprintf("messages[%d] of role %s", i, m.Role)
		case len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.FunctionCall != nil:
			return fmt.Sprintf("messages[%d].tool_calls", i)
		}
		for j, b := range r.content[i].blocks {
			if b.Type == "image_url" || b.Type == "refusal" {
				return fmt.Sprintf("messages[%d].content[%d] of type %s", i, j, b.Type)
			}
		}
	}
	return ""
}

// anthropicSign names a field of the body that only the Messages API has, or "".
func (r *request) anthropicSign() string {
	if !r.system.null {
		return "system"
	}
	for i, t := range r.Tools {
		if t.Function == nil && (len(t.InputSchema) > 0 || t.Name != "") {
			return fmt.Sprintf("tools[%d] without function", i)
		}
	}
	for i := range r.Messages {
		for j, b := range r.content[i].blocks {
			switch b.Type {
			case "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "document":
				return fmt.Sprintf("messages[%d].content[%d] of type %s", i, j, b.Type)
			}
		}
	}
	return ""
}
