package assembler

import (
	"fmt"
	"slices"
	"strings"

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

func (openAI) turnCost(a *assembly, msg *Message, content []tokenizer.Part) int {
	return a.chatCost(msg.Role, content, msg.Name, msg.ToolCalls, msg.ToolCallID)
}

func (openAI) render(a *assembly, out *output) {
	stable, l := a.markupLayout()
	tools := renderTools(a.req.Tools, openAITool)
	out.tools = tools.raw
	out.addText(RegionTools, tools.text)
	n := 3
	for _, g := range l.history {
		n += int(g.n)
	}
	out.messages = make([]ChatMessage, 0, n)
	if len(stable) > 0 {
		out.frame(l.stableRegion(), "system")
		out.add(l.stableText(stable))
		out.messages = append(out.messages, ChatMessage{Role: "system", Content: tokenizer.JoinText(stable)})
	}
	for gi := range l.history {
		g := &l.history[gi]
		contents := a.groupContents(g)
		msgs := a.msgs(g)
		named := false // a tool message with a name, which costs less here than in groupCost
		for i := range msgs {
			msg := &msgs[i]
			name := msg.Name
			if msg.Role == "tool" { // Chat Completions' tool messages have no name
				named, name = named || name != "", ""
			}
			cm := ChatMessage{Role: msg.Role, Content: contents[i].Text, Name: name, ToolCalls: msg.ToolCalls, ToolCallID: msg.ToolCallID}
			if len(msg.Parts) > 0 { // the content is its parts, Content's text the first of them
				cm.Content, cm.Parts = "", a.rendered[int(g.first)+i].openAI
			}
			out.messages = append(out.messages, cm)
		}
		if g.cost >= 0 && !named { // what groupCost counted, message by message, as they are rendered
			out.addTokens(RegionHistory, int(g.cost))
			continue
		}
		for i := range msgs { // as chatCost counts a message, its tool message's name left out
			msg := &msgs[i]
			out.frame(RegionHistory, msg.Role)
			out.addPart(RegionHistory, contents[i])
			out.addTokens(RegionHistory, a.partCost(int(g.first)+i))
			if msg.Name != "" && msg.Role != "tool" {
				out.addText(RegionHistory, msg.Name)
				out.addTokens(RegionHistory, a.model.TokensPerName)
			}
			if len(msg.ToolCalls) > 0 {
				out.addText(RegionHistory, toolCallsJSON(msg.ToolCalls))
			}
			if msg.ToolCallID != "" {
				out.addText(RegionHistory, msg.ToolCallID)
			}
		}
	}
	if len(l.ctx) > 0 { // the context's own message, whose frame is no region's
		out.frame(regionOverhead, "system")
		out.add(l.contextText())
		out.messages = append(out.messages, ChatMessage{Role: "system", Content: l.ctxText})
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
	out.prefix = stablePrefix(tools.text, stable)
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
