package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// insertGlue is text that a line break, its indentation or an inserted text may meet: line breaks of every
// kind, whitespace runs, '/', punctuation, contractions, digits, CJK, emoji, marks.
var insertGlue = []string{"\n", "\r\n", "\r", "\n\n", "\v", "\f", "\u0085", "\u2028", "\u2029", " ", "  ", "\t", " \n", "/", ".", "!?",
	"'s", "'ll", "12", "3456", "word", "Word", "WORD", "中文", "。", "😀", "é", "\u0301", "\u3000", "&amp;", "x", "-", "<a>"}

// insertText returns a random text: glue, slices of real text cut anywhere (inside words and
// characters, then made valid), and their mix.
func insertText(r *rand.Rand, corpus []string) string {
	var b strings.Builder
	for range 1 + r.IntN(12) {
		if r.IntN(3) == 0 {
			text := corpus[r.IntN(len(corpus))]
			i := r.IntN(len(text))
			b.WriteString(text[i:min(len(text), i+r.IntN(200))])
		} else {
			b.WriteString(insertGlue[r.IntN(len(insertGlue))])
		}
	}
	return strings.ToValidUTF8(b.String(), "")
}

// insertAt returns the offsets after each line break of s (the text format's indentation), or, one time in
// three, random offsets at character starts.
func insertAt(r *rand.Rand, s string) []int {
	var at []int
	if r.IntN(3) == 0 {
		for i := 0; i <= len(s); i++ {
			if (i == len(s) || s[i]&0xC0 != 0x80) && r.IntN(8) == 0 {
				at = append(at, i)
			}
		}
		return at
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n':
			i++
			at = append(at, i+1)
		case s[i] == '\n' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f':
			at = append(at, i+1)
		case strings.HasPrefix(s[i:], "\u0085"):
			at = append(at, i+2)
		case strings.HasPrefix(s[i:], "\u2028"), strings.HasPrefix(s[i:], "\u2029"):
			at = append(at, i+3)
		}
	}
	return at
}

func inserted(s string, at []int, ins string) string {
	var b strings.Builder
	last := 0
	for _, p := range at {
		b.WriteString(s[last:p])
		b.WriteString(ins)
		last = p
	}
	b.WriteString(s[last:])
	return b.String()
}

// TestCountInserted_IsTheCountOfTheText checks CountInserted against a count of the text with its inserts, in
// both encodings and the estimator, on random texts with line breaks of every kind indented as the text
// format indents them, and on inserts of other texts anywhere; and that it finds its cuts for most texts.
func TestCountInserted_IsTheCountOfTheText(t *testing.T) {
	t.Parallel()
	corpus := meterCorpus(t)
	for _, c := range []Counter{O200K(), CL100K(), Estimator{}} {
		r := rand.New(rand.NewPCG(9, 9))
		derived, tried := 0, 0
		for range 3000 {
			s := insertText(r, corpus)
			at := insertAt(r, s)
			ins := "  "
			if r.IntN(4) == 0 {
				ins = insertGlue[r.IntN(len(insertGlue))]
			}
			m := NewMeter(c)
			want := c.Count(inserted(s, at, ins))
			n, ok := m.CountInserted(s, c.Count(s), at, ins)
			if len(at) > 0 {
				tried++
			}
			if !ok {
				continue
			}
			if len(at) > 0 {
				derived++
			}
			if n != want {
				t.Fatalf("%T: CountInserted(%q, %q at %v) = %d, the text counts %d", c, s, ins, at, n, want)
			}
		}
		if derived < tried/3 {
			t.Errorf("%T: CountInserted found its cuts for %d texts of %d", c, derived, tried)
		}
	}
}

// TestCountInserted_RefusesWhatItCannotVouchFor checks the cases where it must say false.
func TestCountInserted_RefusesWhatItCannotVouchFor(t *testing.T) {
	t.Parallel()
	m := NewMeter(O200K())
	if _, ok := m.CountInserted("a\nb", 3, []int{2, 1}, "  "); ok {
		t.Error("offsets out of order: counted")
	}
	if _, ok := m.CountInserted("a\nb", 3, []int{4}, "  "); ok {
		t.Error("an offset past the text: counted")
	}
	if _, ok := NewMeter(countOnly{O200K()}).CountInserted("a\nb", 3, []int{2}, "  "); ok {
		t.Error("a counter that is no Splitter: counted")
	}
	if n, ok := m.CountInserted("a\nb", 3, nil, "  "); !ok || n != 3 {
		t.Errorf("no offsets: %d, %v", n, ok)
	}
}

// countOnly is a counter with nothing but Count.
type countOnly struct{ e *Encoding }

func (c countOnly) Count(s string) int { return c.e.Count(s) }

// TestRunCut_CountsAdd checks runCut's promise on random text in both encodings: wherever it says true
// of a window, counts add up there in a text that holds the window, whatever is around it.
func TestRunCut_CountsAdd(t *testing.T) {
	t.Parallel()
	corpus := meterCorpus(t)
	r := rand.New(rand.NewPCG(7, 7))
	for _, enc := range []*Encoding{O200K(), CL100K()} {
		cuts := 0
		for range 4000 {
			s := insertText(r, corpus)
			if len(s) < 2 {
				continue
			}
			p := 1 + r.IntN(len(s)-1)
			lo, hi := max(0, p-1-r.IntN(4)), min(len(s), p+1+r.IntN(8))
			for lo > 0 && !utf8.RuneStart(s[lo]) {
				lo--
			}
			for hi < len(s) && !utf8.RuneStart(s[hi]) {
				hi++
			}
			if !runCut(s[lo:hi], p-lo) {
				continue
			}
			cuts++
			x, y := insertGlue[r.IntN(len(insertGlue))]+s[:lo], s[hi:]+insertGlue[r.IntN(len(insertGlue))]
			whole := x + s[lo:hi] + y
			if got, want := enc.Count(x+s[lo:p])+enc.Count(s[p:hi]+y), enc.Count(whole); got != want {
				t.Fatalf("%s: runCut(%q, %d) but %q counts %d, its two sides %d", enc.Name(), s[lo:hi], p-lo, whole, want, got)
			}
		}
		if cuts < 500 {
			t.Errorf("%s: %d cuts", enc.Name(), cuts)
		}
	}
}

// FuzzCountInserted checks CountInserted against a count of the text with its inserts, for any text: the
// inserts after each line break (as the text format indents), or, by the flags, at offsets the fuzzer
// picks, of two spaces or another glue text.
func FuzzCountInserted(f *testing.F) {
	for _, s := range []string{"one\ntwo", "a \n b\r\n\r\nc", "don't\n'll", "中文。\n/x\u2028y", "😀\v👍🏽\fe\u0301", "x  \n\n  y", "12\n34"} {
		f.Add(s, uint16(3), uint8(0))
	}
	counters := []Counter{O200K(), CL100K(), Estimator{}}
	f.Fuzz(func(t *testing.T, text string, seed uint16, flags uint8) {
		if !utf8.ValidString(text) || len(text) > 4096 {
			return
		}
		r := rand.New(rand.NewPCG(uint64(seed), uint64(flags)))
		at := insertAt(r, text) // line breaks, or (one time in three) random character starts
		ins := "  "
		if flags&1 != 0 {
			ins = insertGlue[int(flags>>1)%len(insertGlue)]
		}
		for _, c := range counters {
			n, ok := NewMeter(c).CountInserted(text, c.Count(text), at, ins)
			if want := c.Count(inserted(text, at, ins)); ok && n != want {
				t.Fatalf("%T: CountInserted(%q, %q at %v) = %d, the text counts %d", c, text, ins, at, n, want)
			}
		}
	})
}
