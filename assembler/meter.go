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

// countUpTo counts s, but stops once the count exceeds limit (a negative limit means none) where the
// counter can (tokenizer.Encoding.CountUpTo): within reports whether s has at most limit tokens, and n is
// then its exact count; otherwise n is a count greater than limit.
func (m *meter) countUpTo(s string, limit int) (n int, within bool) {
	if s == "" {
		return 0, true
	}
	m.counted++
	if c, ok := m.counter.(interface {
		CountUpTo(text string, limit int) (int, bool)
	}); ok && limit >= 0 {
		return c.CountUpTo(s, limit)
	}
	n = m.counter.Count(s)
	return n, limit < 0 || n <= limit
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
	n, _ := m.joinUpTo(parts, -1)
	return n
}

// joinUpTo is join that stops counting once the count exceeds limit (a negative limit means none): within
// reports whether the parts have at most limit tokens, and n is then their exact count; otherwise n is a
// count greater than limit (not the total), and nothing counted past limit is remembered.
func (m *meter) joinUpTo(parts []part, limit int) (n int, within bool) {
	total := 0
	run := -1 // index of the first part of the run being merged, or -1
	var merged strings.Builder
	prev := -1 // index of the last non-empty part
	// flush adds the run's count to total, and reports whether total is still within limit.
	flush := func() bool {
		if run < 0 {
			return true
		}
		left := -1 // what the run may count, at most
		if limit >= 0 {
			left = max(limit-total, 0)
		}
		if merged.Len() == 0 { // a single part
			p := &parts[run]
			run = -1
			switch {
			case p.tokens >= 0:
			case len(p.text) <= shortText:
				p.tokens = m.countShort(p.text)
			default:
				n, ok := m.countUpTo(p.text, left)
				if !ok {
					total += n
					return false
				}
				p.tokens = n
			}
			total += p.tokens
		} else {
			run = -1
			s := merged.String()
			merged.Reset()
			n, ok := m.short[s] // remembered: a plan is rendered more than once
			if !ok {
				if n, ok = m.countUpTo(s, left); !ok {
					total += n
					return false
				}
				m.short[s] = n
			}
			total += n
		}
		return limit < 0 || total <= limit
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
			if !flush() {
				return total, false
			}
			run = i
		}
		prev = i
	}
	if !flush() {
		return total, false
	}
	return total, true
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
