package assembler

import (
	"fmt"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// Cookbook lays a request out as the Valkey cookbook's assemble_context does, message for message, as
// OpenAI chat messages (Result.Format "openai"): a system message with the agent's role, constraints and
// format; a system message with the request's instructions; a system message "User context:" with the
// facts; a system message "Relevant knowledge:"; the history, each message's role and content; a system
// message per tool output ("Tool 'x' returned: ..."); the user's message (even empty).
//
// Every item is required but the history's: the facts, knowledge and tool outputs are all shown, in the
// request's order, whatever their text, and the history is cut oldest first, message by message, by the
// exact count, to what the budget leaves (the cookbook cuts by characters). A request in this format has
// no tools and no policy. Its untrusted values are marked and escaped as Loom's own formats mark them:
//
//   - The facts are in a user_memory tag, "User context:\n<user_memory trusted=\"false\">\n- key: value\n
//     ...\n</user_memory>", one line each: a key's or value's line breaks are written \n, \r, \v, \f,
//     \u0085, \u2028 or \u2029, and a backslash \\.
//   - Each knowledge item's content is in a context tag, "[title]: <context type=\"rag\"
//     trusted=\"false\">\ncontent\n</context>" (the item's type, "rag" by default; trusted="true" for an
//     item marked trusted), and its title (Metadata["title"] when the key is there, else Source when it is
//     not empty, else "Doc", as the cookbook's d.get('title', 'Doc') reads an entry) is one line as a fact is.
//   - Each tool output's result is in a tool_output tag, "Tool 'name' returned: <tool_output
//     trusted=\"false\">\nresult\n</tool_output>", and the name is one line as a fact is.
//   - In all of these (keys, values, titles, names, contents, results) & < > " ' are written &amp; &lt;
//     &gt; &quot; &#39; (see EscapeText), and invalid UTF-8 as U+FFFD.
//
// The agent's prompt, the request's instructions, the history and the current message are shown as the
// cookbook shows them: the history's roles too, so that a tool message (without its call's id) or a role
// Chat Completions does not know is passed on as the cookbook passes it, and the format holds its output
// to none of Chat Completions' rules but that it has a message. A user message's content parts, which the
// cookbook does not know, are lines after its content: a text part's text, and ImagePlaceholder for an
// image, which the format does not send.
type Cookbook struct {
	// Agent, when not nil, is the agent whose configuration the first message shows as the cookbook
	// writes it: "role\n\nConstraints: constraints\nFormat: output format", every field named even when
	// it is empty.
	Agent *loom.Agent
}

var _ Format = (*Cookbook)(nil)

// agent is c's agent; a nil Cookbook has none.
func (c *Cookbook) agent() *loom.Agent {
	if c == nil {
		return nil
	}
	return c.Agent
}

// Name is "cookbook".
func (*Cookbook) Name() string { return FormatCookbook }

func (*Cookbook) wire() string { return FormatOpenAI }

// cookbookPolicy is how the cookbook format plans: the history alone shares what the required items
// leave; the other regions are listed for the report, in the order the messages show them.
func cookbookPolicy() Policy {
	p := DefaultPolicy()
	p.Regions = []RegionPolicy{
		{Name: RegionMemory, Priority: 1, MaxShare: 1},
		{Name: RegionKnowledge, Priority: 2, MaxShare: 1},
		{Name: RegionHistory, Priority: 3, MaxShare: 1},
		{Name: RegionToolOutputs, Priority: 4, MaxShare: 1},
	}
	p.HistoryTrim = HistoryTrimTurns // as the cookbook trims: the oldest first, while it does not fit
	return p
}

func (*Cookbook) policy(p *Policy) (Policy, error) {
	if p != nil {
		return Policy{}, fmt.Errorf("%w: the cookbook format takes no policy: it keeps every item but the oldest history", ErrInvalidRequest)
	}
	return cookbookPolicy(), nil
}

func (c *Cookbook) prepare(a *assembly) error {
	req := a.req
	if len(req.Tools) > 0 {
		return fmt.Errorf("%w: the cookbook format renders no tools", ErrInvalidRequest)
	}
	if req.Summary != nil {
		return fmt.Errorf("%w: the cookbook format renders no summary", ErrInvalidRequest)
	}
	if err := a.prepareParts(); err != nil {
		return err
	}
	a.message, a.hasMessage = req.Message, true
	if err := a.prepareMessage(); err != nil {
		return err
	}
	if agent := c.agent(); agent != nil {
		a.instructionIDs = append(a.instructionIDs, "agent")
		a.instructionTokens = append(a.instructionTokens, a.chatCost("system", []tokenizer.Part{tokenizer.NewPart(cookbookPrompt(agent))}, "", nil, ""))
	}
	if req.Instructions != "" {
		a.instructionIDs = append(a.instructionIDs, "instructions")
		a.instructionTokens = append(a.instructionTokens, a.chatCost("system", []tokenizer.Part{tokenizer.NewPart(req.Instructions)}, "", nil, ""))
	}
	required := func(id string, i int, text string) *ctxItem {
		it := &ctxItem{id: id, order: i, kept: true, required: true, parts: []tokenizer.Part{tokenizer.NewPart(text)}}
		it.cost = a.m.Join(it.parts)
		return it
	}
	for i, f := range req.Memory {
		a.memory = append(a.memory, required(idOf(f.Key, "memory", i), i,
			"- "+EscapeText(oneLineEscape(f.Key))+": "+EscapeText(oneLineEscape(f.Value))))
	}
	for i := range req.Knowledge {
		k := &req.Knowledge[i]
		tag := knowledgeElement(k.Type, "", k.Trusted)
		a.knowledge = append(a.knowledge, required(idOf(k.ID, "knowledge", i), i,
			"["+EscapeText(oneLineEscape(cookbookTitle(k)))+"]: "+tag.wrap(k.Content)))
	}
	for i, o := range req.ToolOutputs {
		a.toolOuts = append(a.toolOuts, required(idOf(o.CallID, "tool_outputs", i), i,
			"Tool '"+EscapeText(oneLineEscape(o.Tool))+"' returned: "+toolOutputElement("", "").wrap(o.Result)))
	}
	// The history: each message a turn of its own, none required, whatever its role and content.
	h := req.History
	sc := a.scratch
	sc.contents, sc.msgCosts = sized(sc.contents, len(h)), sized(sc.msgCosts, len(h))
	a.contents, a.msgCosts = sc.contents, sc.msgCosts
	turns := sc.turns[:0]
	for i := range h {
		turns = append(turns, group{first: int32(i), n: 1, cost: -1})
	}
	a.setTurns(turns, len(turns))
	return nil
}

func (*Cookbook) body(text string) string { return text }

// turnCost is exact: a message is its role and content.
func (*Cookbook) turnCost(a *assembly, msg *Message, content []tokenizer.Part) int {
	return a.chatCost(msg.Role, content, "", nil, "")
}

func (*Cookbook) settle(*assembly) {}

func (c *Cookbook) render(a *assembly, out *output) {
	n := 3 + len(a.toolOuts) + len(a.turns) - a.keepFrom
	out.messages = make([]ChatMessage, 0, n)
	// message adds a message of role whose content is parts joined, region's.
	message := func(region Region, role string, parts ...tokenizer.Part) string {
		out.frame(region, role)
		s := segments{}
		s.add(region, parts...)
		out.add(s)
		content := tokenizer.JoinText(parts)
		out.messages = append(out.messages, ChatMessage{Role: role, Content: content})
		return content
	}
	agent := c.agent()
	if agent != nil {
		out.prefix = message(RegionInstructions, "system", tokenizer.NewPart(cookbookPrompt(agent)))
	}
	if a.req.Instructions != "" {
		if s := message(RegionInstructions, "system", tokenizer.NewPart(a.req.Instructions)); agent == nil {
			out.prefix = s
		}
	}
	if len(a.memory) > 0 {
		tag := memoryElement(false)
		parts := make([]tokenizer.Part, 0, 2*len(a.memory)+1)
		parts = append(parts, tokenizer.NewPart("User context:\n"+tag.open+"\n"))
		for i, it := range a.memory {
			if i > 0 {
				parts = append(parts, tokenizer.NewPart("\n"))
			}
			parts = append(parts, it.parts...)
		}
		message(RegionMemory, "system", append(parts, tokenizer.NewPart("\n"+tag.close()))...)
	}
	if len(a.knowledge) > 0 {
		parts := make([]tokenizer.Part, 0, 2*len(a.knowledge))
		parts = append(parts, tokenizer.NewPart("Relevant knowledge:\n"))
		for i, it := range a.knowledge {
			if i > 0 {
				parts = append(parts, tokenizer.NewPart("\n\n"))
			}
			parts = append(parts, it.parts...)
		}
		message(RegionKnowledge, "system", parts...)
	}
	for _, g := range a.turns[a.keepFrom:] {
		msg := &a.msgs(&g)[0]
		// Counted by the planner as it is rendered (see turnCost), its content as groupCost wrote it.
		out.addTokens(RegionHistory, int(g.cost))
		out.messages = append(out.messages, ChatMessage{Role: msg.Role, Content: a.messageText(msg)})
	}
	for _, it := range a.toolOuts {
		message(RegionToolOutputs, "system", it.parts...)
	}
	message(RegionMessage, "user", tokenizer.NewPart(a.message))
	out.addTokens(regionOverhead, a.model.ReplyPriming)
}

// check keeps Chat Completions' one rule that the cookbook's layout is sure to keep, at least one message
// (the user's message ends every one), and no other: the cookbook shows the history's roles and contents
// as assemble_context does, a tool message without its call or a role Chat Completions does not know
// included (see Cookbook), and holding them to OpenAI's rules would be another layout.
func (*Cookbook) check(_ *assembly, out *output) error {
	if len(out.messages) == 0 { // cannot happen
		return fmt.Errorf("%w: the cookbook's layout has no message", ErrNoMessages)
	}
	return nil
}

// cookbookPrompt is the Valkey cookbook's system prompt for agent, which names the three fields even when
// they are empty.
func cookbookPrompt(agent *loom.Agent) string {
	return agent.Instructions + "\n\nConstraints: " + agent.Constraints + "\nFormat: " + agent.OutputFormat
}

// cookbookTitle is the title the Valkey cookbook shows for a knowledge item, d.get('title', 'Doc'):
// Metadata["title"] when the key is there, even empty (an entry with "title": ""), else Source when it is
// not empty, else "Doc" (an entry without a title). The Valkey cookbook's key layout (store/valkey/cookbook)
// writes an item's title by this rule and reads an entry back so that it holds: an entry's title is
// Metadata["title"], and an entry without one has neither Metadata["title"] nor Source.
func cookbookTitle(k *Knowledge) string {
	if t, ok := k.Metadata["title"]; ok {
		return t
	}
	if k.Source != "" {
		return k.Source
	}
	return "Doc"
}

// oneLineEscape escapes a value that the cookbook shows on a line of its own making (a memory key or value,
// a knowledge title, a tool's name) so that it stays on that line: each line break as a Go string literal
// writes it (\n, \r, \v, \f, \u0085, \u2028, \u2029), and the backslash as \\, so that the escape is
// unambiguous.
func oneLineEscape(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD") // as EscapeText will, so that no escape meets a broken character
	if !strings.ContainsAny(s, "\\\n\r\v\f\u0085\u2028\u2029") {
		return s
	}
	return lineEscaper.Replace(s)
}

var lineEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\v", `\v`, "\f", `\f`,
	"\u0085", `\u0085`, "\u2028", `\u2028`, "\u2029", `\u2029`)
