package assembler

import (
	"strings"

	"github.com/context-loom/loom/tokenizer"
)

// textFormat is the transcript format (see Text).
type textFormat struct{ markup }

func (textFormat) Name() string { return FormatText }

func (textFormat) prepare(a *assembly) error { return a.prepareMarkup() }

// body indents every line of text after its first (see textIndent).
func (textFormat) body(text string) string { return indentLines(text) }

var _ bodyCounter = textFormat{}

// rewrites reports whether body changes text: whether it has a line break.
func (textFormat) rewrites(text string) bool { return nextLineEnd(text, 0) >= 0 }

// bodyPart is p.Text[:end] indented as body indents it, then p.Text[end:] as it is. Its count, when p's
// is known, is p's with the indentation's counted from the few bytes around each line break (see
// tokenizer.Meter.CountInserted), exactly, so that the count a store cached of a text as given serves the
// text as the transcript writes it; or the count kept of the same rendering in the request's cache scope
// (see renderedCounts). Else it is not known.
func (textFormat) bodyPart(a *assembly, p tokenizer.Part, end int) tokenizer.Part {
	at := lineEnds(p.Text[:end])
	if len(at) == 0 {
		return p
	}
	out := tokenizer.NewPart(insertAt(p.Text, at, textIndent))
	if p.Tokens < 0 {
		return out
	}
	h := renderedHash(a.countKey, p.Tokens, out.Text)
	if n, ok := cachedRenderedCount(a.req.CacheScope, h); ok {
		out.Tokens = n
		return out
	}
	if n, ok := a.m.CountInserted(p.Text, p.Tokens, at, textIndent); ok {
		out.Tokens = n
		keepRenderedCount(a.req.CacheScope, h, n)
	}
	return out
}

// turnCost is the planner's estimate of a turn: its body, its tool calls' names, ids and arguments, and
// 4 for its header and the blank line after; the transcript is counted whole once it is rendered.
func (textFormat) turnCost(a *assembly, msg *Message, content []tokenizer.Part) int {
	n := a.m.Join(content)
	for _, c := range msg.ToolCalls {
		n += a.m.Count(c.Function.Name + c.ID + c.Function.Arguments)
	}
	return n + 4
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

// textLabels are the headers of the text format's turns, by role.
var textLabels = map[string]string{"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool result"}

func (textFormat) render(a *assembly, out *output) {
	stable, l := a.markupLayout()
	tools := a.tools.rendered("openai") // in the text, not beside it
	s := segments{}
	if len(stable) > 0 {
		l.appendStable(&s, stable, tokenizer.NewPart("\n\n"))
	}
	if tools.text != "" {
		// The set's JSON, indented, counted once for all the assemblies that send the set (see toolTokens).
		body := indentLines(tools.text)
		s.add(RegionTools, tokenizer.NewPart("Tools:\n"+textIndent), tokenizer.Part{Text: body, Tokens: a.toolTokens(FormatText, body).n},
			tokenizer.NewPart("\n\n"))
	}
	for gi := range l.history {
		g := &l.history[gi]
		contents := a.groupContents(g) // indented (see groupCost)
		for i, msg := range a.msgs(g) {
			label := textLabels[msg.Role]
			if msg.Role == "tool" {
				label += " (" + indentLines(msg.ToolCallID) + ")"
			}
			s.parts = append(s.parts, tokenizer.NewPart(label+": "), contents[i], tokenizer.NewPart("\n\n"))
			for _, call := range msg.ToolCalls {
				s.parts = append(s.parts, tokenizer.NewPart("Assistant called "+call.Function.Name+" ("+indentLines(call.ID)+"): "+
					indentLines(call.Function.Arguments)+"\n\n"))
			}
		}
	}
	s.mark(RegionHistory)
	if len(l.ctx) > 0 {
		l.appendContext(&s, tokenizer.NewPart("\n\n"))
	}
	if a.message != "" {
		s.add(RegionMessage, tokenizer.NewPart("User: "), tokenizer.NewPart(indentLines(a.message)), tokenizer.NewPart("\n\n"))
	}
	s.add(regionOverhead, tokenizer.NewPart("Assistant:"))
	out.text = tokenizer.JoinText(s.parts)
	out.add(s)
	out.context = l.knowledge
	out.prefix = l.stablePrefix(a.tools.prefixID(), stable)
}

// check has no provider's rules to keep: the transcript is the caller's to send. Its own rules (every
// line of it a header, a line of Loom's, or indented; see textIndent) hold by construction, and the
// property and fuzz tests prove them.
func (textFormat) check(*assembly, *output) error { return nil }

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

// indentLines returns s with textIndent after each of its line breaks, so that no line of s but its first
// starts a line of the text format's transcript.
func indentLines(s string) string { return insertAt(s, lineEnds(s), textIndent) }

// lineEnds returns the offsets in s that end its line breaks (see lineBreak), nil if it has none.
func lineEnds(s string) []int {
	var at []int
	for i := nextLineEnd(s, 0); i >= 0; i = nextLineEnd(s, i) {
		at = append(at, i)
	}
	return at
}

// nextLineEnd returns the offset that ends the first line break of s at or after i, or -1 if there is none.
func nextLineEnd(s string, i int) int {
	for i = nextBreakStart(s, i); i < len(s); i = nextBreakStart(s, i+1) {
		if n := lineBreak(s[i:]); n > 0 {
			return i + n
		}
	}
	return -1
}

// breakStart holds the bytes that a line break may start with (see lineBreak).
var breakStart = [256]bool{'\r': true, '\n': true, '\v': true, '\f': true, 0xC2: true, 0xE2: true}

// nextBreakStart returns the first offset from i of a byte that a line break may start with, or len(s).
// Most texts have line feeds and no other such byte, or a few: it looks for each with IndexByte.
func nextBreakStart(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	if len(s)-i < 64 {
		for ; i < len(s) && !breakStart[s[i]]; i++ {
		}
		return i
	}
	next := len(s)
	for _, c := range [...]byte{'\n', '\r', 0xE2, 0xC2, '\v', '\f'} {
		if k := strings.IndexByte(s[i:min(next, len(s))], c); k >= 0 {
			next = i + k
		}
	}
	return next
}

// insertAt returns s with ins at each of the ascending offsets at; s itself if at is empty.
func insertAt(s string, at []int, ins string) string {
	if len(at) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(at)*len(ins))
	last := 0
	for _, p := range at {
		b.WriteString(s[last:p])
		b.WriteString(ins)
		last = p
	}
	b.WriteString(s[last:])
	return b.String()
}
