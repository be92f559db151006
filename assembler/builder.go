package assembler

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/context-loom/loom/tokenizer"
)

// Builder collects regions in the shape of Phronomy's Context::Assembler and builds them into a system prompt and
// messages. With a budget it is a front for [AssembleRequest]: its knowledge is always included in full
// (the caller has screened it) and the conversation is trimmed oldest first, by whole turns, to the budget.
// Unlike Phronomy's, it counts exactly, per-message overhead included, and never splits a tool call from its
// result. Without a budget (NewBuilder(0)) it does what Phronomy's does: every message passes through
// unchanged.
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

// NewBuilder returns a builder for a budget of tokens counted as model gpt-4o does (see
// [Builder.WithModel]). The budget is the prompt's, as a request's max_tokens is: it must not be negative
// nor more than the model's window leaves after its reserved output.
//
// A budget of 0 means no budget, as in Phronomy's builder: [Builder.Build] returns every message as it was given,
// in its order, with nothing dropped, trimmed or checked (a leading assistant message, tool results
// without their call, calls without results and blank messages included), and counts them.
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

// AddKnowledge appends a knowledge chunk (region 3), wrapped in a context tag of type typ ("rag" when it
// is empty, as every knowledge tag of Loom's) and escaped as [Tag] escapes; trusted false (what Phronomy's
// builder defaults to) marks externally sourced data. source, when not empty, goes in the tag so the model
// can cite it.
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
// *[BudgetError]) and the conversation is trimmed oldest first, as [AssembleRequest] trims history. With
// none, the messages pass through unchanged (see [NewBuilder]).
//
// TotalTokens is the exact count of the result as OpenAI chat messages: the system prompt as a system
// message, then the messages, with the format's per-message overhead and reply priming.
func (b *Builder) Build(ctx context.Context) (*Built, error) {
	system := b.req.Instructions
	for _, k := range b.knowledge {
		tag := knowledgeElement(k.Type, k.Source, k.Trusted).wrap(k.Content)
		if system != "" {
			system += "\n\n"
		}
		system += tag
	}
	if b.budget == 0 {
		return b.passThrough(ctx, system)
	}
	req := b.req
	req.Model = b.model
	req.Instructions = system
	req.MaxTokens = b.budget
	req.Policy = builderPolicy()
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

// builderPolicy gives the builder's conversation all that the instruction and knowledge leave.
func builderPolicy() *Policy {
	return &Policy{Regions: []RegionPolicy{{Name: RegionHistory, Priority: 1, MaxShare: 1}}, HistoryTrim: HistoryTrimTurns}
}

// passThrough is Build without a budget: Phronomy's build, which passes the messages through unchanged,
// counted exactly.
func (b *Builder) passThrough(ctx context.Context, system string) (*Built, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	model, err := tokenizer.ForModel(b.model)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	policy, err := resolvePolicy(builderPolicy())
	if err != nil {
		return nil, err
	}
	// An assembly of its own, for its counting: OpenAI's chat format, each text counted once.
	a := &assembly{f: OpenAI, model: model, m: tokenizer.NewMeter(model.Counter())}
	built := &Built{System: system, TotalTokens: model.ReplyPriming}
	if len(b.req.History) > 0 {
		built.Messages = slices.Clone(b.req.History)
	}
	instructions := 0
	if system != "" {
		instructions = a.chatCost("system", []tokenizer.Part{tokenizer.NewPart(system)}, "", nil, "")
	}
	history, calls := 0, false
	ids, tokens := make([]string, len(built.Messages)), make([]int, len(built.Messages))
	for _, m := range built.Messages {
		for _, call := range m.ToolCalls {
			if a.callNames == nil {
				a.callNames = map[string]string{}
			}
			a.callNames[call.ID] = call.Function.Name
		}
	}
	for i := range built.Messages {
		m := &built.Messages[i]
		tokens[i] = a.f.turnCost(a, m, []tokenizer.Part{a.cachedPart(m.Content, m.TokenCounts)})
		history += tokens[i]
		calls = calls || len(m.ToolCalls) > 0 || m.Role == "tool"
		ids[i] = historyID(i)
	}
	built.TotalTokens += instructions + history
	region := func(name Region, used int, included []string, tokens []int) RegionReport {
		exact := model.Exact() && (name != RegionHistory || !calls || model.Tools.CallsExact)
		return RegionReport{Name: name, Budget: used, Used: used, Exact: exact, Included: nonNil(included), IncludedTokens: nonNilInts(tokens), Dropped: []Dropped{}}
	}
	var instructionTokens []int
	if system != "" {
		instructionTokens = []int{instructions}
	}
	built.Report.Regions = []RegionReport{
		region(RegionInstructions, instructions, idsIf(system != "", "instructions"), instructionTokens),
		region(RegionTools, 0, nil, nil),
		region(RegionMessage, 0, nil, nil),
	}
	for _, r := range policy.Regions {
		if r.Name == RegionHistory {
			built.Report.Regions = append(built.Report.Regions, region(r.Name, history, ids, tokens))
		} else {
			built.Report.Regions = append(built.Report.Regions, region(r.Name, 0, nil, nil))
		}
	}
	return built, nil
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
