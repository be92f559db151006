package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func lexicalVectors(t testing.TB, l *Lexical, texts ...string) [][]float32 {
	t.Helper()
	vs, err := l.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(texts) {
		t.Fatalf("Embed returned %d vectors for %d texts", len(vs), len(texts))
	}
	for i, v := range vs {
		if len(v) != l.Dimensions() {
			t.Fatalf("vector %d has %d dimensions, want %d", i, len(v), l.Dimensions())
		}
	}
	return vs
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNewLexical_ValidatesDimensions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dims     int
		wantDims int
		wantErr  bool
	}{
		{0, DefaultLexicalDimensions, false},
		{MinLexicalDimensions, MinLexicalDimensions, false},
		{1000, 1000, false},
		{MaxLexicalDimensions, MaxLexicalDimensions, false},
		{MinLexicalDimensions - 1, 0, true},
		{MaxLexicalDimensions + 1, 0, true},
		{-1, 0, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.dims), func(t *testing.T) {
			t.Parallel()
			l, err := NewLexical(tt.dims)
			if tt.wantErr {
				if _, err1 := NewLexicalV1(tt.dims); tt.dims != 0 && !errors.Is(err1, ErrInvalidConfig) {
					t.Fatalf("NewLexicalV1(%d) error = %v, want ErrInvalidConfig", tt.dims, err1)
				}
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("NewLexical(%d) error = %v, want ErrInvalidConfig", tt.dims, err)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(tt.dims)) {
					t.Fatalf("error %q does not name the dimensions", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Dimensions() != tt.wantDims {
				t.Fatalf("Dimensions() = %d, want %d", l.Dimensions(), tt.wantDims)
			}
			if want := fmt.Sprintf("lexical2-%d", tt.wantDims); l.Name() != want {
				t.Fatalf("Name() = %q, want %q", l.Name(), want)
			}
			v1, err := NewLexicalV1(tt.dims)
			if err != nil || v1.Dimensions() != tt.wantDims || v1.Name() != fmt.Sprintf("lexical-%d", tt.wantDims) {
				t.Fatalf("NewLexicalV1(%d) = %v, %v", tt.dims, v1, err)
			}
			if got := lexicalVectors(t, l, "dimension check"); norm(got[0]) == 0 {
				t.Fatal("zero vector for a text with words")
			}
		})
	}
}

func TestDefault_IsLexical384(t *testing.T) {
	t.Parallel()
	d := Default()
	if d.Dimensions() != 384 || d.Name() != "lexical2-384" || Default() != d {
		t.Fatalf("Default() = %s with %d dimensions", d.Name(), d.Dimensions())
	}
}

// TestLexical_IsStable pins the output of both feature sets: vectors stored by one version must stay
// comparable with the next. If the features change on purpose, the name must change too (see Lexical.Name).
func TestLexical_IsStable(t *testing.T) {
	t.Parallel()
	const text = "Loom assembles the context, the context! 上下文 ÉTÉ naïve café 42 42 42."
	v1, err := NewLexicalV1(32)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := NewLexical(32)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l    *Lexical
		want []float32
	}{
		{v1, []float32{0.2375541, 0.20535512, -0.14585619, 0.0750793, 0.1547379, -0.4784124, 0.32494962,
			0.10831653, 0.10831653, 0.09169792, -0.1547379, 0.054158267, -0.054158267, 0.1547379, -0.016618617,
			-0.1547379, -0.054158267, 0.1547379, 0, 0, 0.47089022, 0.054158267, 0, -0.10831653, -0.054158267,
			-0.054158267, 0.008881722, -0.31367165, -0.054158267, 0.1547379, -0.10831653, 0}},
		{v2, []float32{-0.062934205, 0.19054322, -0.24452393, 0, 0.18158972, -0.38108644, 0.1271128, 0.1271128,
			0.18158972, 0.15372907, -0.18158972, 0.09079486, -0.09079486, 0.18158972, -0.02786066, -0.18158972,
			-0.09079486, 0.18158972, 0, 0, 0.57984275, 0.09079486, 0, -0.18158972, -0.09079486, -0.09079486,
			-0.062934205, -0.19054322, -0.09079486, 0.18158972, 0, 0}},
	} {
		got := lexicalVectors(t, tc.l, text)[0]
		for i := range tc.want {
			if math.Abs(float64(got[i]-tc.want[i])) > 1e-6 {
				t.Fatalf("%s: component %d = %v, want %v\ngot  %#v", tc.l.Name(), i, got[i], tc.want[i], got)
			}
		}
	}
}

// TestLexical_LeavesOutStopwordsAndWordPairs: the second version's features ignore English stopwords and the
// order of words (but for adjacent Chinese and Japanese characters), which the first version's did not.
func TestLexical_LeavesOutStopwordsAndWordPairs(t *testing.T) {
	t.Parallel()
	v1, err := NewLexicalV1(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b   string
		same   bool // under the second version
		sameV1 bool
	}{
		{"the leader of the cluster", "leader cluster", true, false},
		{"leader cluster", "cluster leader", true, false},
		{"上下文", "文下上", false, false},    // the characters' pairs differ
		{"That is it", "", true, false}, // only stopwords: no features
	} {
		for _, l := range []*Lexical{Default(), v1} {
			vs := lexicalVectors(t, l, tc.a, tc.b)
			want := tc.same
			if l == v1 {
				want = tc.sameV1
			}
			if got := equal(vs[0], vs[1]); got != want {
				t.Errorf("%s: %q and %q alike: %v, want %v", l.Name(), tc.a, tc.b, got, want)
			}
		}
	}
}

func TestLexical_IsDeterministic(t *testing.T) {
	t.Parallel()
	texts := []string{"Hello, world", "上下文工程", strings.Repeat("long text with many words ", 2000), ""}
	first := lexicalVectors(t, Default(), texts...)
	other, err := NewLexical(DefaultLexicalDimensions)
	if err != nil {
		t.Fatal(err)
	}
	// Reversed, so that every text is embedded after a different one with a reused scratch.
	reversed := append([]string(nil), texts...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	again := lexicalVectors(t, other, reversed...)
	for i := range texts {
		if !equal(first[i], again[len(texts)-1-i]) {
			t.Fatalf("text %d embeds differently on a second call", i)
		}
		if one := lexicalVectors(t, Default(), texts[i])[0]; !equal(first[i], one) {
			t.Fatalf("text %d embeds differently alone and in a batch", i)
		}
	}
}

func TestLexical_VectorsHaveUnitLength(t *testing.T) {
	t.Parallel()
	var huge strings.Builder
	for i := range 20000 { // more distinct features than a pooled scratch keeps
		fmt.Fprintf(&huge, "w%d ", i)
	}
	texts := []string{"x", "word", "Two words", "上", "日本語のテキスト", "x" + strings.Repeat("y", 100000),
		strings.Repeat("same ", 10000), huge.String(), "Ünïcödé Straße ΣΊΣΥΦΟΣ мир"}
	for _, dims := range []int{MinLexicalDimensions, DefaultLexicalDimensions, MaxLexicalDimensions} {
		l, err := NewLexical(dims)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range lexicalVectors(t, l, texts...) {
			if n := norm(v); math.Abs(n-1) > 1e-5 {
				t.Errorf("dims %d, text %d: norm %v, want 1", dims, i, n)
			}
		}
	}
}

func TestLexical_ZeroVectorForTextWithoutWords(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", " ", "   ", "\t\n\r", "...!?", "— – · • ©", "\xff\xfe\xfd", "\x00\x01", "🙂🙂"} {
		v := lexicalVectors(t, Default(), text)[0]
		if n := norm(v); n != 0 {
			t.Errorf("%q: norm %v, want the zero vector", text, n)
		}
		if c := Cosine(v, lexicalVectors(t, Default(), "hello")[0]); c != 0 {
			t.Errorf("%q: cosine with a text %v, want 0", text, c)
		}
	}
}

func TestLexical_IgnoresCaseWidthAndPunctuation(t *testing.T) {
	t.Parallel()
	tests := []struct{ a, b string }{
		{"Hello World", "hello world"},
		{"hello, world!", "hello world"},
		{"  hello\n\tworld  ", "hello world"},
		{"ＨＥＬＬＯ　ｗｏｒｌｄ１２", "hello world12"},
		{"ｈｅｌｌｏ！ｗｏｒｌｄ", "hello world"},
		{"\u212Aelvin", "kelvin"}, // the Kelvin sign lowercases to ASCII k
		{"ÉTÉ", "été"},
		{"ΣΟΦΙΑ", "σοφια"},
		{"hello\xffworld", "hello world"},
		{"上下文", "上下文。"},
		{"\U00020000\U00020001㐀", "\U00020000\U00020001㐀!"}, // ideographs beyond the main block
	}
	v1, err := NewLexicalV1(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Lexical{Default(), v1} {
		for _, tt := range tests {
			v := lexicalVectors(t, l, tt.a, tt.b)
			if !equal(v[0], v[1]) {
				t.Errorf("%s: %q and %q embed differently (cosine %v)", l.Name(), tt.a, tt.b, Cosine(v[0], v[1]))
			}
		}
	}
	// The first version pairs ideographs across spaces; the second only adjacent ones, as the keyword
	// analyzer does.
	for _, l := range []*Lexical{Default(), v1} {
		v := lexicalVectors(t, l, "上下文", "上 下 文")
		if got, want := equal(v[0], v[1]), l == v1; got != want {
			t.Errorf("%s: %q and %q alike: %v, want %v", l.Name(), "上下文", "上 下 文", got, want)
		}
	}
}

func TestLexical_SimilarTextsAreCloser(t *testing.T) {
	t.Parallel()
	v1, err := NewLexicalV1(0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		text, near, far string
		margin          float32 // how much closer near must be
		v1Only          bool    // the second version's features do not tell these apart
	}{
		{"shared words", "The cat sat on the mat.", "A cat was sitting on the mat.",
			"Stock markets fell sharply on Monday.", 0.1, false},
		{"question and answer", "How do I reset my password?", "Password reset instructions",
			"Weather forecast for tomorrow", 0.1, false},
		{"inflections", "embedding vectors for retrieval", "embeddings and vector retrieval",
			"the quick brown fox jumps", 0.1, false},
		{"word order counts a little", "dog bites man", "dog bites man today", "man bites dog", 0.02, true},
		{"code identifiers", "func main() { fmt.Println(x) }", "fmt.Println prints a line", "SELECT * FROM users", 0.1, false},
		{"Chinese", "我喜欢吃苹果", "我爱吃苹果和香蕉", "今天天气很好", 0.1, false},
		{"Japanese", "東京は日本の首都です", "日本の首都は東京", "パリはフランスの天気", 0.1, false},
		{"Cyrillic", "Москва столица России", "столица России Москва большая", "погода сегодня хорошая", 0.1, false},
	}
	for _, tt := range tests {
		for _, l := range []*Lexical{Default(), v1} {
			if tt.v1Only && l != v1 {
				continue
			}
			t.Run(l.Name()+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				v := lexicalVectors(t, l, tt.text, tt.near, tt.far)
				near, far := Cosine(v[0], v[1]), Cosine(v[0], v[2])
				if !(near > far+tt.margin) {
					t.Fatalf("cosine with %q = %.3f, with %q = %.3f: want the first clearly higher", tt.near, near, tt.far, far)
				}
				if near >= 0.999 {
					t.Fatalf("cosine of different texts %.3f", near)
				}
			})
		}
	}
}

func TestLexical_EmptyInputGivesNoVectors(t *testing.T) {
	t.Parallel()
	for _, texts := range [][]string{nil, {}} {
		vs, err := Default().Embed(context.Background(), texts)
		if err != nil || vs == nil || len(vs) != 0 {
			t.Fatalf("Embed(%#v) = %v, %v; want an empty slice and no error", texts, vs, err)
		}
	}
}

func TestLexical_VectorsDoNotShareMemory(t *testing.T) {
	t.Parallel()
	vs := lexicalVectors(t, Default(), "first", "second")
	second := append([]float32(nil), vs[1]...)
	_ = append(vs[0], 1, 2, 3)
	if !equal(vs[1], second) {
		t.Fatal("appending to one vector changed the next")
	}
}

func TestLexical_StopsWhenContextIsDone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Default().Embed(ctx, []string{"text"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Embed with a canceled context: error %v, want context.Canceled", err)
	}
}

func TestLexical_IsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	texts := []string{"alpha beta", "上下文", strings.Repeat("gamma delta ", 500), "", "epsilon"}
	want := lexicalVectors(t, Default(), texts...)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := (g + i) % len(texts)
				got, err := Default().Embed(context.Background(), texts[k:k+1])
				if err != nil {
					t.Error(err)
					return
				}
				if !equal(got[0], want[k]) {
					t.Errorf("goroutine %d: text %d embeds differently", g, k)
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzLexical(f *testing.F) {
	for _, s := range []string{"", " ", "hello world", "上下文工程", "ＡＢＣ", "a\xffb", "\xe4\xb8", "é́́", "x_y-z.42"} {
		f.Add([]byte(s))
	}
	l, err := NewLexical(MinLexicalDimensions)
	if err != nil {
		f.Fatal(err)
	}
	v1, err := NewLexicalV1(MinLexicalDimensions)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		text := string(data)
		vs, err := l.Embed(context.Background(), []string{text, text})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range vs[0] {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("non-finite component in %v", vs[0])
			}
		}
		n := norm(vs[0])
		if n != 0 && math.Abs(n-1) > 1e-4 {
			t.Fatalf("norm %v, want 0 or 1", n)
		}
		if !equal(vs[0], vs[1]) {
			t.Fatal("the same text embeds differently")
		}
		// The first version's vector is zero exactly for a text without words; the second's also for one of
		// stopwords alone, and never once a word that is not one is added.
		hasWord := strings.ContainsFunc(strings.ToValidUTF8(text, " "), isWordRune)
		if n1 := norm(lexicalVectors(t, v1, text)[0]); hasWord != (n1 != 0) {
			t.Fatalf("text has words: %v, but the first version's norm is %v", hasWord, n1)
		}
		if n != 0 && !hasWord {
			t.Fatalf("a text without words has norm %v", n)
		}
		if more := norm(lexicalVectors(t, l, text+" zebra")[0]); more == 0 {
			t.Fatalf("%q with a word that is not a stopword has the zero vector", text)
		}
		if lower := lexicalVectors(t, l, strings.ToLower(text))[0]; !equal(vs[0], lower) {
			t.Fatalf("%q and its lower case embed differently", text)
		}
	})
}

// chunks splits text into pieces of about size bytes at line ends, as a chunker would before embedding.
func chunks(text string, size int) []string {
	var out []string
	for len(text) > 0 {
		end := len(text)
		if end > size {
			if i := strings.LastIndexByte(text[:size], '\n'); i > 0 {
				end = i + 1
			} else {
				end = size
			}
		}
		out = append(out, text[:end])
		text = text[end:]
	}
	return out
}

// BenchmarkLexical embeds a short query, and 32 KiB of English, Go and Chinese/Japanese/Korean in batches of
// chunks of about 2 KB (the size of a 512-token chunk).
func BenchmarkLexical(b *testing.B) {
	type input struct {
		name  string
		texts []string
	}
	inputs := []input{{"query", []string{"How do I rotate the API keys of a project without downtime?"}}}
	for _, name := range []string{"english.txt", "code.go.txt", "cjk.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			b.Fatal(err)
		}
		inputs = append(inputs, input{name, chunks(string(data), 2048)})
	}
	for _, in := range inputs {
		size := 0
		for _, t := range in.texts {
			size += len(t)
		}
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Default().Embed(context.Background(), in.texts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func ExampleDefault() {
	vs, err := Default().Embed(context.Background(), []string{
		"How do I reset my password?",
		"Password reset instructions",
		"Weather forecast for tomorrow",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(Default().Name(), len(vs[0]))
	fmt.Printf("related:   %.2f\n", Cosine(vs[0], vs[1]))
	fmt.Printf("unrelated: %.2f\n", Cosine(vs[0], vs[2]))
	// Output:
	// lexical2-384 384
	// related:   0.53
	// unrelated: 0.02
}

func ExampleNewLexical() {
	l, err := NewLexical(64)
	if err != nil {
		panic(err)
	}
	vs, err := l.Embed(context.Background(), []string{"上下文工程", "上下文", ""})
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Name())
	fmt.Printf("%.2f\n", Cosine(vs[0], vs[1]))
	fmt.Printf("%.2f\n", Cosine(vs[0], vs[2])) // "" has no words: the zero vector
	// Output:
	// lexical2-64
	// 0.76
	// 0.00
}
