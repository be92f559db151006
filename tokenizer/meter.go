package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Part is a piece of a text and its count under a [Meter]'s counter: Tokens is -1 while it is not known
// (see [NewPart]). A part with a count is not counted again.
type Part struct {
	Text   string
	Tokens int
}

// NewPart returns a part of text whose count is not known yet.
func NewPart(text string) Part { return Part{Text: text, Tokens: -1} }

// JoinText returns the parts' texts concatenated; the text itself, without a copy, when only one part is
// not empty.
func JoinText(parts []Part) string {
	only := -1 // the one non-empty part, if there is only one
	for i, p := range parts {
		if p.Text != "" {
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
		return parts[only].Text
	}
	n := 0
	for _, p := range parts {
		n += len(p.Text)
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Meter counts texts made of parts for one task (an assembly, a context), exactly, and counts each part
// once: the count of joined parts is the sum of the parts' counts where the counter vouches that counts
// add up at their joins ([Splitter]), and elsewhere is corrected from the few bytes around the join. It
// remembers the counts of short texts that recur (roles, markers, wrappers), and takes the counter's
// other fast paths ([UpToCounter], [LowerBounder]) where it has them. The empty text counts 0.
//
// A Meter is not safe for concurrent use: make one per task with [NewMeter].
type Meter struct {
	counter Counter
	upTo    UpToCounter  // nil: Count, then compare
	split   Splitter     // nil: counts are never known to add up
	enc     *Encoding    // the counter, when it is one: its SplitsAt is asked about windows on the stack
	bound   LowerBounder // nil: no bound but 0
	est     bool         // the counter is the Estimator, whose SplitsAt is asked about the two texts unjoined
	short   map[string]int
	deltas  map[windowKey]int // see windowDelta
	buf     []byte            // CountInserted's windows with their inserts
	cutBuf  []byte            // cutsBoth's
}

// NewMeter returns a Meter that counts with c.
func NewMeter(c Counter) *Meter {
	m := &Meter{counter: c}
	m.upTo, _ = c.(UpToCounter)
	m.split, _ = c.(Splitter)
	m.enc, _ = c.(*Encoding)
	m.bound, _ = c.(LowerBounder)
	_, m.est = c.(Estimator)
	return m
}

// Counter returns the counter m counts with.
func (m *Meter) Counter() Counter { return m.counter }

// Count returns the count of s.
func (m *Meter) Count(s string) int {
	if s == "" {
		return 0
	}
	return m.counter.Count(s)
}

// CountUpTo counts s, but stops once the count exceeds limit (a negative limit means none) where the
// counter can (see [CountUpTo]): within reports whether s has at most limit tokens, and n is then its
// exact count; otherwise n is a count greater than limit.
func (m *Meter) CountUpTo(s string, limit int) (n int, within bool) {
	if s == "" {
		return 0, true
	}
	if limit < 0 {
		return m.counter.Count(s), true
	}
	if m.upTo != nil {
		return m.upTo.CountUpTo(s, limit)
	}
	n = m.counter.Count(s)
	return n, n <= limit
}

// shortText is the length up to which the meter remembers a text's count by the text.
const shortText = 128

// CountShort returns the count of a text that recurs, counting it once per Meter (wrappers, roles,
// markers, and the texts around joins whose counts do not add up, which every rendering of a plan meets
// again).
func (m *Meter) CountShort(s string) int {
	if n, ok := m.short[s]; ok {
		return n
	}
	n := m.Count(s)
	if m.short == nil {
		m.short = map[string]int{}
	}
	m.short[s] = n
	return n
}

// countShortBytes is CountShort of string(b), without making the string when it is remembered.
func (m *Meter) countShortBytes(b []byte) int {
	if n, ok := m.short[string(b)]; ok {
		return n
	}
	return m.CountShort(string(b))
}

// LowerBound returns a lower bound on the count of the parts joined, as the counter's LowerBound gives it
// (see [LowerBounder]), or 0 if it has none.
func (m *Meter) LowerBound(parts []Part, limit int) int {
	if m.bound == nil {
		return 0
	}
	return m.bound.LowerBound(parts, limit)
}

// Join returns the exact count of the parts joined, counting a part only if its count is unknown (and
// remembering it in the part), and neighbours together only where their counts may not add up.
func (m *Meter) Join(parts []Part) int {
	if len(parts) == 1 && parts[0].Tokens >= 0 && parts[0].Text != "" { // a text counted before
		return parts[0].Tokens
	}
	n, _ := m.JoinUpTo(parts, -1, nil)
	return n
}

// JoinUpTo is [Meter.Join] that stops counting once the count exceeds limit (a negative limit means none):
// within reports whether the parts have at most limit tokens, and n is then their exact count; otherwise n
// is a count greater than limit (not the total), and nothing counted past limit is remembered.
//
// A run of parts whose counts do not add up at their joins is counted from its parts' counts and the
// texts around its joins, reading no further than [CutWindow] bytes (and a character) from a join, where
// it can be; else the run is counted whole. cuts, if not nil, is asked first, and may change the parts'
// texts near their joins (to what they will be rendered as) before it returns; if it says false the run
// is counted whole.
func (m *Meter) JoinUpTo(parts []Part, limit int, cuts func() bool) (n int, within bool) {
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
			case p.Tokens >= 0:
			case len(p.Text) <= shortText:
				p.Tokens = m.CountShort(p.Text)
			default:
				n, ok := m.CountUpTo(p.Text, left)
				if !ok {
					total += n
					return false
				}
				p.Tokens = n
			}
			total += p.Tokens
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
		s := JoinText(merged)
		n, ok := m.short[s] // remembered: a plan is rendered more than once
		if !ok {
			if n, ok = m.CountUpTo(s, left); !ok {
				total += n
				return false
			}
			if m.short == nil {
				m.short = map[string]int{}
			}
			m.short[s] = n
		}
		total += n
		return limit < 0 || total <= limit
	}
	for i := range parts {
		if parts[i].Text == "" {
			continue
		}
		if last >= 0 && !m.Adds(parts[last].Text, parts[i].Text) {
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

// CutWindow is how far from a join, in bytes, [Meter.JoinUpTo] looks for the cuts it counts a join
// between.
const CutWindow = 64

// cutCount counts a run of parts whose counts do not add up at their joins, without counting the run
// whole: around each join it finds a cut in each side (see LastCut), so that
//
//	count(a+b) = count(a) + count(b) - count(a[s:]) - count(b[:q]) + count(a[s:]+b[:q])
//
// with only short texts counted. It needs every part's count known or the part short, and reports
// false when it cannot find the cuts.
func (m *Meter) cutCount(run []Part) (int, bool) {
	if m.split == nil {
		return 0, false
	}
	for _, p := range run {
		if p.Tokens < 0 && len(p.Text) > shortText {
			return 0, false
		}
	}
	first, last := -1, -1 // the run's first and last non-empty parts: the run starts and ends where counts add up
	for i := range run {
		if run[i].Text != "" {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	n := 0
	prev := -1 // the previous non-empty part
	from := 0  // where the previous part's cut at its left join is
	for i := range run {
		p := &run[i]
		if p.Text == "" {
			continue
		}
		if p.Tokens < 0 {
			p.Tokens = m.CountShort(p.Text)
		}
		n += p.Tokens
		if prev >= 0 {
			a, b := run[prev].Text, p.Text
			s, q := m.LastCut(a, max(from, len(a)-CutWindow)), m.firstCut(b, min(len(b), CutWindow))
			if s < 0 && prev == first && len(a) <= CutWindow {
				s = 0 // the run's start
			}
			if q < 0 && i == last && len(b) <= CutWindow {
				q = len(b) // the run's end
			}
			if s < 0 || q < 0 {
				return 0, false
			}
			var buf [2 * CutWindow]byte
			both := append(append(buf[:0], a[s:]...), b[:q]...)
			n += m.countShortBytes(both) - m.CountShort(a[s:]) - m.CountShort(b[:q])
			from = q
		}
		prev = i
	}
	return n, true
}

// isCut reports whether counts add up at i in every text that holds s: for an encoding, runCut says so
// of the characters around i; or in s, the counter vouches for i, and what its answer depends on (the
// character before i, and from i the whitespace and the character after it) is all inside s. Only places
// where the encodings' SplitsAt can be true whatever surrounds them are asked about: before a space or
// tab, and after a line break.
func (m *Meter) isCut(s string, i int) bool {
	if m.enc != nil && i > 0 && i < len(s) && maybeCut(s, i) && runCut(s, i) {
		return true
	}
	if i <= 0 || i >= len(s) || s[i] != ' ' && s[i] != '\t' && s[i-1] != '\n' {
		return false
	}
	for j := i; ; { // the whitespace at i ends inside s
		r, w := utf8.DecodeRuneInString(s[j:])
		if !unicode.IsSpace(r) {
			break
		}
		if j += w; j == len(s) {
			return false
		}
	}
	return m.split.SplitsAt(s, i)
}

// LastCut returns the last place q in s, from <= q < len(s), where the counter vouches that counts add up
// in any text that holds s: Count(x+s+y) == Count(x+s[:q]) + Count(s[q:]+y) for all x and y. It returns
// -1 if it finds none (always, for a counter that is no [Splitter]).
func (m *Meter) LastCut(s string, from int) int {
	if m.split == nil {
		return -1
	}
	for i := len(s) - 1; i >= max(from, 1); i-- {
		if m.isCut(s, i) {
			return i
		}
	}
	return -1
}

// firstCut returns the first cut in s before to, or -1.
func (m *Meter) firstCut(s string, to int) int {
	for i := 1; i < to; i++ {
		if m.isCut(s, i) {
			return i
		}
	}
	return -1
}

// Adds reports whether the counter vouches that the counts of a and b add up wherever they are joined:
// Count(x+a+b+y) == Count(x+a) + Count(b+y) for all x and y. It asks the counter's SplitsAt (see
// [Splitter]) about the characters around the join alone: a's last character, and b's leading whitespace
// and the character after it. An empty a or b, or a b of only whitespace (whose run could go on into what
// follows it), is never vouched for.
func (m *Meter) Adds(a, b string) bool {
	if m.split == nil || a == "" {
		return false
	}
	lead := len(b) - len(strings.TrimLeftFunc(b, unicode.IsSpace))
	if lead == len(b) {
		return false
	}
	b = b[:min(len(b), lead+utf8.UTFMax)]
	tail := a[max(len(a)-2*utf8.UTFMax, 0):]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) { // start on a character
		tail = tail[1:]
	}
	if tail == "" {
		return false
	}
	if m.est {
		return estimateSplits(tail, b)
	}
	if m.enc != nil && len(tail)+len(b) <= 32 {
		// Joined on the stack: the encoding does not keep the text.
		var buf [32]byte
		n := copy(buf[:], tail)
		n += copy(buf[n:], b)
		return m.enc.SplitsAt(string(buf[:n]), len(tail))
	}
	return m.split.SplitsAt(tail+b, len(tail))
}

// maxInsertWindow is how long, in bytes, a window of [Meter.CountInserted] may grow before it counts the
// text whole instead.
const maxInsertWindow = 4 * CutWindow

// CountInserted returns the count of text with ins inserted at each offset of at, given n, the count of
// text, without counting either text whole: around each offset it finds a cut on either side, at most
// [CutWindow] bytes away, where counts add up both in text and in text with ins inserted (see
// [Meter.LastCut]), and corrects n by the counts of the few bytes between the two cuts, with ins and
// without. Offsets that close ranks share a window. The offsets must ascend, each at most len(text) and
// at the start of a character.
//
// It reports false when it cannot (the counter is no [Splitter], an offset has no cut near it, or the
// offsets are out of order): the caller then counts the text with ins inserted.
func (m *Meter) CountInserted(text string, n int, at []int, ins string) (int, bool) {
	if len(at) == 0 || ins == "" {
		return n, true
	}
	if m.split == nil || n < 0 {
		return 0, false
	}
	for i, p := range at {
		if p > len(text) || i > 0 && p <= at[i-1] || p < len(text) && !utf8.RuneStart(text[p]) {
			return 0, false
		}
	}
	var sc *scratch // the encoding's, with its caches, for all the windows
	if m.enc != nil {
		sc = m.enc.vocab.getScratch(cachedTextMin)
		defer m.enc.vocab.putScratch(sc)
	}
	buf := m.buf[:0]
	defer func() { m.buf = buf[:0] }()
	prev := 0 // the last cut: the end of the last window, or the text's start
	for i := 0; i < len(at); {
		p := at[i]
		// The window's start: the last cut at or before p, or prev, itself a cut (or the text's start).
		s := -1
		for b := p; b >= max(prev, p-CutWindow); b-- {
			if b == prev {
				s = b
				break
			}
			if (b == len(text) || utf8.RuneStart(text[b])) && m.cutsBoth(text, at[i:], ins, b, prev) {
				s = b
				break
			}
		}
		if s < 0 {
			return 0, false
		}
		// The window's end: the first cut after p (or the text's end); an offset met first joins the window.
		j, q := i, -1
		for q < 0 {
			p := at[j]
			if p == len(text) {
				q = p
				break
			}
			next := -1
			if j+1 < len(at) {
				next = at[j+1]
			}
			b := p + 1
			for ; b <= min(len(text), p+CutWindow); b++ {
				if b == next {
					break
				}
				if b == len(text) || utf8.RuneStart(text[b]) && m.cutsBoth(text, at[i:], ins, b, s) {
					q = b
					break
				}
			}
			if q < 0 {
				if b != next || next-s > maxInsertWindow {
					return 0, false
				}
				j++ // the next offset is in the window too
			}
		}
		if q-s > maxInsertWindow {
			return 0, false
		}
		with := appendInserted(buf[:0], text, s, q, at[i:j+1], ins)
		buf = with[:0]
		n += m.windowDelta(text[s:q], with, sc)
		prev, i = q, j+1
	}
	return n, true
}

// maxDeltas bounds a Meter's memo of windows (see windowDelta).
const maxDeltas = 1 << 12

// windowKey is a window of [Meter.CountInserted] and the window with its inserts.
type windowKey struct{ w, with string }

// windowDelta returns Count(with) - Count(w), remembered per Meter: the same few windows (a line's end
// and the next one's start, "\n\n", ",\n  ") recur in text after text. It counts in sc, the encoding's
// scratch, or with the counter if sc is nil. with is the Meter's buffer, which it does not keep.
func (m *Meter) windowDelta(w string, with []byte, sc *scratch) int {
	if d, ok := m.deltas[windowKey{w, bytesString(with)}]; ok { // looked up without a copy
		return d
	}
	var d int
	if sc != nil {
		d = m.enc.countDelta(w, bytesString(with), sc) // the encoding keeps no text
	} else {
		d = m.Count(string(with)) - m.Count(w)
	}
	if len(m.deltas) < maxDeltas {
		if m.deltas == nil {
			m.deltas = map[windowKey]int{}
		}
		m.deltas[windowKey{strings.Clone(w), string(with)}] = d
	}
	return d
}

// bytesString is b as a string, without a copy, for a call that does not keep it while b is not changed.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// cutsBoth reports whether counts add up at b both in text and in text with ins inserted at each offset
// of at (b, if it is one, is before its ins), each vouched for (see isCut) by a window of the text from
// the character before b, which must start after from (the last cut before b), to no more than CutWindow
// bytes after b.
func (m *Meter) cutsBoth(text string, at []int, ins string, b, from int) bool {
	if b <= from || b >= len(text) || !maybeCut(text, b) {
		return false
	}
	if m.enc == nil && text[b] != ' ' && text[b] != '\t' && text[b-1] != '\n' { // see isCut
		return false
	}
	_, w := utf8.DecodeLastRuneInString(text[:b])
	v0, v1 := b-w, min(len(text), b+CutWindow)
	for v1 > b && v1 < len(text) && !utf8.RuneStart(text[v1]) {
		v1--
	}
	if v0 < from || !m.isCut(text[v0:v1], b-v0) {
		return false
	}
	k := 0 // the first offset at or after b: no offset is inside the character before b
	for k < len(at) && at[k] < b {
		k++
	}
	if k == len(at) || at[k] >= v1 { // no offset in the window: it is the same text
		return true
	}
	end := k // the offsets in the window
	for end < len(at) && at[end] < v1 {
		end++
	}
	with := appendInserted(m.cutBuf[:0], text, v0, v1, at[k:end], ins)
	m.cutBuf = with[:0]
	if m.enc != nil { // the encoding keeps no text: no copy
		return m.isCut(bytesString(with), b-v0)
	}
	return m.isCut(string(with), b-v0)
}

// appendInserted appends text[from:to] to dst with ins inserted at each of the ascending offsets at, each
// in [from, to].
func appendInserted(dst []byte, text string, from, to int, at []int, ins string) []byte {
	last := from
	for _, p := range at {
		dst = append(append(dst, text[last:p]...), ins...)
		last = p
	}
	return append(dst, text[last:to]...)
}

// maybeCut is false where no cut of localCut can be, between ASCII characters (inside a word, a number, a
// run of punctuation, or a run of spaces with more after it); true elsewhere. It is what makes the search
// for cuts fast.
func maybeCut(text string, b int) bool {
	c, d := text[b-1], text[b]
	if c >= utf8.RuneSelf || d >= utf8.RuneSelf {
		return true
	}
	kc, kd := asciiKind(c), asciiKind(d)
	switch {
	case c == '\n' || c == '\r':
		return true
	case kd == kindSpace:
		// After whitespace, before whitespace that more whitespace follows: no rule holds.
		return kc != kindSpace || b+1 >= len(text) || text[b+1] >= utf8.RuneSelf || asciiKind(text[b+1]) != kindSpace
	case kc == kindSpace:
		return false // before a non-space after whitespace (not a line break): not a cut
	case kc == kd:
		return false // inside a word, a number, a run of punctuation
	}
	return true
}

const (
	kindLetter = iota
	kindDigit
	kindSpace
	kindPunct
)

func asciiKind(c byte) int {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		return kindLetter
	case '0' <= c && c <= '9':
		return kindDigit
	case c == ' ', c == '\t', c == '\n', c == '\r', c == '\v', c == '\f':
		return kindSpace
	}
	return kindPunct
}
