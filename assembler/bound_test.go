package assembler

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// boundTexts returns real text in four scripts and code, and made-up text full of what could break the
// bound: contractions, apostrophes, marks, digits, entities, invalid UTF-8.
func boundTexts(t testing.TB) []string {
	var texts []string
	r := rand.New(rand.NewPCG(5, 5))
	for _, name := range []string{"english.txt", "code.go.txt", "cjk.txt", "cyrillic.txt"} {
		data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", name))
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

func TestLetterRuns_BoundCounts(t *testing.T) {
	t.Parallel()
	encs := []*tokenizer.Encoding{tokenizer.O200K(), tokenizer.CL100K()}
	tight := 0
	for _, text := range boundTexts(t) {
		runs := letterRuns([]part{{text: text}}, len(text)+1)
		for _, enc := range encs {
			if !boundsRuns(enc.Name()) {
				t.Fatalf("%s is not bounded", enc.Name())
			}
			if n := enc.Count(text); runs > n {
				t.Fatalf("%s: %d runs but %d tokens in %q", enc.Name(), runs, n, text)
			} else if len(text) > 200 && 2*runs > n {
				tight++
			}
		}
		// Split anywhere, the runs are those of the whole text; with a limit, the scan stops above it.
		cut := len(text) / 3
		if got := letterRuns([]part{{text: text[:cut]}, {text: ""}, {text: text[cut:]}}, len(text)+1); got != runs {
			t.Fatalf("%q split at %d: %d runs, whole %d", text, cut, got, runs)
		}
		if runs > 0 {
			if got := letterRuns([]part{{text: text}}, runs-1); got != runs {
				t.Fatalf("%q: limit %d gave %d, want %d", text, runs-1, got, runs)
			}
		}
	}
	if tight < 500 {
		t.Errorf("only %d long texts have more than half their tokens in runs: the bound is too weak to help", tight)
	}
	if boundsRuns("estimate") || boundsRuns("") {
		t.Error("an unknown encoding is bounded")
	}
}

func FuzzLetterRuns(f *testing.F) {
	for _, s := range []string{"don't", "it's a test", "e\u0301te\u0301", "a'b'c", "x1y2", "\xffab"} {
		f.Add(s)
	}
	encs := []*tokenizer.Encoding{tokenizer.O200K(), tokenizer.CL100K()}
	f.Fuzz(func(t *testing.T, text string) {
		runs := letterRuns([]part{{text: text}}, len(text)+1)
		for _, enc := range encs {
			if n := enc.Count(text); runs > n {
				t.Fatalf("%s: %d runs but %d tokens in %q", enc.Name(), runs, n, text)
			}
		}
	})
}
