package assembler

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// TestMeter_JoinCountsExactly checks join against counting the joined text, on real text cut into parts
// at random, with joins that do not add up (a line break then '/', words cut in two, a tag then text),
// parts counted before or not, and limits.
func TestMeter_JoinCountsExactly(t *testing.T) {
	t.Parallel()
	var corpus []string
	for _, name := range []string{"english.txt", "code.go.txt", "cjk.txt", "cyrillic.txt"} {
		data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, string(data))
	}
	glue := []string{"", "\n", "/", "\n/", " ", "<context>\n", " \n</context>\n\n", "[1]", "x"}
	for _, enc := range []*tokenizer.Encoding{tokenizer.O200K(), tokenizer.CL100K()} {
		r := rand.New(rand.NewPCG(3, uint64(len(enc.Name()))))
		var wholeRuns, cutRuns int
		for range 400 {
			text := corpus[r.IntN(len(corpus))]
			var parts []part
			for range 1 + r.IntN(6) {
				var s string
				if r.IntN(3) == 0 {
					s = glue[r.IntN(len(glue))]
				} else {
					size := 1 + r.IntN(400)
					at := r.IntN(len(text) - size)
					s = strings.ToValidUTF8(text[at:at+size], "")
				}
				p := newPart(s)
				if r.IntN(2) == 0 {
					p.tokens = enc.Count(s)
				}
				parts = append(parts, p)
			}
			joined := joinText(parts)
			want := enc.Count(joined)
			longest := 0
			for _, p := range parts {
				longest = max(longest, len(p.text))
			}
			counted := 0 // texts longer than any part: runs counted whole
			m := newMeter(enc)
			m.counter = tokenizer.CounterFunc(func(s string) int {
				if len(s) > longest {
					counted++
				}
				return enc.Count(s)
			})
			limit := -1
			if r.IntN(3) == 0 {
				limit = r.IntN(want + 10)
			}
			fresh := append([]part(nil), parts...)
			n, within := m.joinUpTo(fresh, limit, nil)
			switch {
			case limit < 0 || want <= limit:
				if !within || n != want {
					t.Fatalf("%s: join %d (within %v), count %d, limit %d, parts %q", enc.Name(), n, within, want, limit, texts(parts))
				}
			case within || n <= limit:
				t.Fatalf("%s: join %d within %v, count %d over limit %d, parts %q", enc.Name(), n, within, want, limit, texts(parts))
			}
			if limit < 0 {
				m.counter = enc
				if again := m.join(fresh); again != want { // with the counts remembered
					t.Fatalf("%s: join again %d, count %d", enc.Name(), again, want)
				}
				if counted > 0 {
					wholeRuns++
				} else if len(m.short) > 0 {
					cutRuns++
				}
			}
		}
		if cutRuns < 20 {
			t.Errorf("%s: %d joins counted by cuts (%d whole): the test proves little", enc.Name(), cutRuns, wholeRuns)
		}
	}
}

func texts(parts []part) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p.text)
	}
	return out
}

func TestMeter_CutCountNeedsCuts(t *testing.T) {
	t.Parallel()
	m := newMeter(tokenizer.O200K())
	// No space in reach of the join: the run cannot be cut, and is counted whole.
	run := []part{newPart(strings.Repeat("a", 100) + "\n"), newPart("/" + strings.Repeat("b", 100))}
	if _, ok := m.cutCount(run); ok {
		t.Error("cut a run without spaces")
	}
	if got, want := m.join(run), tokenizer.O200K().Count(joinText(run)); got != want {
		t.Errorf("join %d, count %d", got, want)
	}
	// A long part of unknown count is not counted alone to cut the run.
	run = []part{newPart("see <x>\n"), newPart("/a b " + strings.Repeat("c ", 100))}
	if _, ok := m.cutCount(run); ok {
		t.Error("cut a run with a long part not counted")
	}
	run[1].tokens = tokenizer.O200K().Count(run[1].text)
	if n, ok := m.cutCount(run); !ok || n != tokenizer.O200K().Count(joinText(run)) {
		t.Errorf("cutCount %d %v, count %d", n, ok, tokenizer.O200K().Count(joinText(run)))
	}
}
