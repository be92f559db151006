package assembler

import (
	"context"
	"regexp"
	"strconv"
)

// Builder collects regions in the shape of seed 001's assembler and builds them into a system prompt and
// messages. It is a front for [AssembleRequest]: its knowledge is always included in full (the caller has
// screened it) and the conversation is trimmed oldest first, by whole turns, to the budget. Unlike the seed,
// it counts exactly, per-message overhead included, and never splits a tool call from its result.
//
//	b := assembler.NewBuilder(4096)
//	b.AddInstruction("You are a helpful assistant.")
//	b.AddKnowledge("The user lives in Tokyo.", "entity", false, "")
//	b.AddMessages(history)
//	built, err := b.Build(ctx)
type Builder struct {
	budget    int
	model     string
	req       Request
	knowledge []Knowledge
}

// NewBuilder returns a builder for a budget of tokens (0: no budget, everything passes) counted as model
// gpt-4o does; see [Builder.WithModel].
func NewBuilder(budget int) *Builder { return &Builder{budget: budget, model: DefaultModel} }

// WithModel sets the model whose tokenizer and chat format count the budget.
func (b *Builder) WithModel(model string) *Builder {
	b.model = model
	return b
}

// AddInstruction sets the system instruction (region 1), replacing any before it.
func (b *Builder) AddInstruction(text string) *Builder {
	b.req.Instructions = text
	return b
}

// AddKnowledge appends a knowledge chunk (region 3), wrapped in a context tag of type typ; trusted false
// (what the seed defaults to) marks externally sourced data. source, when not empty, goes in the tag so
// the model can cite it.
func (b *Builder) AddKnowledge(text, typ string, trusted bool, source string) *Builder {
	b.knowledge = append(b.knowledge, Knowledge{Content: text, Type: typ, Trusted: trusted, Source: source})
	return b
}

// AddMessages sets the conversation (region 4), replacing any before it.
func (b *Builder) AddMessages(messages []Message) *Builder {
	b.req.History = append([]Message(nil), messages...)
	return b
}

// Built is what [Builder.Build] returns: the combined system prompt (instruction and knowledge tags) and
// the conversation, trimmed to the budget.
type Built struct {
	System      string
	Messages    []Message
	TotalTokens int
	Report      Report
}

// Build assembles the regions. With a budget, the instruction and knowledge must fit (else a
// *[BudgetError]) and the conversation is trimmed oldest first.
func (b *Builder) Build(ctx context.Context) (*Built, error) {
	system := b.req.Instructions
	for _, k := range b.knowledge {
		tag := XMLTag(k.Content, k.Type, k.Trusted)
		if k.Source != "" {
			tag = xmlTagWithSource(k.Content, k.Type, k.Trusted, k.Source)
		}
		if system != "" {
			system += "\n\n"
		}
		system += tag
	}
	req := b.req
	req.Model = b.model
	req.Instructions = system
	req.MaxTokens = b.budget
	req.Policy = &Policy{Regions: []RegionPolicy{{Name: RegionHistory, Priority: 1, MaxShare: 1}}}
	if b.budget == 0 {
		req.MaxTokens = 1 << 30
	}
	res, err := AssembleRequest(ctx, &req)
	if err != nil {
		return nil, err
	}
	built := &Built{System: system, TotalTokens: res.TotalTokens, Report: res.Report}
	for _, m := range res.Messages {
		if m.Role == "system" && m.Content == system {
			continue
		}
		built.Messages = append(built.Messages, Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	return built, nil
}

// xmlTagWithSource is XMLTag with a source attribute.
func xmlTagWithSource(text, typ string, trusted bool, source string) string {
	return "<context type=\"" + escapeAttr(typ) + "\" source=\"" + escapeAttr(source) + "\" trusted=\"" +
		strconv.FormatBool(trusted) + "\">\n" + escapeText(text) + "\n</context>"
}

var (
	markerPattern = regexp.MustCompile(`\[(\d+(?:\s*,\s*\d+)*)\]`)
	numberPattern = regexp.MustCompile(`\d+`)
)

// ResolveMarkers returns the citations whose markers ([1], [2, 3], [1][4]) appear in a model's answer, in
// the order they first appear, each once. Markers that match no citation are ignored.
func ResolveMarkers(answer string, citations []Reference) []Reference {
	byMarker := map[int]Reference{}
	for _, c := range citations {
		byMarker[c.Marker] = c
	}
	var out []Reference
	seen := map[int]bool{}
	for _, m := range markerPattern.FindAllStringSubmatch(answer, -1) {
		for _, field := range numberPattern.FindAllString(m[1], -1) {
			n, err := strconv.Atoi(field)
			if err != nil || seen[n] {
				continue
			}
			if c, ok := byMarker[n]; ok {
				seen[n] = true
				out = append(out, c)
			}
		}
	}
	return out
}
