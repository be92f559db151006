package assembler

import "github.com/context-loom/loom/tokenizer"

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
			out.messages = append(out.messages, ChatMessage{Role: msg.Role, Content: contents[i].Text, Name: name, ToolCalls: msg.ToolCalls, ToolCallID: msg.ToolCallID})
		}
		if g.cost >= 0 && !named { // what groupCost counted, message by message, as they are rendered
			out.addTokens(RegionHistory, int(g.cost))
			continue
		}
		for i := range msgs { // as chatCost counts a message, its tool message's name left out
			msg := &msgs[i]
			out.frame(RegionHistory, msg.Role)
			out.addPart(RegionHistory, contents[i])
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
	if a.message != "" {
		out.frame(RegionMessage, "user")
		out.addText(RegionMessage, a.message)
		out.messages = append(out.messages, ChatMessage{Role: "user", Content: a.message})
	}
	out.addTokens(regionOverhead, a.model.ReplyPriming)
	out.context = l.knowledge
	out.prefix = stablePrefix(tools.text, stable)
}
