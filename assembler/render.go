package assembler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// rendering is a plan rendered in the request's format, with its exact count.
type rendering struct {
	messages []ChatMessage
	system   string
	tools    []json.RawMessage
	text     string
	context  string
	prefix   string // the stable prefix, hashed into Result.PrefixHash
	total    int
	costs    requiredCosts
	err      error // the rendering breaks a rule of the format that trimming cannot fix
}

// requiredCosts is what the required regions cost in a rendering.
type requiredCosts struct{ instructions, tools, message int }

// Wrappers of the memory blocks.
const (
	pinnedOpen  = "<user_memory pinned=\"true\" trusted=\"false\">\n"
	memoryOpen  = "<user_memory trusted=\"false\">\n"
	memoryClose = "</user_memory>\n\n"
)

// render renders the kept items (only the required ones with requiredOnly) and counts the result.
func (a *assembly) render(requiredOnly bool) rendering {
	var r rendering

	// The stable prefix: instructions, then pinned memory.
	var stable []part
	if a.req.Instructions != "" {
		stable = append(stable, newPart(a.req.Instructions))
	}
	var pinned, recent []*ctxItem
	if !requiredOnly {
		for _, it := range a.memory {
			if it.kept && it.pinned {
				pinned = append(pinned, it)
			} else if it.kept {
				recent = append(recent, it)
			}
		}
	}
	if len(pinned) > 0 {
		if len(stable) > 0 {
			stable = append(stable, newPart("\n\n"))
		}
		stable = append(stable, newPart(pinnedOpen))
		for _, it := range pinned {
			stable = append(stable, it.parts...)
		}
		stable = append(stable, newPart(strings.TrimSuffix(memoryClose, "\n\n")))
	}

	// The volatile context: other memory, tool outputs, knowledge.
	var ctxParts []part
	if len(recent) > 0 {
		ctxParts = append(ctxParts, newPart(memoryOpen))
		for _, it := range recent {
			ctxParts = append(ctxParts, it.parts...)
		}
		ctxParts = append(ctxParts, newPart(memoryClose))
	}
	if !requiredOnly {
		for i := len(a.toolOuts) - 1; i >= 0; i-- { // chronological
			if it := a.toolOuts[i]; it.kept {
				ctxParts = append(ctxParts, it.parts...)
			}
		}
	}
	// The knowledge, the context's last parts, is also returned alone: the context text is joined once, and
	// the knowledge's is its end.
	knowledgeAt := 0 // where the knowledge starts in the context text
	for _, p := range ctxParts {
		knowledgeAt += len(p.text)
	}
	if !requiredOnly {
		kept := a.keptKnowledge()
		ctxParts = slices.Grow(ctxParts, 4*len(kept))
		for _, it := range kept {
			if it.raw {
				it.parts[2].text, it.raw = escapeText(it.parts[2].text), false
			}
			it.parts[0] = part{text: marker(it.ref.Marker), tokens: a.markerCost(it.ref.Marker)}
			ctxParts = append(ctxParts, it.parts...)
		}
	}
	ctxText := joinText(ctxParts)
	r.context = strings.TrimSuffix(ctxText[knowledgeAt:], "\n\n")
	if n := len(ctxParts); n > 0 && strings.HasSuffix(ctxParts[n-1].text, "\n\n") { // as trimTrailingBlank does
		ctxText = ctxText[:len(ctxText)-2]
	}
	trimTrailingBlank(ctxParts) // ctxParts holds copies of the items' parts

	// History: kept turns (from the first that a provider accepts as a start), then the required exchange.
	history := a.required
	if !requiredOnly {
		a.trimKeptStart()
		history = a.turns[a.keepFrom:] // the kept turns, then the required ones
	}

	toolsJSON := a.toolsJSON()
	r.tools = toolsJSON.raw
	if a.format != FormatText { // the text format has the tools in its text
		r.costs.tools = a.m.countShort(toolsJSON.text)
		r.total += r.costs.tools
	}

	switch a.format {
	case FormatOpenAI:
		a.renderOpenAI(&r, stable, history, ctxParts, ctxText)
	case FormatAnthropic:
		a.renderAnthropic(&r, stable, history, ctxParts, ctxText)
	case FormatText:
		a.renderText(&r, stable, history, ctxParts)
	}
	r.prefix = toolsJSON.text + "\x00" + joinText(stable)
	return r
}

// trimKeptStart drops the kept history turns that would start the history with an assistant's message or
// a tool result, reporting them as orphans.
func (a *assembly) trimKeptStart() {
	for a.keepFrom < len(a.groups) {
		g := &a.groups[a.keepFrom]
		if role := a.msgs(g)[0].Role; role == "user" || role == "system" {
			return
		}
		if !g.orphaned {
			g.orphaned = true
			for i := range g.n {
				a.dropped[RegionHistory] = append(a.dropped[RegionHistory], Dropped{ID: historyID(int(g.first + i)), Reason: ReasonOrphan})
			}
		}
		a.keepFrom++
	}
}

func (a *assembly) renderOpenAI(r *rendering, stable []part, history []group, ctxParts []part, ctxText string) {
	// add adds a message with content, made of parts, and returns its cost.
	add := func(role string, parts []part, content string) int {
		cost := a.messageCost(role, parts, "", nil, "")
		r.total += cost
		r.messages = append(r.messages, ChatMessage{Role: role, Content: content})
		return cost
	}
	n := 3
	for _, g := range history {
		n += int(g.n)
	}
	r.messages = make([]ChatMessage, 0, n)
	if len(stable) > 0 {
		r.costs.instructions = add("system", stable, joinText(stable))
	}
	for gi := range history {
		g := &history[gi]
		contents := a.groupContents(g)
		msgs := a.msgs(g)
		named := false // a tool message with a name, which costs less here than in groupCost
		for i := range msgs {
			msg := &msgs[i]
			name := msg.Name
			if msg.Role == "tool" { // Chat Completions' tool messages have no name
				named, name = named || name != "", ""
			}
			r.messages = append(r.messages, ChatMessage{Role: msg.Role, Content: contents[i].text, Name: name, ToolCalls: msg.ToolCalls, ToolCallID: msg.ToolCallID})
		}
		if g.cost >= 0 && !named { // what groupCost counted, message by message
			r.total += int(g.cost)
			continue
		}
		for i := range msgs {
			msg := &msgs[i]
			name := msg.Name
			if msg.Role == "tool" {
				name = ""
			}
			r.total += a.messageCost(msg.Role, contents[i:i+1], name, msg.ToolCalls, msg.ToolCallID)
		}
	}
	if len(ctxParts) > 0 {
		add("system", ctxParts, ctxText)
	}
	if a.message != "" {
		r.costs.message = add("user", []part{newPart(a.message)}, a.message)
	}
	r.total += a.model.ReplyPriming
}

func (a *assembly) renderAnthropic(r *rendering, stable []part, history []group, ctxParts []part, ctxText string) {
	if len(stable) > 0 {
		r.system = joinText(stable)
		cost := a.model.TokensPerMessage + a.m.join(stable)
		r.total += cost
		r.costs.instructions = cost
	}
	var msgs []ChatMessage
	var costs []int
	push := func(role string, blocks []Block, cost int) {
		if n := len(msgs); n > 0 && msgs[n-1].Role == role { // Anthropic alternates roles: merge
			msgs[n-1].Blocks = append(msgs[n-1].Blocks, blocks...)
			costs[n-1] += cost
			return
		}
		msgs = append(msgs, ChatMessage{Role: role, Blocks: blocks})
		costs = append(costs, cost+a.model.TokensPerMessage+a.roleTokens(role))
	}
	for gi := range history {
		g := &history[gi]
		contents := a.groupContents(g)
		for i, msg := range a.msgs(g) {
			content := a.m.join(contents[i : i+1])
			switch msg.Role {
			case "assistant":
				var blocks []Block
				cost := 0
				if msg.Content != "" {
					blocks = append(blocks, Block{Type: "text", Text: msg.Content})
					cost += content
				}
				for _, call := range msg.ToolCalls {
					input := json.RawMessage(call.Function.Arguments)
					if !json.Valid(input) || !strings.HasPrefix(strings.TrimSpace(call.Function.Arguments), "{") {
						b, _ := marshalRaw(map[string]string{"arguments": call.Function.Arguments})
						input = b
					}
					id := anthropicID(call.ID)
					blocks = append(blocks, Block{Type: "tool_use", ID: id, Name: call.Function.Name, Input: input})
					cost += a.m.countShort(id) + a.m.countShort(call.Function.Name) + a.m.count(string(input))
				}
				push("assistant", blocks, cost)
			case "tool":
				id := anthropicID(msg.ToolCallID)
				push("user", []Block{{Type: "tool_result", ToolUseID: id, Content: msg.Content}}, a.m.countShort(id)+content)
			default: // user, and system messages of the history (Anthropic has only the top-level system)
				push("user", []Block{{Type: "text", Text: msg.Content}}, content)
			}
		}
	}
	var last []Block
	lastCost := 0
	if len(ctxParts) > 0 {
		last = append(last, Block{Type: "text", Text: ctxText})
		lastCost += a.m.join(ctxParts)
	}
	if a.message != "" {
		last = append(last, Block{Type: "text", Text: a.message})
		mc := a.m.count(a.message)
		lastCost += mc
		r.costs.message = mc
	}
	if len(last) > 0 {
		push("user", last, lastCost)
	}
	for i := range msgs {
		r.total += costs[i]
	}
	r.messages = msgs
	if len(msgs) > 0 && msgs[0].Role != "user" {
		r.err = fmt.Errorf("%w: an Anthropic conversation starts with the user, and this history starts with the assistant's tool call", ErrInvalidRequest)
	}
	r.total += a.model.ReplyPriming
}

// anthropicID maps a tool call id to one that Anthropic accepts ([a-zA-Z0-9_-]+), the same way for a
// tool_use and its tool_result.
func anthropicID(id string) string {
	ok := id != ""
	for i := 0; i < len(id) && ok; i++ {
		c := id[i]
		ok = c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(id)) // keep ids that differ only in replaced characters apart
	return "t" + string(b) + "_" + hex.EncodeToString(sum[:4])
}

func (a *assembly) renderText(r *rendering, stable []part, history []group, ctxParts []part) {
	var parts []part
	if len(stable) > 0 {
		parts = append(parts, stable...)
		parts = append(parts, newPart("\n\n"))
	}
	if tools := a.toolsJSON().text; tools != "" {
		parts = append(parts, newPart("Tools:\n"), newPart(tools), newPart("\n\n"))
	}
	for gi := range history {
		g := &history[gi]
		contents := a.groupContents(g)
		for i, msg := range a.msgs(g) {
			label := map[string]string{"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool result"}[msg.Role]
			if msg.Role == "tool" {
				label += " (" + msg.ToolCallID + ")"
			}
			parts = append(parts, newPart(label+": "), contents[i], newPart("\n\n"))
			for _, call := range msg.ToolCalls {
				parts = append(parts, newPart("Assistant called "+call.Function.Name+" ("+call.ID+"): "+call.Function.Arguments+"\n\n"))
			}
		}
	}
	parts = append(parts, ctxParts...)
	if len(ctxParts) > 0 {
		parts = append(parts, newPart("\n\n"))
	}
	if a.message != "" {
		parts = append(parts, newPart("User: "), newPart(a.message), newPart("\n\n"))
	}
	parts = append(parts, newPart("Assistant:"))
	r.text = joinText(parts)
	r.total += a.m.join(parts)
}

// messageCost is what an OpenAI-style message costs: the format's overhead, its role, its content and
// name, tool calls and call id.
func (a *assembly) messageCost(role string, content []part, name string, calls []ToolCall, callID string) int {
	if a.format == FormatText {
		n := a.m.join(content)
		for _, c := range calls {
			n += a.m.count(c.Function.Name + c.ID + c.Function.Arguments)
		}
		return n + 4 // "User: " and the blank line after, roughly; the text is counted whole in the end
	}
	n := a.model.TokensPerMessage + a.roleTokens(role) + a.m.join(content)
	if name != "" {
		n += a.m.countShort(name) + a.model.TokensPerName
	}
	if len(calls) > 0 {
		n += a.m.count(toolCallsJSON(calls))
	}
	if callID != "" {
		n += a.m.countShort(callID)
	}
	return n
}

// roleTokens is the count of a role, remembered without hashing it for the four roles.
func (a *assembly) roleTokens(role string) int {
	i := slices.Index([]string{"user", "assistant", "system", "tool"}, role)
	if i < 0 {
		return a.m.countShort(role)
	}
	if a.roles[i] == 0 {
		a.roles[i] = a.m.countShort(role) + 1 // 0: not counted yet
	}
	return a.roles[i] - 1
}

type renderedTools struct {
	text string
	raw  []json.RawMessage
}

// toolsJSON renders the tool definitions in the format's shape.
func (a *assembly) toolsJSON() renderedTools {
	if len(a.req.Tools) == 0 {
		return renderedTools{}
	}
	var out renderedTools
	for _, t := range a.req.Tools {
		var b []byte
		if a.format == FormatAnthropic {
			schema := t.Function.Parameters
			if len(schema) == 0 {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			b, _ = marshalRaw(struct {
				Name        string          `json:"name"`
				Description string          `json:"description,omitempty"`
				InputSchema json.RawMessage `json:"input_schema"`
			}{t.Function.Name, t.Function.Description, schema})
		} else {
			if t.Type == "" {
				t.Type = "function"
			}
			b, _ = marshalRaw(t)
		}
		out.raw = append(out.raw, b)
	}
	all, _ := marshalRaw(out.raw)
	out.text = string(all)
	if a.format == FormatText {
		out.raw = nil // the text format has the tools in its text
	}
	return out
}

func joinText(parts []part) string {
	only := -1 // the one non-empty part, if there is only one: returned as it is, without a copy
	for i, p := range parts {
		if p.text != "" {
			if only >= 0 {
				only = -2
				break
			}
			only = i
		}
	}
	switch only {
	case -1:
		return ""
	case -2:
	default:
		return parts[only].text
	}
	n := 0
	for _, p := range parts {
		n += len(p.text)
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range parts {
		b.WriteString(p.text)
	}
	return b.String()
}

// trimTrailingBlank drops the blank line that ends the last part, if it is a wrapper's, in place: parts
// must be the caller's own.
func trimTrailingBlank(parts []part) {
	if n := len(parts); n > 0 && strings.HasSuffix(parts[n-1].text, "\n\n") {
		parts[n-1] = newPart(strings.TrimSuffix(parts[n-1].text, "\n\n"))
	}
}
