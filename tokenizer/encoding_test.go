package tokenizer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestGet_UnknownEncodingListsKnown(t *testing.T) {
	t.Parallel()
	_, err := Get("p50k_base")
	if !errors.Is(err, ErrUnknownEncoding) {
		t.Fatalf("Get(p50k_base) error = %v, want ErrUnknownEncoding", err)
	}
	for _, name := range Encodings() {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name known encoding %s", err, name)
		}
	}
}

func TestCount_HiIsNotZero(t *testing.T) {
	t.Parallel()
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		if n := e.Count("Hi!"); n != 2 {
			t.Errorf("Count(Hi!) = %d, want 2 (Hi, !)", n)
		}
		if n := e.Count(""); n != 0 {
			t.Errorf("Count(\"\") = %d, want 0", n)
		}
	})
}

func TestEncode_SpecialTextIsOrdinaryByDefault(t *testing.T) {
	t.Parallel()
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		text := "<|endoftext|>"
		special := e.SpecialTokens()[text]
		ids := e.Encode(text)
		if slices.Contains(ids, special) {
			t.Errorf("Encode(%q) = %v contains the special id %d", text, ids, special)
		}
		if got := e.EncodeSpecial(text); !slices.Equal(got, []int{special}) {
			t.Errorf("EncodeSpecial(%q) = %v, want [%d]", text, got, special)
		}
	})
}

// invalidCases are byte strings that are not valid UTF-8, with the text tiktoken sees after Python's
// bytes.decode(errors="replace"): one U+FFFD per maximal ill-formed subsequence.
var invalidCases = []struct{ in, want string }{
	{"\xff", "\ufffd"},
	{"a\xffb", "a\ufffdb"},
	{"\xff\xfe", "\ufffd\ufffd"},
	{"\xe2\x82", "\ufffd"},     // truncated 3-byte sequence: one maximal subpart
	{"\xe2\x82a", "\ufffda"},   // ... followed by ASCII
	{"\xf0\x9f\x98", "\ufffd"}, // truncated emoji
	{"\xf0\x9f\x98\xf0\x9f\x98\x80", "\ufffd😀"},
	{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"}, // overlong: E0 must be followed by A0..BF
	{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"}, // surrogate
	{"\xc0\xaf", "\ufffd\ufffd"},           // C0 never starts a sequence
	{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
	{"\x80\x80", "\ufffd\ufffd"},
	{"ok\xc3", "ok\ufffd"},
}

func TestEncode_InvalidUTF8AsReplacementCharacters(t *testing.T) {
	t.Parallel()
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		for _, c := range invalidCases {
			if got := sanitize(c.in); got != c.want {
				t.Errorf("sanitize(%q) = %q, want %q", c.in, got, c.want)
			}
			if got, want := e.Encode(c.in), e.Encode(c.want); !slices.Equal(got, want) {
				t.Errorf("Encode(%q) = %v, want %v (as %q)", c.in, got, want, c.want)
			}
			if got, want := e.Count(c.in), e.Count(c.want); got != want {
				t.Errorf("Count(%q) = %d, want %d", c.in, got, want)
			}
		}
	})
}

func TestCountUpTo_StopsPastTheLimit(t *testing.T) {
	t.Parallel()
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		text := strings.Repeat("hello world ", 1000)
		total := e.Count(text)
		for _, limit := range []int{0, 1, 10, total - 1, total, total + 1} {
			n, within := e.CountUpTo(text, limit)
			switch {
			case within != (total <= limit):
				t.Errorf("CountUpTo(limit %d) within = %v, total is %d", limit, within, total)
			case within && n != total:
				t.Errorf("CountUpTo(limit %d) = %d, want the exact %d", limit, n, total)
			case !within && (n <= limit || n > limit+e.vocab.maxLen):
				t.Errorf("CountUpTo(limit %d) = %d, want just past the limit", limit, n)
			}
		}
		if n, within := e.CountUpTo(text, -1); !within || n != total {
			t.Errorf("CountUpTo(-1) = %d, %v; want %d, true", n, within, total)
		}
	})
}

func TestTruncate_LongestPrefixWithinBudget(t *testing.T) {
	t.Parallel()
	texts := []string{
		"The quick brown fox jumps over the lazy dog. " + strings.Repeat("Lorem ipsum dolor sit amet. ", 20),
		"人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。",
		"emoji 👨‍👩‍👧‍👦 and flags 🇺🇸🇫🇷 and more 😀😃😄 text",
		"   lots   of   spaces   \n\n\n  and newlines  ",
		"bad \xff\xfe utf8 \xe2\x82 here and there",
	}
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		for _, text := range texts {
			total := e.Count(text)
			for budget := -1; budget <= total+1; budget++ {
				got := e.Truncate(text, budget)
				checkTruncate(t, e, text, budget, got)
			}
		}
	})
}

// checkTruncate asserts Truncate's contract: a prefix of text, at a character boundary, within budget, and
// the longest such prefix that ends at a token boundary of text's encoding.
func checkTruncate(t testing.TB, e *Encoding, text string, budget int, got string) {
	t.Helper()
	if !strings.HasPrefix(text, got) {
		t.Fatalf("Truncate(%q, %d) = %q is not a prefix", text, budget, got)
	}
	if n := e.Count(got); n > max(budget, 0) {
		t.Fatalf("Truncate(%q, %d) = %q has %d tokens", text, budget, got, n)
	}
	if utf8.ValidString(text) && !utf8.ValidString(got) {
		t.Fatalf("Truncate(%q, %d) = %q cuts a character", text, budget, got)
	}
	if e.Count(text) <= budget {
		if got != text {
			t.Fatalf("Truncate(%q, %d) = %q, want the whole text that fits", text, budget, got)
		}
		return
	}
	if !utf8.ValidString(text) {
		return
	}
	// No longer prefix at a token boundary (and a character boundary) also fits.
	ids := e.Encode(text)
	off := 0
	for _, id := range ids {
		b, _ := e.TokenBytes(id)
		off += len(b)
		if off > len(got) && off <= len(text) && utf8.ValidString(text[:off]) && e.Count(text[:off]) <= budget {
			t.Fatalf("Truncate(%q, %d) = %q, but the longer prefix %q fits", text, budget, got, text[:off])
		}
	}
}

func TestDecode_UnknownIDsDecodeToNothing(t *testing.T) {
	t.Parallel()
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		ids := append(e.Encode("ab"), -1, e.VocabSize(), 1<<40)
		if got := e.Decode(ids); got != "ab" {
			t.Errorf("Decode = %q, want %q", got, "ab")
		}
		if _, ok := e.TokenBytes(-1); ok {
			t.Error("TokenBytes(-1) ok")
		}
	})
}

// TestMerge_HeapMatchesScan checks the heap merge against tiktoken's scan on pieces of every length.
func TestMerge_HeapMatchesScan(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "b", "aa", "ab", " ", "e", "the", "中", "😀", "\u0301", "ing", "x"}
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		r := rand.New(rand.NewPCG(1, 2)) // one per subtest: they run in parallel
		v := e.vocab
		s := v.getScratch(1 << 20)
		for range 2000 {
			var b strings.Builder
			for n := r.IntN(300); b.Len() < n; {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			p := b.String()
			if p == "" {
				continue
			}
			scan := slices.Clone(v.mergeSmall(p, s, nil))
			heap := v.mergeLarge(p, s, nil)
			if !slices.Equal(scan, heap) {
				t.Fatalf("piece %q: scan %v, heap %v", p, scan, heap)
			}
		}
	})
}

func TestCount_LongRunsMatchEncode(t *testing.T) {
	t.Parallel()
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		for _, unit := range []string{"a", " ", "7", "\n", "中", "ab", " \n"} {
			text := strings.Repeat(unit, 50_000)
			ids := e.Encode(text)
			if e.Count(text) != len(ids) {
				t.Errorf("%q x 50000: Count %d, len(Encode) %d", unit, e.Count(text), len(ids))
			}
			if e.Decode(ids) != text {
				t.Errorf("%q x 50000: Decode(Encode) differs", unit)
			}
		}
	})
}

func TestCount_AllocatesNothing(t *testing.T) {
	e := CL100K()
	v := testVectors(t)
	text := v.Cases[0].Text + strings.Repeat("The quick brown fox jumps over the lazy dog. 人人生而自由。", 50)
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop values; make test runs this without it")
	}
	// A collection between runs may empty the pool; this measures Count, not the collector.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	e.Count(text) // warm the pool
	if allocs := testing.AllocsPerRun(100, func() { e.Count(text) }); allocs != 0 {
		t.Errorf("Count allocates %v times per call, want 0", allocs)
	}
}

func TestEncoding_ConcurrentUseAgrees(t *testing.T) {
	t.Parallel()
	v := testVectors(t)
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := g; i < len(v.Cases); i += 8 {
					c := v.Cases[i]
					want := pick(e.Name(), c.CL100, c.O200)
					if got := e.Encode(c.Text); !slices.Equal(got, want) {
						errs <- fmt.Errorf("%s: concurrent Encode differs", c.Name)
						return
					}
					if e.Count(c.Text) != len(want) {
						errs <- fmt.Errorf("%s: concurrent Count differs", c.Name)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// FuzzEncode checks, for any bytes: no panic; Count == len(Encode); the encoding of invalid UTF-8 is that of
// its replacement text; Decode(Encode(s)) == s for valid UTF-8; Truncate's contract.
func FuzzEncode(f *testing.F) {
	v := testVectors(f)
	for _, c := range v.Cases {
		if len(c.Text) <= 200 { // checkTruncate is quadratic in the text
			f.Add(c.Text, len(c.Text)%17)
		}
	}
	for _, c := range invalidCases {
		f.Add(c.in, 3)
	}
	encs := []*Encoding{CL100K(), O200K()}
	f.Fuzz(func(t *testing.T, text string, budget int) {
		budget %= 64
		for _, e := range encs {
			ids := e.Encode(text)
			if n := e.Count(text); n != len(ids) {
				t.Fatalf("%s: Count(%q) = %d, len(Encode) = %d", e.Name(), text, n, len(ids))
			}
			clean := sanitize(text)
			if !utf8.ValidString(clean) {
				t.Fatalf("sanitize(%q) = %q is not valid UTF-8", text, clean)
			}
			if got := e.Decode(ids); got != clean {
				t.Fatalf("%s: Decode(Encode(%q)) = %q", e.Name(), text, got)
			}
			checkTruncate(t, e, text, budget, e.Truncate(text, budget))
		}
	})
}

// FuzzPretokenize checks that the pieces of any valid text tile it exactly and are never empty.
func FuzzPretokenize(f *testing.F) {
	for _, c := range testVectors(f).Cases[:300] {
		f.Add(c.Text)
	}
	cls := loadClasses()
	f.Fuzz(func(t *testing.T, text string) {
		text = sanitize(text)
		for _, split := range []splitFunc{splitCL100K, splitO200K} {
			for i := 0; i < len(text); {
				j := split(cls, text, i)
				if j <= i || j > len(text) {
					t.Fatalf("piece at %d of %q ends at %d", i, text, j)
				}
				if j < len(text) && !utf8.RuneStart(text[j]) {
					t.Fatalf("piece %q of %q ends inside a character", text[i:j], text)
				}
				i = j
			}
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	for _, name := range Encodings() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := loadVocab(name, generatedEncodings[name]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestTokenEnds_TileTheText(t *testing.T) {
	t.Parallel()
	texts := []string{"", "hello world", "人人生而自由 😀 done", "bad \xff\xfe utf8 \xe2\x82 here", "\xe2\x82"}
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		for _, text := range texts {
			ends := e.TokenEnds(text)
			ids := e.Encode(text)
			if len(ends) != len(ids) {
				t.Fatalf("TokenEnds(%q) has %d ends for %d tokens", text, len(ends), len(ids))
			}
			prev := 0
			for i, end := range ends {
				if end < prev || end > len(text) {
					t.Fatalf("TokenEnds(%q)[%d] = %d after %d", text, i, end, prev)
				}
				prev = end
			}
			if len(ends) > 0 && ends[len(ends)-1] != len(text) {
				t.Fatalf("TokenEnds(%q) ends at %d, want %d", text, ends[len(ends)-1], len(text))
			}
			if utf8.ValidString(text) {
				start := 0
				for i, end := range ends {
					b, _ := e.TokenBytes(ids[i])
					if text[start:end] != string(b) {
						t.Fatalf("token %d of %q: text %q, token bytes %q", i, text, text[start:end], b)
					}
					start = end
				}
			}
		}
	})
}

// TestSplitsAt_CountsAdd checks SplitsAt's promise on real and random text: wherever it says true, the
// counts of the two parts add up to the count of the whole, for every encoding.
func TestSplitsAt_CountsAdd(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "Word", " ", "  ", "\t", "\n", "\r\n", "\n\n", ";", "'s", "12345", "中文", "。", "😀", "\u0301", "\u00a0", "\u3000", "/", "\xff", "é", "ǅ",
		"1", "+", "'", "'S", "’", "-", "_", "=", "½", "٣", "x", "Ab", "(", ")", "\u0300", "ﬀ", "'ll", "Ⅻ"}
	texts := []string{"hello world\n  indented\n\nnext; para\n\tx", "a \n b", "foo;\n bar", "x\n\u00a0y"}
	for range 3000 {
		var b strings.Builder
		for n := r.IntN(80); b.Len() < n; {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		splits := 0
		for _, text := range texts {
			for p := 1; p < len(text); p++ {
				if !e.SplitsAt(text, p) {
					continue
				}
				splits++
				if a, b, w := e.Count(text[:p]), e.Count(text[p:]), e.Count(text); a+b != w {
					t.Fatalf("SplitsAt(%q, %d) but %d + %d != %d", text, p, a, b, w)
				}
			}
		}
		if splits < 1000 {
			t.Errorf("only %d split points in the sample: the test proves little", splits)
		}
	})
}

func FuzzSplitsAt(f *testing.F) {
	f.Add("hello world\n  next", 5)
	f.Add("a\n\tb", 2)
	encs := []*Encoding{CL100K(), O200K()}
	f.Fuzz(func(t *testing.T, text string, p int) {
		if len(text) == 0 {
			return
		}
		p = (p%len(text) + len(text)) % len(text)
		for _, e := range encs {
			if e.SplitsAt(text, p) && e.Count(text[:p])+e.Count(text[p:]) != e.Count(text) {
				t.Fatalf("%s: SplitsAt(%q, %d) but the counts do not add", e.Name(), text, p)
			}
		}
	})
}
