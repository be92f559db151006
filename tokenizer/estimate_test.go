package tokenizer_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/context-loom/loom/tokenizer"
)

var corpusFiles = []string{"english.txt", "code.go.txt", "cjk.txt", "cyrillic.txt"}

func readCorpus(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestEstimate_FollowsTheDocumentedRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want int
	}{
		{"empty text is zero", "", 0},
		{"single space is one", " ", 1},
		{"single newline is one", "\n", 1},
		{"lone variation selector is one", "\ufe0f", 1},
		{"NUL byte is one", "\x00", 1},
		{"each invalid byte is one", "\xff\xfe", 2},
		{"short word is one", "hello", 1},
		{"word and punctuation", "Hi!", 2},
		{"word of up to six letters per token", "recognition", 2},
		{"space before a word is free", "The quick brown fox jumps over the lazy dog.", 10},
		{"camel case splits words", "ResponseWriter", 3},
		{"upper case run is one word", "HTTPServer", 2},
		{"two punctuation marks per token", "...", 2},
		{"three digits per token", "12345678", 3},
		{"decimal number", "3.14159", 4},
		{"line breaks and indentation", "a\n\n    b", 4},
		{"two spaces cost one", "a  b", 3},
		{"accented Latin two letters per token", "Straße", 2},
		{"Cyrillic three letters per token", "привет мир", 3},
		{"Greek three letters per token", "Όλοι", 2},
		{"Han ideograph one each", "一二三四五六七八九十", 10},
		{"kana one each", "こんにちは", 5},
		{"Hangul syllable one each", "안녕하세요", 5},
		{"Thai two characters per token", "ภาษาไทย", 4},
		{"emoji is two", "😀", 2},
		{"variation selector is free", "❤️", 2},
		{"skin tone is its own emoji", "👍🏽", 4},
		{"flag is two regional indicators", "🇫🇷", 4},
		{"ZWJ sequence is the sum of its parts", "👨‍👩‍👧", 8},
		{"other symbol is one", "→", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tokenizer.Estimate(tt.text); got != tt.want {
				t.Errorf("Estimate(%q) = %d, want %d", tt.text, got, tt.want)
			}
		})
	}
}

func TestEstimator_CountsLikeEstimate(t *testing.T) {
	t.Parallel()
	var c tokenizer.Counter = tokenizer.Estimator{}
	for _, text := range []string{"", "Hi!", "世界人权宣言", readCorpus(t, "english.txt")} {
		if got, want := c.Count(text), tokenizer.Estimate(text); got != want {
			t.Errorf("Estimator{}.Count(%.20q) = %d, want Estimate = %d", text, got, want)
		}
	}
}

// Measured estimate/exact ratios on the corpus files (whole files):
//
//	file           o200k_base  cl100k_base
//	english.txt    1.206       1.208
//	code.go.txt    1.218       1.205
//	cjk.txt        1.204       0.803
//	cyrillic.txt   1.155       0.627
//
// The estimate is calibrated to o200k_base, the most efficient tokenizer at hand; cl100k_base spends many
// more tokens on non-Latin scripts, and so may the models the estimate stands in for.
const (
	corpusMinRatio = 1.0  // the estimate does not under-count long text ...
	corpusMaxRatio = 1.25 // ... nor over-count it by more than a quarter
)

func TestEstimate_WithinBoundOfO200KOnCorpus(t *testing.T) {
	t.Parallel()
	for _, name := range corpusFiles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text := readCorpus(t, name)
			est, exact := tokenizer.Estimate(text), tokenizer.O200K().Count(text)
			ratio := float64(est) / float64(exact)
			t.Logf("estimate %d, o200k_base %d, ratio %.3f", est, exact, ratio)
			if ratio < corpusMinRatio || ratio > corpusMaxRatio {
				t.Errorf("estimate %d / o200k_base %d = %.3f, want within [%.2f, %.2f]",
					est, exact, ratio, corpusMinRatio, corpusMaxRatio)
			}
		})
	}
}

// Short texts are rougher than long ones; the comment before each case is its measured estimate/o200k_base
// ratio. Single words and lone characters vary more still ("こんにちは" is 1 o200k_base token, estimated 5);
// TestEstimate_FollowsTheDocumentedRules pins those.
const (
	shortMinRatio = 0.75
	shortMaxRatio = 1.75
)

func TestEstimate_WithinBoundOfO200KOnShortTexts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
	}{
		// Measured estimate/o200k_base: 4/4 = 1.00.
		{"English greeting", "Hello, world!"},
		// 10/10 = 1.00.
		{"English sentence", "The quick brown fox jumps over the lazy dog."},
		// 8/5 = 1.60: long common words are single tokens in o200k_base.
		{"long English words", "Estimate counts tokens approximately."},
		// 15/10 = 1.50.
		{"Go snippet", "func main() {\n\tfmt.Println(\"hello\")\n}\n"},
		// 17/12 = 1.42.
		{"URL", "https://example.com/path?q=1&x=2"},
		// 12/12 = 1.00.
		{"JSON", `{"name": "loom", "version": 2}`},
		// 19/17 = 1.12.
		{"French", "Tous les êtres humains naissent libres et égaux en dignité et en droits."},
		// 16/14 = 1.14.
		{"German", "Alle Menschen sind frei und gleich an Würde und Rechten geboren."},
		// 20/26 = 0.77: the lowest measured.
		{"Polish", "Wszyscy ludzie rodzą się wolni i równi pod względem swej godności i swych praw."},
		// 17/19 = 0.89.
		{"Turkish", "Bütün insanlar hür, haysiyet ve haklar bakımından eşit doğarlar."},
		// 24/21 = 1.14.
		{"Vietnamese", "Tất cả mọi người sinh ra đều được tự do và bình đẳng về nhân phẩm và quyền."},
		// 25/17 = 1.47.
		{"Russian", "Все люди рождаются свободными и равными в своем достоинстве и правах."},
		// 29/31 = 0.94.
		{"Greek", "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα."},
		// 17/20 = 0.85.
		{"Hebrew", "כל בני אדם נולדו בני חורין ושווים בערכם ובזכויותיהם."},
		// 20/18 = 1.11.
		{"Arabic", "يولد جميع الناس أحرارًا متساوين في الكرامة والحقوق."},
		// 30/25 = 1.20.
		{"Hindi", "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है।"},
		// 32/32 = 1.00.
		{"Thai", "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกันในเกียรติศักดิ์และสิทธิ"},
		// 19/16 = 1.19.
		{"Chinese", "人人生而自由,在尊严和权利上一律平等。"},
		// 42/35 = 1.20.
		{"Japanese", "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。"},
		// 30/24 = 1.25.
		{"Korean", "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			est, exact := tokenizer.Estimate(tt.text), tokenizer.O200K().Count(tt.text)
			ratio := float64(est) / float64(exact)
			t.Logf("estimate %d, o200k_base %d, ratio %.2f", est, exact, ratio)
			if ratio < shortMinRatio || ratio > shortMaxRatio {
				t.Errorf("Estimate(%q) = %d, o200k_base %d: ratio %.2f, want within [%.2f, %.2f]",
					tt.text, est, exact, ratio, shortMinRatio, shortMaxRatio)
			}
		})
	}
}

// TestEstimate_PartsBoundTheWhole checks the documented concatenation bounds on the corpus cut into pieces,
// including cuts inside characters.
func TestEstimate_PartsBoundTheWhole(t *testing.T) {
	t.Parallel()
	for _, name := range corpusFiles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text := readCorpus(t, name)
			whole := tokenizer.Estimate(text)
			for _, size := range []int{1, 2, 7, 100, 4096} {
				sum, pieces := 0, 0
				for i := 0; i < len(text); i += size {
					sum += tokenizer.Estimate(text[i:min(i+size, len(text))])
					pieces++
				}
				if whole > sum+pieces-1 {
					t.Errorf("pieces of %d bytes: whole %d > sum of pieces %d + %d", size, whole, sum, pieces-1)
				}
			}
			prev := 0
			for i := 0; i <= len(text); i += 997 {
				for i < len(text) && !utf8.RuneStart(text[i]) {
					i++
				}
				n := tokenizer.Estimate(text[:i])
				if n < prev {
					t.Fatalf("Estimate of the first %d bytes = %d, less than a shorter prefix's %d", i, n, prev)
				}
				prev = n
			}
		})
	}
}

// TestEstimator_SplitsAtAddsUp: at every byte of random texts of every kind of character where
// Estimator.SplitsAt says so, the estimates of the two sides add up to the whole's, as the meter relies on
// to count a join of parts from their counts; and it says so often enough to matter, at the joins of
// Loom's tags to their text.
func TestEstimator_SplitsAtAddsUp(t *testing.T) {
	t.Parallel()
	pool := []string{"a", "b", "Z", "é", "ß", "п", "Я", "世", "7", "0", ".", "<", "\"", " ", "  ", "\n", "\t", "😀", "\u200d", "\ufe0f", "\u0301", "\x01", "\xff", "\xe4\xb8"}
	r := rand.New(rand.NewPCG(5, 5))
	var e tokenizer.Estimator
	splits := 0
	for range 3000 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(pool[r.IntN(len(pool))])
		}
		text := b.String()
		for p := 0; p <= len(text); p++ {
			if e.SplitsAt(text, p) {
				splits++
				if got, want := tokenizer.Estimate(text[:p])+tokenizer.Estimate(text[p:]), tokenizer.Estimate(text); got != want {
					t.Fatalf("SplitsAt(%q, %d): the sides estimate %d, the whole %d", text, p, got, want)
				}
			}
		}
	}
	for _, join := range [][2]string{{"<context trusted=\"false\">\n", "Paris is north."}, {"north.\n", "</context>"}} {
		if !e.SplitsAt(join[0]+join[1], len(join[0])) {
			t.Errorf("%q + %q: not known to add up", join[0], join[1])
		}
	}
	if splits < 3000 {
		t.Errorf("only %d splits: the test proves little", splits)
	}
}

func TestEstimate_DoesNotAllocate(t *testing.T) {
	text := readCorpus(t, "cjk.txt")[:4096] + "😀👨‍👩‍👧 Straße привет\xff"
	if allocs := testing.AllocsPerRun(10, func() { tokenizer.Estimate(text) }); allocs != 0 {
		t.Errorf("Estimate allocates %.0f times per call, want 0", allocs)
	}
}

func FuzzEstimate(f *testing.F) {
	for _, s := range []string{"", " ", "Hi!", "ab", "aB", "a\u0301B", "\n  ", "  \n", "123", "...", "😀", "👨‍👩‍👧",
		"🇫🇷", "❤️", "\ufe0f", "世界", "Straße", "привет", "\xff", "\xef\xb8", "\x8f", "\xe4\xb8", "\x96"} {
		f.Add(s, s)
		f.Add(s, "Hello, world!")
	}
	f.Add("ab\xcc", "\x81cd")
	f.Add("a", "\u0301B")
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb, eab := tokenizer.Estimate(a), tokenizer.Estimate(b), tokenizer.Estimate(a+b)
		for _, c := range []struct {
			text string
			n    int
		}{{a, ea}, {b, eb}, {a + b, eab}} {
			if (c.n == 0) != (c.text == "") {
				t.Fatalf("Estimate(%q) = %d: want 0 exactly for empty text", c.text, c.n)
			}
			if c.n > len(c.text) {
				t.Fatalf("Estimate(%q) = %d, more than one token per byte", c.text, c.n)
			}
		}
		if eab > ea+eb+1 {
			t.Fatalf("Estimate(a+b) = %d > Estimate(a) + Estimate(b) + 1 = %d+%d+1 for a=%q b=%q", eab, ea, eb, a, b)
		}
		// Where the estimator says the counts add up, they do, and for any text that agrees with a+b around
		// the join (SplitsAt looks no further than a character each side).
		var e tokenizer.Estimator
		if e.SplitsAt(a+b, len(a)) {
			if eab != ea+eb {
				t.Fatalf("SplitsAt(%q, %d), but Estimate(a+b) = %d != %d + %d", a+b, len(a), eab, ea, eb)
			}
			_, w := utf8.DecodeLastRuneInString(a)
			if !e.SplitsAt(a[len(a)-w:]+b, w) {
				t.Fatalf("SplitsAt(%q, %d) but not of its window", a+b, len(a))
			}
		}
		for _, limit := range []int{-1, 0, eab / 2, eab - 1, eab} {
			if n, within := e.CountUpTo(a+b, limit); within != (limit < 0 || eab <= limit) || within && n != eab || !within && n <= limit {
				t.Fatalf("CountUpTo(%q, %d) = %d, %v; the estimate is %d", a+b, limit, n, within, eab)
			}
		}
		// A prefix that ends inside a character may cost more than the whole: its bytes are counted one by one.
		if utf8.ValidString(a) && eab < ea {
			t.Fatalf("Estimate(a+b) = %d < Estimate(a) = %d for valid UTF-8 a=%q b=%q", eab, ea, a, b)
		}
	})
}

func BenchmarkEstimate(b *testing.B) {
	for _, name := range corpusFiles {
		text := readCorpus(b, name)
		b.Run(strings.TrimSuffix(name, ".txt"), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				tokenizer.Estimate(text)
			}
		})
	}
}

func ExampleEstimate() {
	// An approximate count, for a model whose tokenizer is not public.
	fmt.Println(tokenizer.Estimate("Hello, world!"))
	fmt.Println(tokenizer.Estimate("你好,世界"))
	fmt.Println(tokenizer.Estimate(""))
	// Output:
	// 4
	// 5
	// 0
}
