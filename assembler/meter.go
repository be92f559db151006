package assembler

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/context-loom/loom/tokenizer"
)

// meter counts texts for one assembly. Where the counter can vouch that counts add up across a join
// (tokenizer.Encoding.SplitsAt), the count of joined parts is the sum of the parts' counts, so a part is
// counted once however many times the plan is re-rendered.
type meter struct {
	counter tokenizer.Counter
	split   interface{ SplitsAt(text string, p int) bool }
	counted int            // texts counted, for tests
	short   map[string]int // counts of short texts that recur (roles, markers, wrappers)
}

func newMeter(c tokenizer.Counter) *meter {
	m := &meter{counter: c, short: map[string]int{}}
	m.split, _ = c.(interface{ SplitsAt(string, int) bool })
	return m
}

func (m *meter) count(s string) int {
	if s == "" {
		return 0
	}
	m.counted++
	return m.counter.Count(s)
}

// shortText is the length up to which a text is remembered by its content: wrappers, roles, markers.
const shortText = 128

// countShort counts a text that recurs, once per assembly (wrappers, roles, markers, and joins whose counts
// do not add up, which every rendering of a plan meets again).
func (m *meter) countShort(s string) int {
	if n, ok := m.short[s]; ok {
		return n
	}
	n := m.count(s)
	m.short[s] = n
	return n
}

// part is a piece of a message's content and its count (-1: not counted yet).
type part struct {
	text   string
	tokens int
}

func newPart(text string) part { return part{text: text, tokens: -1} }

// join returns the exact count of the parts concatenated, counting a part only if its count is unknown
// (and remembering it in the part), and neighbours together only where their counts may not add up.
func (m *meter) join(parts []part) int {
	total := 0
	run := -1 // index of the first part of the run being merged, or -1
	var merged strings.Builder
	prev := -1 // index of the last non-empty part
	flush := func() {
		if run < 0 {
			return
		}
		if merged.Len() == 0 { // a single part
			switch {
			case parts[run].tokens >= 0:
			case len(parts[run].text) <= shortText:
				parts[run].tokens = m.countShort(parts[run].text)
			default:
				parts[run].tokens = m.count(parts[run].text)
			}
			total += parts[run].tokens
		} else {
			total += m.countShort(merged.String()) // remembered: a plan is rendered more than once
			merged.Reset()
		}
		run = -1
	}
	for i := range parts {
		if parts[i].text == "" {
			continue
		}
		if prev >= 0 && (m.split == nil || !m.adds(parts[prev].text, parts[i].text)) {
			if merged.Len() == 0 {
				merged.WriteString(parts[run].text)
			}
			merged.WriteString(parts[i].text)
		} else {
			flush()
			run = i
		}
		prev = i
	}
	flush()
	return total
}

// adds reports whether the counts of a and b add up to the count of a+b. Only the characters around the
// join matter: a's last bytes, and b's leading whitespace and the character after it. A b of only
// whitespace is never vouched for (the run could go on into what follows it).
func (m *meter) adds(a, b string) bool {
	lead := len(b) - len(strings.TrimLeftFunc(b, unicode.IsSpace))
	if lead == len(b) {
		return false
	}
	b = b[:min(len(b), lead+utf8.UTFMax)]
	tail := a
	if len(tail) > 8 {
		tail = a[len(a)-8:]
		for len(tail) > 0 && tail[0]&0xC0 == 0x80 { // start on a character
			tail = tail[1:]
		}
		if tail == "" {
			return false
		}
	}
	var sb strings.Builder
	sb.Grow(len(tail) + len(b))
	sb.WriteString(tail)
	sb.WriteString(b)
	return m.split.SplitsAt(sb.String(), len(tail))
}
