package assembler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/context-loom/loom/tokenizer"
)

// anthropic is the Messages API format (see Anthropic).
type anthropic struct{ markup }

func (anthropic) Name() string { return FormatAnthropic }

func (anthropic) prepare(a *assembly) error { return a.prepareMarkup() }

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

func (anthropic) render(a *assembly, out *output) {
	stable, l := a.markupLayout()
	tools := a.tools.rendered("anthropic")
	out.tools = tools.raw
	if a.tools != nil { // their JSON and, by a JSON rule, its overhead (Claude's: Anthropic's system prompt for tools): an estimate
		n := a.toolTokens("anthropic", tools.text).n
		if rule := a.model.Tools; !rule.Namespace {
			n += rule.DefinitionOverhead(len(stable) > 0)
		}
		out.addTokens(RegionTools, n)
		out.estimate(RegionTools)
	}
	if len(stable) > 0 {
		out.system = tokenizer.JoinText(stable)
		out.addTokens(l.stableRegion(), a.model.TokensPerMessage) // the system prompt has no role
		out.add(l.stableText(stable))
	}
	var msgs []ChatMessage
	// push adds blocks of a role; a message it opens is framed for region.
	push := func(role string, blocks []Block, region Region) {
		if n := len(msgs); n > 0 && msgs[n-1].Role == role { // Anthropic alternates roles: merge
			msgs[n-1].Blocks = append(msgs[n-1].Blocks, blocks...)
			return
		}
		msgs = append(msgs, ChatMessage{Role: role, Blocks: blocks})
		out.frame(region, role)
	}
	for gi := range l.history {
		g := &l.history[gi]
		contents := a.groupContents(g)
		for i, msg := range a.msgs(g) {
			switch msg.Role {
			case "assistant":
				var blocks []Block
				if msg.Content != "" {
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
				out.addPart(RegionHistory, contents[i])
				push("user", []Block{{Type: "tool_result", ToolUseID: id, Content: msg.Content}}, RegionHistory)
			default: // user, and system messages of the history (Anthropic has only the top-level system)
				out.addPart(RegionHistory, contents[i])
				push("user", []Block{{Type: "text", Text: msg.Content}}, RegionHistory)
			}
		}
	}
	// The context and the message, in a user message of their own, or the history's last one. A message
	// the context opens is framed for no region.
	var last []Block
	frame := RegionMessage
	if len(l.ctx) > 0 {
		last = append(last, Block{Type: "text", Text: l.ctxText})
		out.add(l.contextText())
		frame = regionOverhead
	}
	if a.message != "" {
		last = append(last, Block{Type: "text", Text: a.message})
		out.addText(RegionMessage, a.message)
	}
	if len(last) > 0 {
		push("user", last, frame)
	}
	if msgs == nil { // the Messages API requires the array, even empty
		msgs = []ChatMessage{}
	}
	out.messages = msgs
	if len(msgs) > 0 && msgs[0].Role != "user" { // cannot happen: kept history starts with the user (see run)
		out.err = fmt.Errorf("%w: an Anthropic conversation starts with the user, and this one starts with the %s", ErrNoUserTurn, msgs[0].Role)
	}
	out.addTokens(regionOverhead, a.model.ReplyPriming)
	out.context = l.knowledge
	out.prefix = stablePrefix(a.tools.prefixID(), stable)
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
