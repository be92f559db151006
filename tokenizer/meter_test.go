package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// splitOnly is a third-party counter with SplitsAt and nothing else: the meter asks it about windows it
// joins on the heap, and counts whole texts.
type splitOnly struct{ e *Encoding }

func (c splitOnly) Count(s string) int               { return c.e.Count(s) }
func (c splitOnly) SplitsAt(text string, p int) bool { return c.e.SplitsAt(text, p) }

// meterGlue is what joins text in a rendering, and what defeats a sum at a join: a line break then '/',
// words cut in two, a tag then text, whitespace runs cut in the middle.
var meterGlue = []string{"", "\n", "/", "\n/", " ", "  ", "\t", " \n", "\n\n", "\u3000", "<context>\n", " \n</context>\n\n", "\n</context>\n\n", "</context>\n\n", "[1]", "x",
	"'s", "'ll", "n't", "😀", "👍🏽", "中文", "。", "é", "\u0301", "12", "&amp;"}

func meterCorpus(t testing.TB) []string {
	t.Helper()
	var corpus []string
	for _, name := range []string{"english.txt", "code.go.txt", "cjk.txt", "cyrillic.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, string(data))
	}
	return corpus
}

// meterParts returns random parts: slices of real text cut anywhere (inside words, whitespace runs and
// characters), glue, and made-up text of contractions, CJK, emoji, marks and whitespace of every kind.
func meterParts(r *rand.Rand, corpus []string) []Part {
	text := corpus[r.IntN(len(corpus))]
	var parts []Part
	for range 1 + r.IntN(6) {
		var s string
		switch r.IntN(4) {
		case 0:
			s = meterGlue[r.IntN(len(meterGlue))]
		case 1:
			s = randomText(r, 40)
		default:
			size := 1 + r.IntN(400)
			at := r.IntN(len(text) - size)
			s = text[at : at+size]
			if r.IntN(4) > 0 {
				s = strings.ToValidUTF8(s, "")
			}
		}
		parts = append(parts, NewPart(s))
	}
	return parts
}

// TestMeter_JoinCountsExactly checks Join and JoinUpTo against counting the joined text, for both
// encodings and a third-party splitter, with parts counted before or not, and limits; and that the joins
// are mostly counted from their parts, not whole.
func TestMeter_JoinCountsExactly(t *testing.T) {
	t.Parallel()
	corpus := meterCorpus(t)
	for _, enc := range []*Encoding{O200K(), CL100K()} {
		for _, third := range []bool{false, true} {
			r := rand.New(rand.NewPCG(3, uint64(len(enc.Name()))))
			var wholeRuns, cutRuns int
			for range 1500 {
				parts := meterParts(r, corpus)
				for i := range parts {
					if r.IntN(2) == 0 {
						parts[i].Tokens = enc.Count(parts[i].Text)
					}
				}
				joined := JoinText(parts)
				want := enc.Count(joined)
				longest := 0
				for _, p := range parts {
					longest = max(longest, len(p.Text))
				}
				counted := 0 // texts longer than any part: runs counted whole
				var m *Meter
				if third {
					m = NewMeter(splitOnly{enc})
				} else {
					m = NewMeter(enc)
				}
				m.upTo = nil
				m.counter = CounterFunc(func(s string) int {
					if len(s) > longest {
						counted++
					}
					return enc.Count(s)
				})
				limit := -1
				if r.IntN(3) == 0 {
					limit = r.IntN(want + 10)
				}
				fresh := append([]Part(nil), parts...)
				n, within := m.JoinUpTo(fresh, limit, nil)
				switch {
				case limit < 0 || want <= limit:
					if !within || n != want {
						t.Fatalf("%s: join %d (within %v), count %d, limit %d, parts %q", enc.Name(), n, within, want, limit, texts(parts))
					}
				case within || n <= limit:
					t.Fatalf("%s: join %d within %v, count %d over limit %d, parts %q", enc.Name(), n, within, want, limit, texts(parts))
				}
				for i, p := range fresh {
					if p.Tokens >= 0 && p.Tokens != enc.Count(p.Text) {
						t.Fatalf("%s: part %d %q remembered as %d tokens, count %d", enc.Name(), i, p.Text, p.Tokens, enc.Count(p.Text))
					}
				}
				if limit < 0 {
					m.counter = enc
					if again := m.Join(fresh); again != want { // with the counts remembered
						t.Fatalf("%s: join again %d, count %d", enc.Name(), again, want)
					}
					if counted > 0 {
						wholeRuns++
					} else if len(m.short) > 0 {
						cutRuns++
					}
				}
			}
			if cutRuns < 100 {
				t.Errorf("%s: %d joins counted by cuts (%d whole): the test proves little", enc.Name(), cutRuns, wholeRuns)
			}
			t.Logf("%s third-party %v: %d joins counted by cuts, %d whole", enc.Name(), third, cutRuns, wholeRuns)
		}
	}
}

func texts(parts []Part) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return out
}

func TestMeter_CutCountNeedsCuts(t *testing.T) {
	t.Parallel()
	e := O200K()
	m := NewMeter(e)
	// No cut in reach of the join: the run cannot be cut, and is counted whole.
	run := []Part{NewPart(strings.Repeat("a", 100) + "\n"), NewPart("/" + strings.Repeat("b", 100))}
	if _, ok := m.cutCount(run); ok {
		t.Error("cut a run without cuts")
	}
	if got, want := m.Join(run), e.Count(JoinText(run)); got != want {
		t.Errorf("join %d, count %d", got, want)
	}
	// A long part of unknown count is not counted alone to cut the run.
	run = []Part{NewPart("see <x>\n"), NewPart("/a b " + strings.Repeat("c ", 100))}
	if _, ok := m.cutCount(run); ok {
		t.Error("cut a run with a long part not counted")
	}
	run[1].Tokens = e.Count(run[1].Text)
	if n, ok := m.cutCount(run); !ok || n != e.Count(JoinText(run)) {
		t.Errorf("cutCount %d %v, count %d", n, ok, e.Count(JoinText(run)))
	}
	// A counter that cannot split is counted whole, and exactly.
	plain := NewMeter(CounterFunc(e.Count))
	if plain.Adds("a", " b") || plain.LastCut("a b c", 0) >= 0 || plain.LowerBound([]Part{NewPart("a b c")}, 0) != 0 {
		t.Error("a plain counter is vouched for")
	}
	if got, want := plain.Join(run), e.Count(JoinText(run)); got != want {
		t.Errorf("plain join %d, count %d", got, want)
	}
}

// TestMeter_AddsAndCutsHoldAnywhere checks Adds and LastCut against their promises: wherever they vouch
// for a join, counts add up with any text before and after.
func TestMeter_AddsAndCutsHoldAnywhere(t *testing.T) {
	t.Parallel()
	corpus := meterCorpus(t)
	for _, enc := range []*Encoding{O200K(), CL100K()} {
		r := rand.New(rand.NewPCG(9, uint64(len(enc.Name()))))
		m := NewMeter(enc)
		third := NewMeter(splitOnly{enc})
		adds, cuts := 0, 0
		for range 3000 {
			parts := meterParts(r, corpus)
			a, b := parts[0].Text, JoinText(parts[1:])
			x, y := randomText(r, 10), randomText(r, 10)
			if m.Adds(a, b) != third.Adds(a, b) {
				t.Fatalf("%s: Adds(%q, %q) depends on the encoding being asked on the stack", enc.Name(), a, b)
			}
			if m.Adds(a, b) {
				adds++
				if w, s := enc.Count(x+a+b+y), enc.Count(x+a)+enc.Count(b+y); w != s {
					t.Fatalf("%s: Adds(%q, %q), but with %q before and %q after: %d != %d", enc.Name(), a, b, x, y, w, s)
				}
			}
			s := a + b
			for from := 0; ; {
				q := m.LastCut(s, from)
				if q < 0 {
					break
				}
				if q < from || q < 1 || q >= len(s) {
					t.Fatalf("%s: LastCut(%q, %d) = %d", enc.Name(), s, from, q)
				}
				cuts++
				if w, n := enc.Count(x+s+y), enc.Count(x+s[:q])+enc.Count(s[q:]+y); w != n {
					t.Fatalf("%s: LastCut(%q) = %d, but with %q before and %q after: %d != %d", enc.Name(), s, q, x, y, w, n)
				}
				from = q + 1 + r.IntN(8)
			}
		}
		if adds < 500 || cuts < 2000 {
			t.Errorf("%s: %d joins added, %d cuts: the test proves little", enc.Name(), adds, cuts)
		}
	}
}

// FuzzMeterJoin cuts a text into up to four parts anywhere and checks Join, and JoinUpTo with a limit,
// against the count of the text, with the parts' counts known or not.
func FuzzMeterJoin(f *testing.F) {
	for _, s := range []string{"hello world\n  next", "a  \n\n b", "don't 'll", "中文。\n/x", "😀👍🏽 e\u0301", "<context>\nx \n</context>\n\n", "<context>\nx.\n</context>\n\n"} {
		f.Add(s, uint16(3), uint16(7), uint16(11), uint8(5))
	}
	encs := []*Encoding{O200K(), CL100K()}
	f.Fuzz(func(t *testing.T, text string, c1, c2, c3 uint16, flags uint8) {
		cuts := []int{int(c1), int(c2), int(c3)}
		for i := range cuts {
			cuts[i] %= len(text) + 1
		}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		if cuts[1] > cuts[2] {
			cuts[1], cuts[2] = cuts[2], cuts[1]
		}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		for _, e := range encs {
			var parts []Part
			prev := 0
			for i, c := range append(cuts, len(text)) {
				p := NewPart(text[prev:c])
				if flags&(1<<i) != 0 {
					p.Tokens = e.Count(p.Text)
				}
				parts = append(parts, p)
				prev = c
			}
			want := e.Count(text)
			m := NewMeter(e)
			if got := m.Join(append([]Part(nil), parts...)); got != want {
				t.Fatalf("%s: Join %d, count %d, parts %q", e.Name(), got, want, texts(parts))
			}
			limit := int(flags>>4) * want / 8
			if n, within := NewMeter(e).JoinUpTo(append([]Part(nil), parts...), limit, nil); within != (want <= limit) || within && n != want || !within && n <= limit {
				t.Fatalf("%s: JoinUpTo limit %d = %d, %v; count %d, parts %q", e.Name(), limit, n, within, want, texts(parts))
			}
		}
	})
}

// meterBenchParts returns the parts of a rendering of text: counted paragraphs with wrappers between
// them, as a region assembler meters them again on every rendering of its plan.
func meterBenchParts(tb testing.TB, e *Encoding) []Part {
	tb.Helper()
	text := meterCorpus(tb)[0]
	var parts []Part
	for i, para := range strings.Split(text, "\n\n") {
		if i == 200 {
			break
		}
		// Each text is counted with the line break that ends it, as the region assembler renders an item.
		para += "\n"
		parts = append(parts, NewPart("<context>\n"), Part{Text: para, Tokens: e.Count(para)}, NewPart("</context>\n\n"))
	}
	return parts
}

func TestMeterJoin_AllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop values; make test runs this without it")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	e := O200K()
	parts := meterBenchParts(t, e)
	m := NewMeter(e)
	want := e.Count(JoinText(parts))
	if got := m.Join(parts); got != want { // counts the wrappers, once
		t.Fatalf("join %d, count %d", got, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { m.Join(parts) }); allocs != 0 {
		t.Errorf("Join of counted parts allocates %v times per call, want 0", allocs)
	}
}

// BenchmarkMeterJoin meters a rendering of 200 counted paragraphs and their wrappers: the checks at the
// joins, and the counts of the texts around those that do not add up.
func BenchmarkMeterJoin(b *testing.B) {
	for _, e := range []*Encoding{CL100K(), O200K()} {
		b.Run(e.Name(), func(b *testing.B) {
			parts := meterBenchParts(b, e)
			m := NewMeter(e)
			b.SetBytes(int64(len(JoinText(parts))))
			b.ReportAllocs()
			for b.Loop() {
				benchSink = m.Join(parts)
			}
		})
	}
}

// TestMeter_JoinsThatDoNotAdd names the joins that merge tokens across them: inside a whitespace run, a
// contraction, a CJK run, an emoji and its modifier, a line break before '/', a word cut in two. The meter
// must not add their counts, and counts each exactly, cached part counts or not.
func TestMeter_JoinsThatDoNotAdd(t *testing.T) {
	t.Parallel()
	joins := [][2]string{
		{"indented  ", "  code"}, {"line\n", "\n\nnext"}, {"tab\t", "\tx"}, {"don", "'t stop"}, {"it", "'ll be"},
		{"中文", "文本很长"}, {"👍", "🏽 yes"}, {"path\n", "/usr/bin"}, {"inter", "national"}, {"e", "\u0301tude"},
		{"1234", "5678"}, {"a\u3000", "\u3000b"}, {"x \n", "  \n y"},
	}
	for _, e := range []*Encoding{O200K(), CL100K()} {
		merged := 0
		for _, j := range joins {
			a, b := j[0], j[1]
			whole := e.Count(a + b)
			if e.Count(a)+e.Count(b) == whole {
				continue // this encoding happens to add them
			}
			merged++
			m := NewMeter(e)
			if m.Adds(a, b) {
				t.Errorf("%s: Adds(%q, %q), but %d + %d != %d", e.Name(), a, b, e.Count(a), e.Count(b), whole)
			}
			for _, counted := range []bool{false, true} {
				parts := []Part{NewPart(a), NewPart(b)}
				if counted {
					parts[0].Tokens, parts[1].Tokens = e.Count(a), e.Count(b)
				}
				if got := m.Join(parts); got != whole {
					t.Errorf("%s: Join(%q, %q) = %d, count %d", e.Name(), a, b, got, whole)
				}
			}
		}
		if merged < len(joins)/3 {
			t.Errorf("%s: only %d of the %d joins merge tokens: the test proves little", e.Name(), merged, len(joins))
		}
	}
}
