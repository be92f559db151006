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
	// used is what each region (reg*) uses of total, as far as the rendering knows it; the texts in units
	// are shared by regions, and split among them only when the rendering is reported (see regionsUsed).
	used   regionTokens
	units  [2]unit
	nunits int
	err    error // the rendering breaks a rule of the format that trimming cannot fix
}

// numRegions is the size of an array indexed by Region: the regions are 1 to RegionMessage, and index 0,
// the zero Region, is regionOverhead here.
const numRegions = int(RegionMessage) + 1

// regionOverhead is what a rendering uses that is no region's: the format's overhead (see Report).
const regionOverhead Region = 0

// unit is a text counted whole (total tokens) that holds more than one region: parts[:bounds[0].end] is
// the first region's, and so on; the last bound ends at len(parts).
type unit struct {
	parts  []part
	total  int
	bounds [10]bound
	n      int
}

type bound struct {
	end    int
	region Region
}

// mark ends the region that runs from the last bound to len(u.parts), if it has any parts.
func (u *unit) mark(region Region) { u.markAt(len(u.parts), region) }

// markAt ends the region that runs from the last bound to end, if it has any parts.
func (u *unit) markAt(end int, region Region) {
	if (u.n == 0 && end > 0) || (u.n > 0 && end > u.bounds[u.n-1].end) {
		u.bounds[u.n] = bound{end, region}
		u.n++
	}
}

// addUnit records that u.total tokens of the rendering are shared by u's regions.
func (r *rendering) addUnit(u unit) {
	if u.n == 1 {
		r.used[u.bounds[0].region] += u.total
		return
	}
	r.units[r.nunits] = u
	r.nunits++
}

// regionsUsed splits the rendering's shared texts among their regions, and returns what each region uses.
// Each region of a text is given what it adds to the count of the text before it, so that the regions add
// up to the text's count exactly, however its parts merge at their joins.
func (a *assembly) regionsUsed(r *rendering) regionTokens {
	used := r.used
	for i := range r.units[:r.nunits] {
		u := &r.units[i]
		prev := 0
		for j, b := range u.bounds[:u.n] {
			n := u.total
			if j < u.n-1 {
				n = a.m.join(u.parts[:b.end])
			}
			used[b.region] += n - prev
			prev = n
		}
	}
	return used
}

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
	instructionParts := len(stable) // stable[:instructionParts] is the instructions', the rest pinned memory's
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
	memoryEnd := len(ctxParts)
	if !requiredOnly {
		for i := len(a.toolOuts) - 1; i >= 0; i-- { // chronological
			if it := a.toolOuts[i]; it.kept {
				ctxParts = append(ctxParts, it.parts...)
			}
		}
	}
	toolsEnd := len(ctxParts)
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
				it.parts[2].text, it.raw = a.knowledgeBody(it.parts[2].text), false
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
		n := a.m.countShort(toolsJSON.text)
		r.used[RegionTools] += n
		r.total += n
	}

	// The stable prefix is passed apart from the rest of the layout, which escape analysis would let take
	// it to the heap.
	l := layout{instructionParts: instructionParts, ctx: ctxParts, ctxText: ctxText, memoryEnd: memoryEnd, toolsEnd: toolsEnd}
	switch a.format {
	case FormatOpenAI:
		a.renderOpenAI(&r, stable, &l, history)
	case FormatAnthropic:
		a.renderAnthropic(&r, stable, &l, history)
	case FormatText:
		a.renderText(&r, stable, &l, history)
	}
	r.prefix = toolsJSON.text + "\x00" + joinText(stable)
	return r
}

// layout is where each region's parts are in a rendering's stable prefix (instructions, then pinned
// memory) and context.
type layout struct {
	instructionParts int    // stable[:instructionParts] is the instructions'
	ctx              []part // memory, tool outputs, knowledge
	ctxText          string
	memoryEnd        int // ctx[:memoryEnd] is memory's
	toolsEnd         int // ctx[memoryEnd:toolsEnd] is the tool outputs', the rest knowledge's
}

// stableRegion is the region of the stable prefix's first part, which a message of it is framed for.
func (l *layout) stableRegion() Region {
	if l.instructionParts > 0 {
		return RegionInstructions
	}
	return RegionMemory
}

// stableUnit is the stable prefix as one text of total tokens.
func (l *layout) stableUnit(stable []part, total int) unit {
	u := unit{total: total}
	u.markAt(l.instructionParts, RegionInstructions)
	u.markAt(len(stable), RegionMemory)
	if u.n > 1 { // to be split: a copy, so that a prefix of instructions alone stays off the heap
		u.parts = slices.Clone(stable)
	}
	return u
}

// contextUnit is the context as one text of total tokens.
func (l *layout) contextUnit(total int) unit {
	u := unit{parts: l.ctx, total: total}
	u.markAt(l.memoryEnd, RegionMemory)
	u.markAt(l.toolsEnd, RegionToolOutputs)
	u.markAt(len(l.ctx), RegionKnowledge)
	return u
}

// appendStable appends the stable prefix to u, and then sep, marking its regions' bounds.
func (l *layout) appendStable(u *unit, stable []part, sep ...part) {
	u.parts = append(u.parts, stable[:l.instructionParts]...)
	if l.instructionParts == len(stable) {
		u.parts = append(u.parts, sep...)
	}
	u.mark(RegionInstructions)
	if l.instructionParts < len(stable) {
		u.parts = append(u.parts, stable[l.instructionParts:]...)
		u.parts = append(u.parts, sep...)
		u.mark(RegionMemory)
	}
}

// appendContext appends the context to u, and then sep, marking its regions' bounds.
func (l *layout) appendContext(u *unit, sep ...part) {
	segments := [3]struct {
		from, to int
		region   Region
	}{
		{0, l.memoryEnd, RegionMemory}, {l.memoryEnd, l.toolsEnd, RegionToolOutputs}, {l.toolsEnd, len(l.ctx), RegionKnowledge},
	}
	last := 2 // the last region with parts, which sep goes with
	for last > 0 && segments[last].from == segments[last].to {
		last--
	}
	for i, seg := range segments {
		u.parts = append(u.parts, l.ctx[seg.from:seg.to]...)
		if i == last {
			u.parts = append(u.parts, sep...)
		}
		u.mark(seg.region)
	}
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

func (a *assembly) renderOpenAI(r *rendering, stable []part, l *layout, history []group) {
	n := 3
	for _, g := range history {
		n += int(g.n)
	}
	r.messages = make([]ChatMessage, 0, n)
	frame := func(role string) int { return a.model.TokensPerMessage + a.roleTokens(role) }
	if len(stable) > 0 {
		content := a.m.join(stable)
		f := frame("system")
		r.total += f + content
		r.used[l.stableRegion()] += f
		r.addUnit(l.stableUnit(stable, content))
		r.messages = append(r.messages, ChatMessage{Role: "system", Content: joinText(stable)})
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
			r.used[RegionHistory] += int(g.cost)
			continue
		}
		for i := range msgs {
			msg := &msgs[i]
			name := msg.Name
			if msg.Role == "tool" {
				name = ""
			}
			cost := a.messageCost(msg.Role, contents[i:i+1], name, msg.ToolCalls, msg.ToolCallID)
			r.total += cost
			r.used[RegionHistory] += cost
		}
	}
	if len(l.ctx) > 0 { // the context's own message, whose frame is no region's
		u := l.contextUnit(a.m.join(l.ctx))
		f := frame("system")
		r.total += f + u.total
		r.used[regionOverhead] += f
		r.addUnit(u)
		r.messages = append(r.messages, ChatMessage{Role: "system", Content: l.ctxText})
	}
	if a.message != "" {
		cost := a.messageCost("user", []part{newPart(a.message)}, "", nil, "")
		r.total += cost
		r.used[RegionMessage] += cost
		r.messages = append(r.messages, ChatMessage{Role: "user", Content: a.message})
	}
	r.total += a.model.ReplyPriming
	r.used[regionOverhead] += a.model.ReplyPriming
}

func (a *assembly) renderAnthropic(r *rendering, stable []part, l *layout, history []group) {
	if len(stable) > 0 {
		r.system = joinText(stable)
		content := a.m.join(stable)
		r.total += a.model.TokensPerMessage + content
		r.used[l.stableRegion()] += a.model.TokensPerMessage
		r.addUnit(l.stableUnit(stable, content))
	}
	var msgs []ChatMessage
	// push adds blocks of a role; a message it opens is framed for region.
	push := func(role string, blocks []Block, region Region) {
		if n := len(msgs); n > 0 && msgs[n-1].Role == role { // Anthropic alternates roles: merge
			msgs[n-1].Blocks = append(msgs[n-1].Blocks, blocks...)
			return
		}
		msgs = append(msgs, ChatMessage{Role: role, Blocks: blocks})
		frame := a.model.TokensPerMessage + a.roleTokens(role)
		r.total += frame
		r.used[region] += frame
	}
	addHistory := func(role string, blocks []Block, cost int) {
		r.total += cost
		r.used[RegionHistory] += cost
		push(role, blocks, RegionHistory)
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
				addHistory("assistant", blocks, cost)
			case "tool":
				id := anthropicID(msg.ToolCallID)
				addHistory("user", []Block{{Type: "tool_result", ToolUseID: id, Content: msg.Content}}, a.m.countShort(id)+content)
			default: // user, and system messages of the history (Anthropic has only the top-level system)
				addHistory("user", []Block{{Type: "text", Text: msg.Content}}, content)
			}
		}
	}
	// The context and the message, in a user message of their own, or the history's last one. A message
	// the context opens is framed for no region.
	var last []Block
	frame := RegionMessage
	if len(l.ctx) > 0 {
		last = append(last, Block{Type: "text", Text: l.ctxText})
		u := l.contextUnit(a.m.join(l.ctx))
		r.total += u.total
		r.addUnit(u)
		frame = regionOverhead
	}
	if a.message != "" {
		last = append(last, Block{Type: "text", Text: a.message})
		mc := a.m.count(a.message)
		r.total += mc
		r.used[RegionMessage] += mc
	}
	if len(last) > 0 {
		push("user", last, frame)
	}
	if msgs == nil { // the Messages API requires the array, even empty
		msgs = []ChatMessage{}
	}
	r.messages = msgs
	if len(msgs) > 0 && msgs[0].Role != "user" { // cannot happen: kept history starts with the user (see run)
		r.err = fmt.Errorf("%w: an Anthropic conversation starts with the user, and this one starts with the %s", ErrNoUserTurn, msgs[0].Role)
	}
	r.total += a.model.ReplyPriming
	r.used[regionOverhead] += a.model.ReplyPriming
}

// anthropicID maps a tool call id to one that Anthropic accepts ([a-zA-Z0-9_-]+), the same way for a
// tool_use and its tool_result.
func anthropicID(id string) string {
	ok := id != ""
	for i := 0; i < len(id) && ok; i++ {
		ok = isToolNameByte(id[i]) // the characters of a tool name
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !isToolNameByte(c) {
			b[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(id)) // keep ids that differ only in replaced characters apart
	return "t" + string(b) + "_" + hex.EncodeToString(sum[:4])
}

// The text format is a transcript: turns that each start with a header at the start of a line ("User: ",
// "Assistant: ", "System: ", "Tool result (id): ", "Assistant called name (id): ", "Tools:"), after the
// instructions (the caller's own, as given) and pinned memory, with the context (memory, tool outputs,
// knowledge, in their tags) before the current message, and "Assistant:" last.
//
// So that no text can forge a turn, every line of a turn's body after its first (the first follows its
// header; the tools' JSON, on the line after "Tools:", is indented too) starts with textIndent, and so does
// every line of a text inside a tag of the context; a header never does. Each line break of such a text
// (CR LF, LF, VT, FF, CR, NEL, LS, PS: see lineBreak) is followed by textIndent; tool names cannot hold one
// (see CheckToolName), and each memory fact is one line. Every line of the transcript after the
// instructions is then Loom's own (a header, a tag, a memory line, a marker, a blank line between turns)
// or starts with textIndent, and removing textIndent after each line break of a body gives the text back.
const textIndent = "  "

// lineBreak returns the length of the line break that s starts with, 0 if none: CR LF (one break), LF, VT,
// FF, CR, NEL (U+0085), LS (U+2028) or PS (U+2029), the breaks of Unicode's line breaking rules.
func lineBreak(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '\r':
		if len(s) > 1 && s[1] == '\n' {
			return 2
		}
		return 1
	case '\n', '\v', '\f':
		return 1
	case 0xC2: // NEL
		if len(s) > 1 && s[1] == 0x85 {
			return 2
		}
	case 0xE2: // LS, PS
		if len(s) > 2 && s[1] == 0x80 && (s[2] == 0xA8 || s[2] == 0xA9) {
			return 3
		}
	}
	return 0
}

// hasLineBreak reports whether s holds a line break (see lineBreak).
func hasLineBreak(s string) bool {
	for i := 0; i < len(s); i++ {
		if lineBreak(s[i:]) > 0 {
			return true
		}
	}
	return false
}

// indentLines returns s with textIndent after each of its line breaks, so that no line of s but its first
// starts a line of the text format's transcript.
func indentLines(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		n := lineBreak(s[i:])
		if n == 0 {
			i++
			continue
		}
		if last == 0 {
			b.Grow(len(s) + 8*len(textIndent))
		}
		b.WriteString(s[last : i+n])
		b.WriteString(textIndent)
		i += n
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// textLabels are the headers of the text format's turns, by role.
var textLabels = map[string]string{"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool result"}

func (a *assembly) renderText(r *rendering, stable []part, l *layout, history []group) {
	u := unit{}
	if len(stable) > 0 {
		l.appendStable(&u, stable, newPart("\n\n"))
	}
	if tools := a.toolsJSON().text; tools != "" {
		u.parts = append(u.parts, newPart("Tools:\n"+textIndent), newPart(indentLines(tools)), newPart("\n\n"))
		u.mark(RegionTools)
	}
	for gi := range history {
		g := &history[gi]
		contents := a.groupContents(g) // indented (see groupCost)
		for i, msg := range a.msgs(g) {
			label := textLabels[msg.Role]
			if msg.Role == "tool" {
				label += " (" + indentLines(msg.ToolCallID) + ")"
			}
			u.parts = append(u.parts, newPart(label+": "), contents[i], newPart("\n\n"))
			for _, call := range msg.ToolCalls {
				u.parts = append(u.parts, newPart("Assistant called "+call.Function.Name+" ("+indentLines(call.ID)+"): "+
					indentLines(call.Function.Arguments)+"\n\n"))
			}
		}
	}
	u.mark(RegionHistory)
	if len(l.ctx) > 0 {
		l.appendContext(&u, newPart("\n\n"))
	}
	if a.message != "" {
		u.parts = append(u.parts, newPart("User: "), newPart(indentLines(a.message)), newPart("\n\n"))
		u.mark(RegionMessage)
	}
	u.parts = append(u.parts, newPart("Assistant:"))
	u.mark(regionOverhead)
	r.text = joinText(u.parts)
	u.total = a.m.join(u.parts)
	r.total += u.total
	r.addUnit(u)
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
