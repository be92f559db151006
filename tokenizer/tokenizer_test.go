package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// splitAlphabet is what random texts for the split and meter tests are made of: words, whitespace runs
// of every kind, contractions, digits, CJK, emoji, marks, invalid UTF-8.
var splitAlphabet = []string{"a", "Word", " ", "  ", "\t", "\n", "\r\n", "\n\n", ";", "'s", "12345", "中文", "。", "😀", "\u0301",
	"\u00a0", "\u3000", "/", "\xff", "é", "ǅ", "1", "+", "'", "'S", "’", "-", "_", "=", "½", "٣", "x", "Ab", "(", ")", "\u0300",
	"ﬀ", "'ll", "Ⅻ", "don't", "<b>", "&amp;", "👍🏽", "\xe4\xb8"}

func randomText(r *rand.Rand, maxLen int) string {
	var b strings.Builder
	for n := r.IntN(maxLen + 1); b.Len() < n; {
		b.WriteString(splitAlphabet[r.IntN(len(splitAlphabet))])
	}
	return b.String()
}

func TestCountUpTo_SameAnswerForEveryCounter(t *testing.T) {
	t.Parallel()
	e := O200K()
	plain := CounterFunc(e.Count) // no CountUpTo of its own
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		text := randomText(r, 200)
		want := e.Count(text)
		for _, limit := range []int{-1, 0, want - 1, want, want + 1, r.IntN(want + 2)} {
			for _, c := range []Counter{e, plain} {
				n, within := CountUpTo(c, text, limit)
				if fits := limit < 0 || want <= limit; within != fits || fits && n != want || !fits && n <= limit {
					t.Fatalf("%T: CountUpTo(%q, %d) = %d, %v; count %d", c, text, limit, n, within, want)
				}
			}
		}
	}
}

// TestSplitsAt_IsLocal checks the locality that Splitter's contract asks for and callers rely on: where
// SplitsAt is true, counts add up at the same place in any text that agrees with the text from the
// character before p through the first character after p that is not whitespace, and in any such text cut
// short within the whitespace.
func TestSplitsAt_IsLocal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	var texts []string
	for range 2000 {
		texts = append(texts, randomText(r, 60))
	}
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		r := rand.New(rand.NewPCG(9, 10)) // the subtests run in parallel: each has its own source
		adds := func(text string, p int) {
			t.Helper()
			if a, b, w := e.Count(text[:p]), e.Count(text[p:]), e.Count(text); a+b != w {
				t.Fatalf("SplitsAt true in a window, but in %q at %d: %d + %d != %d", text, p, a, b, w)
			}
		}
		checked := 0
		for _, text := range texts {
			for p := 1; p < len(text); p++ {
				if !e.SplitsAt(text, p) {
					continue
				}
				_, w := utf8.DecodeLastRuneInString(text[:p])
				lo := p - w
				run := p // the end of the whitespace at p
				for run < len(text) {
					c, w := utf8.DecodeRuneInString(text[run:])
					if !unicode.IsSpace(c) {
						break
					}
					run += w
				}
				hi := len(text)
				if run < len(text) {
					_, w := utf8.DecodeRuneInString(text[run:])
					hi = run + w
				}
				for range 3 {
					x, y := randomText(r, 12), randomText(r, 12)
					if hi == len(text) && run == len(text) {
						y = "" // all of text[p:] is the window
					}
					adds(x+text[lo:hi]+y, len(x)+p-lo)
					for q := p; q < run; {
						_, w := utf8.DecodeRuneInString(text[q:])
						q += w
						adds(x+text[lo:q], len(x)+p-lo)
					}
					checked++
				}
			}
		}
		if checked < 5000 {
			t.Errorf("only %d windows checked: the test proves little", checked)
		}
	})
}
