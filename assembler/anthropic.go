package assembler

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// anthropic is the Messages API format (see Anthropic).
type anthropic struct{ markup }

func (anthropic) Name() string { return FormatAnthropic }

// prepare checks the request and makes its candidates (see assembly.prepareMarkup); a tool's parameters,
// its input_schema, must be a JSON object whose "type" is "object" (the Messages API refuses a schema
// without one with a 400), or prepare returns an error wrapping ErrInvalidRequest that names the tool.
func (anthropic) prepare(a *assembly) error {
	if err := a.prepareMarkup(); err != nil {
		return err
	}
	return a.tools.checkInputSchemas()
}

func (anthropic) body(text string) string { return text }

// turnCost is the OpenAI-style count of the message: the planner's estimate, which the rendering's
// exact count then verifies (Anthropic merges turns of one role, and frames them once).
func (anthropic) turnCost(a *assembly, msg *Message, content []tokenizer.Part) int {
	return a.chatCost(msg.Role, content, msg.Name, msg.ToolCalls, msg.ToolCallID)
}

// anthropicTool is a tool definition as the Messages API takes it.
func anthropicTool(t Tool) []byte {
	schema := t.Function.Parameters
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	b, _ := marshalRaw(struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}{t.Function.Name, t.Function.Description, schema})
	return b
}

func (anthropic) render(a *assembly, out *output) { renderMessages(a, out, FormatAnthropic) }

// finish places the cache breakpoints on the verified rendering: they cost no tokens, so the renderings
// of the planning go without them.
func (anthropic) finish(a *assembly, out *output) { placeBreakpoints(a, out) }

var _ finisher = anthropic{}

// renderMessages lays the plan out as a Messages API request, its tools in the shape of the format named
// (anthropic, or gemini, which writes the request as its own: see gemini.render).
func renderMessages(a *assembly, out *output, shape string) {
	stable, l := a.markupLayout()
	tools := a.tools.rendered(shape)
	out.tools = tools.raw
	if a.tools != nil { // their JSON and, by a JSON rule, its overhead (Claude's: Anthropic's system prompt for tools): an estimate
		n := a.toolTokens(shape, tools.text).n
		if rule := a.model.Tools; !rule.Namespace {
			n += rule.DefinitionOverhead(len(stable) > 0)
		}
		out.addTokens(RegionTools, n)
		out.estimate(RegionTools)
	}
	out.marks.tools = out.total
	if len(stable) > 0 {
		out.system = tokenizer.JoinText(stable)
		out.addTokens(l.stableRegion(), a.model.TokensPerMessage) // the system prompt has no role
		out.add(l.stableText(stable))
	}
	out.marks.system = out.total
	var msgs []ChatMessage
	// push adds blocks of a role; a message it opens is framed for region.
	push := func(role string, blocks []Block, region Region) {
		if n := len(msgs); n > 0 && msgs[n-1].Role == role { // Anthropic alternates roles: merge
			msgs[n-1].Blocks = append(msgs[n-1].Blocks, blocks...)
			return
		}
		if role == "assistant" && len(msgs) > 0 { // the end of what the call that answered with it sent (see placeBreakpoints)
			out.marks.turnMsg, out.marks.turn = len(msgs)-1, out.total
		}
		msgs = append(msgs, ChatMessage{Role: role, Blocks: blocks})
		if role == "assistant" && shape == FormatGemini { // framed as it is sent
			role = "model"
		}
		out.frame(region, role)
	}
	// The history's last message ends the conversation when neither context nor a message follows it; an
	// assistant's message there is a prefill that the reply continues, and its text may not end in white
	// space ("final assistant content cannot end with trailing whitespace"): it is sent without it.
	last := len(l.history) - 1
	prefill := len(l.ctx) == 0 && a.message == "" && a.messageRendered == nil
	for gi := range l.history {
		g := &l.history[gi]
		contents := a.groupContents(g)
		history := a.msgs(g)
		for i := range history {
			msg := &history[i]
			switch msg.Role {
			case "assistant":
				var blocks []Block
				switch {
				case loom.IsBlank(msg.Content):
					// Only beside tool calls (a blank message is dropped as empty): no text block, for the API
					// refuses one of white space ("text content blocks must contain non-whitespace text").
				case prefill && gi == last && i == len(history)-1:
					text := strings.TrimRightFunc(msg.Content, loom.IsSpace)
					blocks = append(blocks, Block{Type: "text", Text: text})
					if len(text) == len(msg.Content) {
						out.addPart(RegionHistory, contents[i])
					} else {
						out.addPart(RegionHistory, tokenizer.NewPart(text))
					}
				default:
					blocks = append(blocks, Block{Type: "text", Text: msg.Content})
					out.addPart(RegionHistory, contents[i])
				}
				for _, call := range msg.ToolCalls {
					input := json.RawMessage(call.Function.Arguments)
					if !json.Valid(input) || !strings.HasPrefix(strings.TrimSpace(call.Function.Arguments), "{") {
						b, _ := marshalRaw(map[string]string{"arguments": call.Function.Arguments})
						input = b
					}
					id := anthropicID(call.ID)
					blocks = append(blocks, Block{Type: "tool_use", ID: id, Name: call.Function.Name, Input: input})
					out.addText(RegionHistory, id)
					out.addText(RegionHistory, call.Function.Name)
					out.addText(RegionHistory, string(input))
				}
				push("assistant", blocks, RegionHistory)
			case "tool":
				id := anthropicID(msg.ToolCallID)
				out.addText(RegionHistory, id)
				result := Block{Type: "tool_result", ToolUseID: id}
				if !loom.IsBlank(msg.Content) { // a result of white space is sent as none, which the API takes
					result.Content = msg.Content
					out.addPart(RegionHistory, contents[i])
				}
				push("user", []Block{result}, RegionHistory)
			default: // user, and system messages of the history (Anthropic has only the top-level system)
				if len(msg.Parts) == 0 {
					out.addPart(RegionHistory, contents[i])
					push("user", []Block{{Type: "text", Text: msg.Content}}, RegionHistory)
					break
				}
				// A user message's parts, after its Content's text unless that is blank (which the API
				// refuses as a block).
				var blocks []Block
				if !loom.IsBlank(msg.Content) {
					blocks = append(blocks, Block{Type: "text", Text: msg.Content})
					out.addPart(RegionHistory, contents[i])
				}
				blocks = append(blocks, a.rendered[int(g.first)+i].blocks...)
				out.addTokens(RegionHistory, a.partCost(int(g.first)+i))
				push("user", blocks, RegionHistory)
			}
		}
	}
	out.marks.histMsg, out.marks.history = len(msgs)-1, out.total
	if len(msgs) > 0 {
		out.marks.histBlock = len(msgs[len(msgs)-1].Blocks) - 1
	}
	// The context and the message, in a user message of their own, or the history's last one. A message
	// the context opens is framed for no region.
	var final []Block
	frame := RegionMessage
	if len(l.ctx) > 0 {
		final = append(final, Block{Type: "text", Text: l.ctxText})
		out.add(l.contextText())
		frame = regionOverhead
	}
	if a.message != "" {
		final = append(final, Block{Type: "text", Text: a.message})
		out.addText(RegionMessage, a.message)
	}
	if r := a.messageRendered; r != nil {
		final = append(final, r.blocks...)
		out.addTokens(RegionMessage, a.messageParts)
	}
	if len(final) > 0 {
		push("user", final, frame)
	}
	out.messages = msgs
	out.marks.last = out.total
	out.addTokens(regionOverhead, a.model.ReplyPriming)
	out.context = l.knowledge
	out.prefix = l.stablePrefix(a.tools.prefixID(), stable)
}

// check holds the request to the Messages API's rules (https://platform.claude.com/docs/en/api/messages,
// "messages"; the quoted texts are the API's answers to a request that breaks them):
//
//   - "messages: at least one message is required": the system prompt is not one (ErrNoMessages);
//   - the roles are user and assistant, the first the user's, and they alternate (the API would merge
//     consecutive turns of one role; Loom merges them itself);
//   - "all messages must have non-empty content", and "text content blocks must contain non-whitespace
//     text" (the system prompt's too);
//   - "final assistant content cannot end with trailing whitespace";
//   - each tool_use block is answered by a tool_result in the next message, whose tool_result blocks come
//     first ("tool_use ids were found without tool_result blocks immediately after"; the tool use guide,
//     https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use), and a tool_result
//     answers a tool_use of the message before it;
//   - a tool_use id matches ^[a-zA-Z0-9_-]+$ (see anthropicID), its input is a JSON object, and a tool's
//     name matches ^[a-zA-Z0-9_-]{1,128}$ (Loom holds tool names to the stricter loom.CheckToolName);
//   - an image block is the user's, with a base64 source (its media type and data) or a url source
//     (https://platform.claude.com/docs/en/build-with-claude/vision);
//   - at most four cache_control breakpoints in all (tools, system and messages), each on a block that
//     may carry one (not an empty text), of type "ephemeral", and no longer TTL after a shorter one
//     (https://platform.claude.com/docs/en/build-with-claude/prompt-caching; see placeBreakpoints).
//
// The rendering keeps each of them by construction; check proves it on every output.
func (anthropic) check(a *assembly, out *output) error {
	if out.system != "" && loom.IsBlank(out.system) {
		return fmt.Errorf("%w: anthropic: a system prompt of white space", ErrProviderRule)
	}
	if len(out.messages) == 0 {
		return fmt.Errorf("%w: anthropic: there is no message, context or history within the budget to send (the instructions are the system prompt, not a message)", ErrNoMessages)
	}
	for i, t := range a.req.Tools {
		if err := loom.CheckToolName(t.Function.Name); err != nil {
			return fmt.Errorf("%w: anthropic: tools[%d]: %w", ErrProviderRule, i, err)
		}
	}
	var asked, uses []string // the tool_use ids of the message before, and of this one
	for i := range out.messages {
		m := &out.messages[i]
		switch {
		case m.Role != "user" && m.Role != "assistant":
			return fmt.Errorf("%w: anthropic: messages[%d] has the role %q", ErrProviderRule, i, m.Role)
		case i == 0 && m.Role != "user":
			return fmt.Errorf("%w: an Anthropic conversation starts with the user, and this one starts with the %s", ErrNoUserTurn, m.Role)
		case i > 0 && out.messages[i-1].Role == m.Role:
			return fmt.Errorf("%w: anthropic: messages[%d] and [%d] are both the %s's", ErrProviderRule, i-1, i, m.Role)
		case len(m.Blocks) == 0:
			return fmt.Errorf("%w: anthropic: messages[%d] has no content", ErrProviderRule, i)
		}
		uses = uses[:0]
		results := true // the tool_result blocks come first
		for j := range m.Blocks {
			b := &m.Blocks[j]
			switch b.Type {
			case "text":
				if loom.IsBlank(b.Text) {
					return fmt.Errorf("%w: anthropic: messages[%d].content[%d] is a text block of white space", ErrProviderRule, i, j)
				}
				results = false
			case "image":
				if m.Role != "user" || (b.Source.Type != "base64" || b.Source.Data == "" || b.Source.MediaType == "") && (b.Source.Type != "url" || b.Source.URL == "") {
					return fmt.Errorf("%w: anthropic: messages[%d].content[%d] is not an image block the API takes", ErrProviderRule, i, j)
				}
				results = false
			case "tool_use":
				if m.Role != "assistant" || b.ID == "" || anthropicID(b.ID) != b.ID || loom.CheckToolName(b.Name) != nil || !jsonObject(b.Input) {
					return fmt.Errorf("%w: anthropic: messages[%d].content[%d] is not a tool_use the API takes (id %q, name %q)", ErrProviderRule, i, j, b.ID, b.Name)
				}
				uses = append(uses, b.ID)
			case "tool_result":
				k := slices.Index(asked, b.ToolUseID)
				if m.Role != "user" || !results || k < 0 {
					return fmt.Errorf("%w: anthropic: messages[%d].content[%d] is a tool_result for %q, which does not answer the message before it first",
						ErrProviderRule, i, j, b.ToolUseID)
				}
				if b.Content != "" && loom.IsBlank(b.Content) {
					return fmt.Errorf("%w: anthropic: messages[%d].content[%d] is a tool_result of white space", ErrProviderRule, i, j)
				}
				asked = slices.Delete(asked, k, k+1)
			default:
				return fmt.Errorf("%w: anthropic: messages[%d].content[%d] has the type %q", ErrProviderRule, i, j, b.Type)
			}
		}
		if len(asked) > 0 {
			return fmt.Errorf("%w: anthropic: tool_use %q of messages[%d] has no tool_result right after it", ErrProviderRule, asked[0], i-1)
		}
		asked, uses = uses, asked
	}
	if len(asked) > 0 {
		return fmt.Errorf("%w: anthropic: tool_use %q of the final message has no tool_result after it", ErrProviderRule, asked[0])
	}
	if err := checkBreakpoints(out); err != nil {
		return err
	}
	if m := &out.messages[len(out.messages)-1]; m.Role == "assistant" {
		if r, _ := utf8.DecodeLastRuneInString(m.Blocks[len(m.Blocks)-1].Text); loom.IsSpace(r) {
			return fmt.Errorf("%w: anthropic: the final assistant content ends with white space", ErrProviderRule)
		}
	}
	return nil
}

// jsonObject reports whether b, valid JSON, is an object.
func jsonObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
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

// checkBreakpoints holds out's cache breakpoints to the Messages API's rules (see anthropic.check).
func checkBreakpoints(out *output) error {
	n, shortest := 0, false // shortest: a breakpoint of the default TTL came before
	// see counts a breakpoint; where names it, for an error only.
	see := func(where func() string, c CacheControl) error {
		n++
		switch {
		case n > MaxCacheBreakpoints:
			return fmt.Errorf("%w: anthropic: more than %d cache breakpoints (%s)", ErrProviderRule, MaxCacheBreakpoints, where())
		case c.Type != "ephemeral" || (c.TTL != "" && c.TTL != CacheTTL5m && c.TTL != CacheTTL1h):
			return fmt.Errorf("%w: anthropic: %s has a cache_control the API does not take", ErrProviderRule, where())
		case c.TTL == CacheTTL1h && shortest:
			return fmt.Errorf("%w: anthropic: %s has a 1h cache_control after a shorter one", ErrProviderRule, where())
		}
		shortest = shortest || c.TTL != CacheTTL1h
		return nil
	}
	for i, t := range out.tools {
		if !bytes.Contains(t, []byte(`"cache_control":`)) { // most tools: none (a text's quotes are escaped)
			continue
		}
		// A tool object that ends with a cache_control member holds it at its top level: the member's
		// value is followed by the object's closing brace, the last byte (the tools are valid JSON). So
		// the breakpoints Loom writes are known without decoding the tool; any other is decoded.
		var known bool
		for _, c := range [...]CacheControl{{Type: "ephemeral"}, {Type: "ephemeral", TTL: CacheTTL1h}} {
			if bytes.HasSuffix(t, cacheControlMember(c)) {
				if err := see(func() string { return "tools[" + strconv.Itoa(i) + "]" }, c); err != nil {
					return err
				}
				known = true
				break
			}
		}
		if known {
			continue
		}
		var tool struct {
			CacheControl *CacheControl `json:"cache_control"`
		}
		if err := json.Unmarshal(t, &tool); err != nil {
			return fmt.Errorf("%w: anthropic: tools[%d]: %w", ErrProviderRule, i, err)
		}
		if tool.CacheControl != nil {
			if err := see(func() string { return "tools[" + strconv.Itoa(i) + "]" }, *tool.CacheControl); err != nil {
				return err
			}
		}
	}
	for i := range out.systemBlocks {
		b := &out.systemBlocks[i]
		if b.Type != "text" || b.CacheControl != (CacheControl{}) && !cacheable(b) {
			return fmt.Errorf("%w: anthropic: system[%d] is not a text block the API takes", ErrProviderRule, i)
		}
		if b.CacheControl != (CacheControl{}) {
			if err := see(func() string { return "system[" + strconv.Itoa(i) + "]" }, b.CacheControl); err != nil {
				return err
			}
		}
	}
	for i := range out.messages {
		for j := range out.messages[i].Blocks {
			b := &out.messages[i].Blocks[j]
			if b.CacheControl == (CacheControl{}) {
				continue
			}
			where := func() string { return fmt.Sprintf("messages[%d].content[%d]", i, j) }
			if !cacheable(b) {
				return fmt.Errorf("%w: anthropic: %s may not carry a cache_control", ErrProviderRule, where())
			}
			if err := see(where, b.CacheControl); err != nil {
				return err
			}
		}
	}
	return nil
}
