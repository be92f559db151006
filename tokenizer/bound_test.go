package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// boundTexts returns real text in four scripts and code, and made-up text full of what could break the
// bound: contractions, apostrophes, marks, digits, entities, invalid UTF-8.
func boundTexts(t testing.TB) []string {
	var texts []string
	r := rand.New(rand.NewPCG(5, 5))
	for _, name := range []string{"english.txt", "code.go.txt", "cjk.txt", "cyrillic.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		for range 300 {
			size := 1 + r.IntN(1500)
			at := r.IntN(len(data) - size)
			texts = append(texts, string(data[at:at+size]))
		}
	}
	atoms := []string{"a", "I", "it", "don't", "'s", "'S", "'ll", "'", "''", "’", "e\u0301", "\u0301", "x1", "42", "1234567",
		"&lt;", "&amp;", "<b>", " ", "  ", "\n", "\t", ".", "—", "中文", "Привет", "😀", "\xff", "\xc3", "Ab", "ABC", "aBc", "_", "/"}
	for range 2000 {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

func TestLowerBound_BoundsCounts(t *testing.T) {
	t.Parallel()
	encs := []*Encoding{O200K(), CL100K()}
	tight := 0
	for _, text := range boundTexts(t) {
		whole := []Part{NewPart(text)}
		runs := encs[0].LowerBound(whole, -1)
		for _, e := range encs {
			if got := e.LowerBound(whole, -1); got != runs {
				t.Fatalf("%s: bound %d, %s: %d", e.Name(), got, encs[0].Name(), runs)
			}
			if n := e.Count(text); runs > n {
				t.Fatalf("%s: bound %d but %d tokens in %q", e.Name(), runs, n, text)
			} else if len(text) > 200 && 2*runs > n {
				tight++
			}
			if m := NewMeter(e); m.LowerBound(whole, -1) != runs {
				t.Fatalf("%s: the meter's bound is not the encoding's", e.Name())
			}
		}
		// Split anywhere, the bound is that of the whole text; with a limit, the scan stops above it, and
		// says nothing below it.
		cut := len(text) / 3
		if got := encs[0].LowerBound([]Part{NewPart(text[:cut]), NewPart(""), NewPart(text[cut:])}, -1); got != runs {
			t.Fatalf("%q split at %d: bound %d, whole %d", text, cut, got, runs)
		}
		if runs > 0 {
			if got := encs[0].LowerBound(whole, runs-1); got != runs {
				t.Fatalf("%q: limit %d gave %d, want %d", text, runs-1, got, runs)
			}
		}
		if got := encs[0].LowerBound(whole, runs); got > runs {
			t.Fatalf("%q: limit %d gave %d, above the bound", text, runs, got)
		}
	}
	if tight < 500 {
		t.Errorf("only %d long texts have more than half their tokens in runs: the bound is too weak to help", tight)
	}
	if NewMeter(Estimator{}).LowerBound([]Part{NewPart("a b c d e f")}, 0) != 0 {
		t.Error("an estimate is bounded")
	}
}

// TestLowerBound_SeparatorsNeverLowerIt checks what the region assembler relies on to bound knowledge
// before escaping it: inserting separators, or replacing one by an ASCII string that starts and ends with
// a separator other than the apostrophe, or a non-ASCII byte by other non-ASCII bytes, never lowers the
// bound.
func TestLowerBound_SeparatorsNeverLowerIt(t *testing.T) {
	t.Parallel()
	e := O200K()
	r := rand.New(rand.NewPCG(6, 6))
	refs := []string{"&amp;", "&lt;", "&gt;", "&quot;", "&#39;", "&#x27;", ";", "  ", "\n\t"}
	for _, text := range boundTexts(t) {
		before := e.LowerBound([]Part{NewPart(text)}, -1)
		b := []byte(text)
		var out []byte
		for _, c := range b {
			switch {
			case byteKind[c] == 0 && r.IntN(4) == 0:
				out = append(out, refs[r.IntN(len(refs))]...)
			case byteKind[c] == 2 && r.IntN(8) == 0:
				out = append(out, "\uFFFD"...)
			case r.IntN(16) == 0:
				out = append(out, c, ' ')
			default:
				out = append(out, c)
			}
		}
		if after := e.LowerBound([]Part{NewPart(string(out))}, -1); after < before {
			t.Fatalf("bound %d of %q, %d of %q", before, text, after, out)
		}
	}
}

func FuzzLowerBound(f *testing.F) {
	for _, s := range []string{"don't", "it's a test", "e\u0301te\u0301", "a'b'c", "x1y2", "\xffab"} {
		f.Add(s, uint16(2))
	}
	encs := []*Encoding{O200K(), CL100K()}
	f.Fuzz(func(t *testing.T, text string, cut uint16) {
		c := int(cut) % (len(text) + 1)
		runs := encs[0].LowerBound([]Part{NewPart(text[:c]), NewPart(text[c:])}, -1)
		for _, e := range encs {
			if n := e.Count(text); runs > n {
				t.Fatalf("%s: bound %d but %d tokens in %q", e.Name(), runs, n, text)
			}
		}
	})
}
