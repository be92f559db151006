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

// countShortBytes is countShort of string(b), without making the string when it is remembered.
func (m *meter) countShortBytes(b []byte) int {
	if n, ok := m.short[string(b)]; ok {
		return n
	}
	return m.countShort(string(b))
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
	if len(parts) == 1 && parts[0].tokens >= 0 && parts[0].text != "" { // a message's content, counted before
		return parts[0].tokens
	}
	n, _ := m.joinUpTo(parts, -1, nil)
	return n
}

// joinUpTo is join that stops counting once the count exceeds limit (a negative limit means none): within
// reports whether the parts have at most limit tokens, and n is then their exact count; otherwise n is a
// count greater than limit (not the total), and nothing counted past limit is remembered. A run of parts
// whose counts do not add up is counted from its parts' counts and the texts around its joins (see
// cutCount) where it can be, unless cuts (nil: always) says no; else the run is counted whole.
func (m *meter) joinUpTo(parts []part, limit int, cuts func() bool) (n int, within bool) {
	total := 0
	run, last := -1, -1 // the first and the last part of the run being merged, or -1
	// flush adds the run's count to total, and reports whether total is still within limit.
	flush := func() bool {
		if run < 0 {
			return true
		}
		left := -1 // what the run may count, at most
		if limit >= 0 {
			left = max(limit-total, 0)
		}
		if run == last { // a single part
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
			return limit < 0 || total <= limit
		}
		merged := parts[run : last+1]
		run = -1
		if cuts == nil || cuts() {
			if n, ok := m.cutCount(merged); ok {
				total += n
				return limit < 0 || total <= limit
			}
		}
		s := joinText(merged)
		n, ok := m.short[s] // remembered: a plan is rendered more than once
		if !ok {
			if n, ok = m.countUpTo(s, left); !ok {
				total += n
				return false
			}
			m.short[s] = n
		}
		total += n
		return limit < 0 || total <= limit
	}
	for i := range parts {
		if parts[i].text == "" {
			continue
		}
		if last >= 0 && (m.split == nil || !m.adds(parts[last].text, parts[i].text)) {
			last = i // the run goes on
			continue
		}
		if !flush() {
			return total, false
		}
		run, last = i, i
	}
	if !flush() {
		return total, false
	}
	return total, true
}

// cutWindow is how far from a join cutCount looks for a cut.
const cutWindow = 64

// cutCount counts a run of parts whose counts do not add up at their joins, without counting the run
// whole: around each join it finds a cut in each side where the pre-tokenizer splits whatever surrounds
// the side (a space or tab after a character other than whitespace, which SplitsAt vouches for from those
// two characters alone), so that
//
//	count(a+b) = count(a) + count(b) - count(a[s:]) - count(b[:q]) + count(a[s:]+b[:q])
//
// with only short texts counted. It needs every part's count known or the part short, and reports
// false when it cannot find the cuts.
func (m *meter) cutCount(run []part) (int, bool) {
	if m.split == nil {
		return 0, false
	}
	for _, p := range run {
		if p.tokens < 0 && len(p.text) > shortText {
			return 0, false
		}
	}
	n := 0
	prev := -1 // the previous non-empty part
	from := 0  // where the previous part's cut at its left join is
	for i := range run {
		p := &run[i]
		if p.text == "" {
			continue
		}
		if p.tokens < 0 {
			p.tokens = m.countShort(p.text)
		}
		n += p.tokens
		if prev >= 0 {
			a, b := run[prev].text, p.text
			s, q := m.lastCut(a, max(from, len(a)-cutWindow)), m.firstCut(b, min(len(b), cutWindow))
			if s < 0 || q < 0 {
				return 0, false
			}
			var buf [2 * cutWindow]byte
			both := append(append(buf[:0], a[s:]...), b[:q]...)
			n += m.countShortBytes(both) - m.countShort(a[s:]) - m.countShort(b[:q])
			from = q
		}
		prev = i
	}
	return n, true
}

// isCut reports whether the pre-tokenizer splits any text that holds s at i the way it splits s there.
func (m *meter) isCut(s string, i int) bool {
	if i <= 0 || i >= len(s) || s[i] != ' ' && s[i] != '\t' {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return r != utf8.RuneError && !unicode.Is(unicode.White_Space, r) && m.split.SplitsAt(s, i)
}

// lastCut returns the last cut in s at or after from, or -1.
func (m *meter) lastCut(s string, from int) int {
	for i := len(s) - 1; i >= max(from, 1); i-- {
		if m.isCut(s, i) {
			return i
		}
	}
	return -1
}

// firstCut returns the first cut in s before to, or -1.
func (m *meter) firstCut(s string, to int) int {
	for i := 1; i < to; i++ {
		if m.isCut(s, i) {
			return i
		}
	}
	return -1
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
	if e, ok := m.split.(*tokenizer.Encoding); ok && len(tail)+len(b) <= 32 {
		// Joined on the stack: the encoding does not keep the text.
		var buf [32]byte
		n := copy(buf[:], tail)
		n += copy(buf[n:], b)
		return e.SplitsAt(string(buf[:n]), len(tail))
	}
	return m.split.SplitsAt(tail+b, len(tail))
}
