package assembler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// openAI is the Chat Completions format (see OpenAI).
type openAI struct{ markup }

func (openAI) Name() string { return FormatOpenAI }

func (f openAI) prepare(a *assembly) error {
	if err := a.prepareMarkup(); err != nil {
		return err
	}
	if len(a.memory)+len(a.toolOuts)+len(a.knowledge) > 0 { // the context's system message, if it has one
		a.reserve = a.model.TokensPerMessage + a.roleTokens("system")
	}
	return nil
}

func (openAI) body(text string) string { return text }

// turnCost is what a message costs as Chat Completions bills it. A tool message's name is not sent. With
// the model's tool rule (tokenizer.ToolRule), each tool call is a message of its own (the assistant's
// text, if any, another), its arguments counted as compact JSON, and a tool result is counted with the
// name of the function it answers, the call's id with neither; without one, the calls' JSON and the id
// are counted, which errs high.
func (openAI) turnCost(a *assembly, msg *Message, content []tokenizer.Part) int {
	name := msg.Name
	if msg.Role == "tool" {
		name = ""
	}
	rule := a.model.Tools
	if !rule.Namespace || (msg.Role != "tool" && len(msg.ToolCalls) == 0) {
		return a.chatCost(msg.Role, content, name, openAICalls(msg.ToolCalls), openAIID(msg.ToolCallID))
	}
	if msg.Role == "tool" {
		called, ok := a.callNames[msg.ToolCallID]
		if !ok { // answers no call of the history (the builder passes such a result through): err high
			called = msg.ToolCallID
		}
		return a.model.TokensPerMessage + rule.ResultOverhead + a.m.CountShort(called) + a.m.Join(content)
	}
	n := 0
	if msg.Content != "" || name != "" {
		n = a.chatCost(msg.Role, content, name, nil, "")
	}
	for _, call := range msg.ToolCalls {
		n += a.model.TokensPerMessage + a.roleTokens("assistant") + rule.CallOverhead + a.m.CountShort(call.Function.Name) +
			tokenizer.ArgumentTokens(a.m, call.Function.Arguments)
	}
	return n
}

func (openAI) render(a *assembly, out *output) { renderChat(a, out, FormatOpenAI) }

// MaxOpenAIToolCallID is the longest tool call id that Chat Completions takes, in bytes: a longer one
// is refused ("Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with maximum
// length 40"), as the ids of another API (a Responses "fc_" item id, a gateway's UUID) often are.
const MaxOpenAIToolCallID = 40

// openAIID maps a tool call id to one that Chat Completions takes (see MaxOpenAIToolCallID): an id that
// is short enough is itself; a longer one is its start (cut at a character's boundary) and "_" and eight
// hex digits of its SHA-256, 40 bytes, so that ids that differ only after the cut stay apart. The same
// for a call and its result, in openai and responses alike (which writes the same messages as its input).
func openAIID(id string) string {
	if len(id) <= MaxOpenAIToolCallID {
		return id
	}
	keep := MaxOpenAIToolCallID - 9
	for keep > 0 && !utf8.RuneStart(id[keep]) {
		keep--
	}
	sum := sha256.Sum256([]byte(id))
	return id[:keep] + "_" + hex.EncodeToString(sum[:4])
}

// openAICalls returns calls with their ids as openAIID maps them: calls itself when none changes, or a
// copy (the request's messages are not written).
func openAICalls(calls []ToolCall) []ToolCall {
	for i, c := range calls {
		if openAIID(c.ID) == c.ID {
			continue
		}
		out := slices.Clone(calls)
		for j := i; j < len(out); j++ {
			out[j].ID = openAIID(out[j].ID)
		}
		return out
	}
	return calls
}

// renderChat lays the plan out as Chat Completions messages, its tools in the shape of the format named
// (openai, or responses, which writes the messages as its input: see responses.render).
func renderChat(a *assembly, out *output, shape string) {
	stable, l := a.markupLayout()
	tools := a.tools.rendered(shape)
	out.tools = tools.raw
	n := 3
	for _, g := range l.history {
		n += int(g.n)
	}
	out.messages = make([]ChatMessage, 0, n)
	// The model's tool rule writes the definitions into a system message: one of their own, or the first
	// one, which it counts with a line break after its text (tokenizer.ToolRule.PadSystem).
	rule := a.model.Tools
	pad := a.tools != nil && rule.Namespace && rule.PadSystem
	hasSystem := len(stable) > 0 || len(l.ctx) > 0
	// padTokens is what the line break after the first system message's text adds to its count, n: the
	// same for each rendering of the plan, while the text is.
	padTokens := func(text string, n int) int {
		if p := &a.pad; !p.set || p.text != text || p.n != n {
			*p = padCount{text: text, n: n, set: true,
				tokens: a.m.Join([]tokenizer.Part{{Text: text, Tokens: n}, tokenizer.NewPart("\n")}) - n}
		}
		return a.pad.tokens
	}
	if len(stable) > 0 {
		out.frame(l.stableRegion(), "system")
		n := out.add(l.stableText(stable))
		text := tokenizer.JoinText(stable)
		if pad {
			out.addTokens(RegionTools, padTokens(text, n))
			pad = false
		}
		out.messages = append(out.messages, ChatMessage{Role: "system", Content: text})
		out.stableFirst = true
	}
	for gi := range l.history {
		g := &l.history[gi]
		contents := a.groupContents(g)
		msgs := a.msgs(g)
		for i := range msgs {
			msg := &msgs[i]
			name := msg.Name
			if msg.Role == "tool" { // Chat Completions' tool messages have no name
				name = ""
			}
			cm := ChatMessage{Role: msg.Role, Content: contents[i].Text, Name: name, ToolCalls: openAICalls(msg.ToolCalls), ToolCallID: openAIID(msg.ToolCallID)}
			if len(msg.Parts) > 0 { // the content is its parts, Content's text the first of them
				cm.Content, cm.Parts = "", a.rendered[int(g.first)+i].openAI
			}
			out.messages = append(out.messages, cm)
			if msg.Role == "system" {
				hasSystem = true
				if pad { // the first system message
					out.addTokens(RegionTools, padTokens(contents[i].Text, a.m.Join(contents[i:i+1])))
					pad = false
				}
			}
			if (msg.Role == "tool" || len(msg.ToolCalls) > 0) && !(rule.Namespace && rule.CallsExact) {
				out.estimate(RegionHistory)
			}
		}
		out.addTokens(RegionHistory, a.groupCost(g)) // what turnCost counts, message by message, as they are rendered
	}
	if len(l.ctx) > 0 { // the context's own message, whose frame is no region's
		out.frame(regionOverhead, "system")
		n := out.add(l.contextText())
		if pad {
			out.addTokens(RegionTools, padTokens(l.ctxText, n))
		}
		out.messages = append(out.messages, ChatMessage{Role: "system", Content: l.ctxText})
	}
	if a.tools != nil {
		// The tool choice, as the rule counts it (tokenizer.ToolRule.ChoiceTokens).
		choice, choiceExact := rule.ChoiceTokens(a.m, a.req.ToolChoice.Mode, a.req.ToolChoice.Function)
		if rule.Namespace {
			c := a.toolTokens("namespace", "")
			out.addTokens(RegionTools, c.n+rule.DefinitionOverhead(hasSystem)+choice)
			if !c.known || !rule.Exact || !choiceExact {
				out.estimate(RegionTools)
			}
		} else { // their JSON and the rule's overhead (Anthropic's system prompt for tools): an estimate
			out.addTokens(RegionTools, a.toolTokens(shape, tools.text).n+rule.DefinitionOverhead(hasSystem)+choice)
			out.estimate(RegionTools)
		}
	}
	if a.message != "" || a.messageRendered != nil {
		out.frame(RegionMessage, "user")
		cm := ChatMessage{Role: "user", Content: a.message}
		if a.message != "" {
			out.addText(RegionMessage, a.message)
		}
		if r := a.messageRendered; r != nil { // its content is its parts, the message's text the first
			cm.Content, cm.Parts = "", r.openAI
			out.addTokens(RegionMessage, a.messageParts)
		}
		out.messages = append(out.messages, cm)
	}
	out.addTokens(regionOverhead, a.model.ReplyPriming)
	out.context = l.knowledge
	out.prefix = l.stablePrefix(a.tools.prefixID(), stable)
}

// padCount is what the line break after a text of n tokens adds to its count (see openAI.render).
type padCount struct {
	text      string
	n, tokens int
	set       bool
}

// check holds the request to the rules of Chat Completions (https://platform.openai.com/docs/api-reference/
// chat/create, "messages", and the OpenAPI document of the API; the quoted texts are the API's answers to a
// request that breaks them):
//
//   - messages has at least one message ("minItems": 1; ErrNoMessages): the instructions are one;
//   - the roles are system, user, assistant and tool;
//   - an assistant message's content is "required unless tool_calls ... is specified";
//   - "messages with role 'tool' must be a response to a preceding message with 'tool_calls'", and "an
//     assistant message with 'tool_calls' must be followed by tool messages responding to each
//     'tool_call_id'";
//   - a function's name is "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length of 64"
//     (loom.CheckToolName), and so is a participant's name (the API answers one that is not with "does not
//     match '^[a-zA-Z0-9_-]{1,64}$'"): a history's names are the caller's, and one that breaks the rule is
//     an error here.
//
// The history's turns keep the others by construction (see prepareHistory); check proves them.
func (openAI) check(a *assembly, out *output) error {
	if len(out.messages) == 0 {
		return fmt.Errorf("%w: openai: there are no instructions, message, context or history within the budget to send", ErrNoMessages)
	}
	for i, t := range a.req.Tools {
		if err := loom.CheckToolName(t.Function.Name); err != nil {
			return fmt.Errorf("%w: openai: tools[%d]: %w", ErrProviderRule, i, err)
		}
	}
	var open []string // the tool calls of the assistant message before, not answered yet
	for i := range out.messages {
		m := &out.messages[i]
		if m.Role != "tool" && len(open) > 0 {
			return fmt.Errorf("%w: openai: messages[%d] follows the tool call %q, which no tool message answers", ErrProviderRule, i, open[0])
		}
		if m.Name != "" && !participantName(m.Name) {
			return fmt.Errorf("%w: openai: messages[%d].name %q is not 1 to 64 letters, digits, _ or - (^[a-zA-Z0-9_-]{1,64}$)",
				ErrProviderRule, i, truncateName(m.Name))
		}
		switch m.Role {
		case "system", "user":
		case "assistant":
			if m.Content == "" && len(m.ToolCalls) == 0 {
				return fmt.Errorf("%w: openai: messages[%d] is an assistant message with neither content nor tool calls", ErrProviderRule, i)
			}
			for j, c := range m.ToolCalls {
				if err := loom.CheckToolName(c.Function.Name); err != nil {
					return fmt.Errorf("%w: openai: messages[%d].tool_calls[%d]: %w", ErrProviderRule, i, j, err)
				}
				if c.ID == "" || slices.Contains(open, c.ID) {
					return fmt.Errorf("%w: openai: messages[%d].tool_calls[%d] has no id of its own", ErrProviderRule, i, j)
				}
				if len(c.ID) > MaxOpenAIToolCallID {
					return fmt.Errorf("%w: openai: messages[%d].tool_calls[%d].id is longer than %d bytes", ErrProviderRule, i, j, MaxOpenAIToolCallID)
				}
				open = append(open, c.ID)
			}
		case "tool":
			k := slices.Index(open, m.ToolCallID)
			if k < 0 {
				return fmt.Errorf("%w: openai: messages[%d] is a tool message for %q, which is not a call of the assistant message before it", ErrProviderRule, i, m.ToolCallID)
			}
			open = slices.Delete(open, k, k+1)
		default:
			return fmt.Errorf("%w: openai: messages[%d] has the role %q", ErrProviderRule, i, m.Role)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("%w: openai: the tool call %q is never answered", ErrProviderRule, open[0])
	}
	return nil
}

// participantName reports whether name is one Chat Completions takes for a message's author:
// ^[a-zA-Z0-9_-]{1,64}$.
func participantName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isToolNameByte(name[i]) {
			return false
		}
	}
	return true
}

// truncateName is name cut after 80 bytes, for an error message.
func truncateName(name string) string {
	if len(name) <= 80 {
		return name
	}
	return strings.ToValidUTF8(name[:80], "") + "..."
}
