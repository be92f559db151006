package assembler

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/context-loom/loom/tokenizer"
)

// markup is the planning that the formats writing Loom's own layout share (openai, responses, anthropic,
// gemini, text): the
// policy's defaults, the history's turns, each item in its tag of Loom's context markup, a history that
// starts with the user, knowledge numbered by its markers. Each of them embeds it and adds its body rule,
// its turn cost and its rendering.
type markup struct{}

func (markup) policy(p *Policy) (Policy, error) { return resolvePolicy(p) }

func (markup) settle(a *assembly) {
	a.trimKeptStart()
	a.settleKnowledge()
}

// Wrappers of the memory blocks.
var (
	pinnedOpen  = memoryElement(true).open + "\n"
	memoryOpen  = memoryElement(false).open + "\n"
	memoryClose = memoryElement(false).close() + "\n\n"
)

// layout is where each region's parts are in a settled plan laid out in Loom's markup: the stable prefix
// (instructions, then pinned memory), the context (memory that is not pinned, tool outputs, knowledge)
// and the history's turns.
type layout struct {
	instructionParts int              // stable[:instructionParts] is the instructions'
	prefixParts      int              // stable[:prefixParts] is the stable prefix, the rest the summary's
	ctx              []tokenizer.Part // memory, tool outputs, knowledge
	ctxText          string
	memoryEnd        int     // ctx[:memoryEnd] is memory's
	toolsEnd         int     // ctx[memoryEnd:toolsEnd] is the tool outputs', the rest knowledge's
	knowledge        string  // the knowledge's text: Result.Context
	history          []group // the kept turns, from the first a provider accepts as a start, then the required exchange
}

// markupLayout lays the settled plan out. The stable prefix is returned apart from the rest of the layout,
// which escape analysis would let take it to the heap.
func (a *assembly) markupLayout() (stable []tokenizer.Part, l layout) {
	// The stable prefix: instructions, then pinned memory.
	if a.instructions != "" {
		stable = append(stable, tokenizer.NewPart(a.instructions))
	}
	l.instructionParts = len(stable)
	var pinned, recent []*ctxItem
	for _, it := range a.memory {
		if it.kept && it.pinned {
			pinned = append(pinned, it)
		} else if it.kept {
			recent = append(recent, it)
		}
	}
	if len(pinned) > 0 {
		if len(stable) > 0 {
			stable = append(stable, a.wrap(wrapBlank))
		}
		stable = append(stable, a.wrap(wrapPinnedOpen))
		for _, it := range pinned {
			stable = append(stable, it.parts...)
		}
		stable = append(stable, a.wrap(wrapPinnedClose))
	}
	// The summary goes after the stable prefix, in the same text: it changes only when the session is
	// compacted, so that what follows it stays cacheable between compactions.
	l.prefixParts = len(stable)
	if a.summary != nil {
		if len(stable) > 0 {
			stable = append(stable, a.wrap(wrapBlank))
		}
		stable = append(stable, a.summary...)
	}

	// The volatile context: other memory, tool outputs, knowledge.
	var ctxParts []tokenizer.Part
	if len(recent) > 0 {
		ctxParts = append(ctxParts, a.wrap(wrapMemoryOpen))
		for _, it := range recent {
			ctxParts = append(ctxParts, it.parts...)
		}
		ctxParts = append(ctxParts, a.wrap(wrapMemoryClose))
	}
	l.memoryEnd = len(ctxParts)
	for i := len(a.toolOuts) - 1; i >= 0; i-- { // chronological
		if it := a.toolOuts[i]; it.kept {
			ctxParts = append(ctxParts, it.parts...)
		}
	}
	l.toolsEnd = len(ctxParts)
	// The knowledge, the context's last parts, is also returned alone: the context text is joined once, and
	// the knowledge's is its end.
	knowledgeAt := 0 // where the knowledge starts in the context text
	for _, p := range ctxParts {
		knowledgeAt += len(p.Text)
	}
	ctxParts = slices.Grow(ctxParts, 4*len(a.cited))
	for _, it := range a.cited {
		ctxParts = append(ctxParts, it.parts...)
	}
	ctxText := tokenizer.JoinText(ctxParts)
	l.knowledge = strings.TrimSuffix(ctxText[knowledgeAt:], "\n\n")
	if n := len(ctxParts); n > 0 && strings.HasSuffix(ctxParts[n-1].Text, "\n\n") { // as trimTrailingBlank does
		ctxText = ctxText[:len(ctxText)-2]
	}
	trimTrailingBlank(ctxParts) // ctxParts holds copies of the items' parts
	l.ctx, l.ctxText = ctxParts, ctxText
	l.history = a.turns[a.keepFrom:] // the kept turns, then the required ones
	return stable, l
}

// stableRegion is the region of the stable prefix's first part, which a message of it is framed for.
func (l *layout) stableRegion() Region {
	switch {
	case l.instructionParts > 0:
		return RegionInstructions
	case l.prefixParts > 0:
		return RegionMemory
	}
	return RegionSummary
}

// stableText is the stable prefix as one text.
func (l *layout) stableText(stable []tokenizer.Part) segments {
	s := segments{parts: stable}
	s.markAt(l.instructionParts, RegionInstructions)
	s.markAt(l.prefixParts, RegionMemory)
	s.markAt(len(stable), RegionSummary)
	if s.n > 1 { // to be split: a copy, so that a prefix of instructions alone stays off the heap
		s.parts = slices.Clone(stable)
	}
	return s
}

// contextText is the context as one text.
func (l *layout) contextText() segments {
	s := segments{parts: l.ctx}
	s.markAt(l.memoryEnd, RegionMemory)
	s.markAt(l.toolsEnd, RegionToolOutputs)
	s.markAt(len(l.ctx), RegionKnowledge)
	return s
}

// appendStable appends the stable prefix to s, and then sep, marking its regions' bounds.
func (l *layout) appendStable(s *segments, stable []tokenizer.Part, sep ...tokenizer.Part) {
	bounds := [3]struct {
		end    int
		region Region
	}{{l.instructionParts, RegionInstructions}, {l.prefixParts, RegionMemory}, {len(stable), RegionSummary}}
	from := 0
	for i, b := range bounds {
		if b.end == from && (i > 0 || b.end < len(stable)) {
			continue // no parts (the instructions' mark of none is kept, as before, when nothing follows)
		}
		s.parts = append(s.parts, stable[from:b.end]...)
		if b.end == len(stable) {
			s.parts = append(s.parts, sep...)
		}
		s.mark(b.region)
		from = b.end
	}
}

// appendContext appends the context to s, and then sep, marking its regions' bounds.
func (l *layout) appendContext(s *segments, sep ...tokenizer.Part) {
	regions := [3]struct {
		from, to int
		region   Region
	}{
		{0, l.memoryEnd, RegionMemory}, {l.memoryEnd, l.toolsEnd, RegionToolOutputs}, {l.toolsEnd, len(l.ctx), RegionKnowledge},
	}
	last := 2 // the last region with parts, which sep goes with
	for last > 0 && regions[last].from == regions[last].to {
		last--
	}
	for i, r := range regions {
		s.parts = append(s.parts, l.ctx[r.from:r.to]...)
		if i == last {
			s.parts = append(s.parts, sep...)
		}
		s.mark(r.region)
	}
}

// stablePrefix is the text hashed into Result.PrefixHash: the tools' id (the SHA-256 of their canonical
// JSON, see toolSet) and the stable prefix, without the summary that follows it in l.
func (l *layout) stablePrefix(tools string, stable []tokenizer.Part) string {
	return tools + "\x00" + tokenizer.JoinText(stable[:l.prefixParts])
}

// trimKeptStart drops the kept history turns that would start the conversation with an assistant's
// message or a tool result, reporting them as orphans. System messages in the history may come before the
// user's first message, but they do not start the conversation: a system note followed by an assistant's
// message (whose user message was blank, or cut) goes with it, as the history is a contiguous suffix.
func (a *assembly) trimKeptStart() {
	for a.keepFrom < len(a.groups) {
		f := a.keepFrom // the first kept group that is no system message
		for f < len(a.groups) && a.msgs(&a.groups[f])[0].Role == "system" {
			f++
		}
		if f == len(a.groups) || a.msgs(&a.groups[f])[0].Role == "user" {
			return
		}
		for ; a.keepFrom <= f; a.keepFrom++ {
			g := &a.groups[a.keepFrom]
			if !g.orphaned {
				g.orphaned = true
				for k := g.first; k < g.first+g.n; k++ {
					a.dropMessage(int(k), ReasonOrphan, a.msgCost(g, int(k)))
				}
			}
		}
	}
}

// settleKnowledge orders the kept knowledge as it is rendered (a.cited), numbers the markers that precede
// the items, and escapes the text of those not escaped yet (a cached count spared it).
func (a *assembly) settleKnowledge() {
	kept := a.cited[:0]
	for _, it := range a.knowledge {
		if it.kept {
			if it.ref == nil { // made for the kept items only
				k := it.know
				it.ref = &Reference{
					ID: k.ID, DocumentID: k.DocumentID, Source: k.Source, Score: k.Score,
					StartOffset: k.StartOffset, EndOffset: k.EndOffset, Metadata: k.Metadata,
				}
			}
			if it.raw {
				a.writeKnowledge(it)
			}
			kept = append(kept, it)
		}
	}
	switch a.policy.KnowledgeOrder {
	case OrderDocument:
		slices.SortStableFunc(kept, func(x, y *ctxItem) int {
			if c := strings.Compare(x.ref.DocumentID, y.ref.DocumentID); c != 0 {
				return c
			}
			return x.ref.StartOffset - y.ref.StartOffset
		})
	case OrderLostInTheMiddle:
		// Best first and last, then inwards: ranks 1, 3, 5, ... from the front, 2, 4, ... from the back.
		out := make([]*ctxItem, len(kept))
		front, back := 0, len(kept)-1
		for i, it := range kept {
			if i%2 == 0 {
				out[front] = it
				front++
			} else {
				out[back] = it
				back--
			}
		}
		kept = out
	}
	for i, it := range kept {
		it.ref.Marker = i + 1
		it.parts[0] = tokenizer.Part{Text: marker(i + 1), Tokens: a.markerCost(i + 1)}
	}
	a.cited = kept
}

// chatCost is what an OpenAI-style chat message costs: the model's per-message overhead, its role, its
// content and name, tool calls and call id.
func (a *assembly) chatCost(role string, content []tokenizer.Part, name string, calls []ToolCall, callID string) int {
	n := a.model.TokensPerMessage + a.roleTokens(role) + a.m.Join(content)
	if name != "" {
		n += a.m.CountShort(name) + a.model.TokensPerName
	}
	if len(calls) > 0 {
		n += a.m.Count(toolCallsJSON(calls))
	}
	if callID != "" {
		n += a.m.CountShort(callID)
	}
	return n
}

// roleTokens is the count of a role, remembered without hashing it for the four roles.
func (a *assembly) roleTokens(role string) int {
	i := slices.Index([]string{"user", "assistant", "system", "tool"}, role)
	if i < 0 {
		return a.m.CountShort(role)
	}
	if a.roles[i] == 0 {
		a.roles[i] = a.m.CountShort(role) + 1 // 0: not counted yet
	}
	return a.roles[i] - 1
}

// renderedTools is the request's tool definitions in a format's shape: each one's JSON, and the array's.
type renderedTools struct {
	text string
	raw  []json.RawMessage
}

// renderTools renders the tool definitions, each by shape.
func renderTools(tools []Tool, shape func(Tool) []byte) renderedTools {
	if len(tools) == 0 {
		return renderedTools{}
	}
	var out renderedTools
	for _, t := range tools {
		out.raw = append(out.raw, shape(t))
	}
	all, _ := marshalRaw(out.raw)
	out.text = string(all)
	return out
}

// openAITool is a tool definition as Chat Completions takes it.
func openAITool(t Tool) []byte {
	if t.Type == "" {
		t.Type = "function"
	}
	b, _ := marshalRaw(t)
	return b
}

// trimTrailingBlank drops the blank line that ends the last part, if it is a wrapper's, in place: parts
// must be the caller's own.
func trimTrailingBlank(parts []tokenizer.Part) {
	if n := len(parts); n > 0 && strings.HasSuffix(parts[n-1].Text, "\n\n") {
		parts[n-1] = tokenizer.NewPart(strings.TrimSuffix(parts[n-1].Text, "\n\n"))
	}
}
