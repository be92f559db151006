package chunker

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// corpus returns real texts: the tokenizer's corpus and this package's testdata.
func corpus(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range []string{filepath.Join("..", "tokenizer", "testdata", "corpus"), "testdata"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".md") && dir != "testdata" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = string(data)
		}
	}
	return out
}

// tricky are short texts that have broken chunkers.
var tricky = []string{
	"",
	"   \n\t  \n",
	"x",
	"Hi!",
	"  leading and trailing  ",
	"para one.\n\n\n   indented para two.\n\n",
	"no newline at the end",
	strings.Repeat("word ", 400),
	strings.Repeat("a", 5000),
	strings.Repeat(" ", 3000) + "x",
	strings.Repeat("中文", 700),
	strings.Repeat("👨‍👩‍👧‍👦", 200),
	"Z" + strings.Repeat("\u0301", 300) + " zalgo",
	"e\u0301\u0301 a\u0300",
	strings.Repeat("line\n", 500),
	strings.Repeat("\r\n", 300) + "end",
	"bad \xff\xfe utf8 \xe2\x82 here " + strings.Repeat("and more ", 100),
	"Sentence one. Sentence two! Sentence three? «Quoted.» (Bracketed.) 第一句。第二句！第三句？",
}

var sizes = []struct{ size, overlap int }{
	{8, 0}, {8, 3}, {16, 5}, {50, 10}, {128, 0}, {128, 20}, {512, 50}, {4, 1},
}

// builtin are the strategies this package registers; tests register others.
var builtin = []string{Recursive, Fixed, Sliding, Semantic, Code, Markdown}

// testLanguage returns the code strategy's language of a testdata file, "" for one that is not code.
func testLanguage(name string) string {
	return map[string]string{".py": "python", ".go": "go"}[filepath.Ext(name)]
}

func strategiesUnderTest() []string {
	var names []string
	for _, name := range builtin {
		if _, err := New(name); err == nil {
			names = append(names, name)
		}
	}
	return names
}

func TestChunk_InvariantsHoldOnRealAndTrickyText(t *testing.T) {
	t.Parallel()
	texts := corpus(t)
	for i, s := range tricky {
		texts["tricky-"+string(rune('a'+i))] = s
	}
	for _, strategy := range strategiesUnderTest() {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			c, err := New(strategy)
			if err != nil {
				t.Fatal(err)
			}
			for name, text := range texts {
				if limit := maxPropertyText(); len(text) > limit {
					text = text[:charStart(text, limit)]
				}
				for _, sz := range sizes {
					if len(text) > 20000 && sz.size < 50 {
						text = text[:charStart(text, 20000)] // keep small sizes fast
					}
					opts := Options{ChunkSize: sz.size, ChunkOverlap: sz.overlap, NoOverlap: sz.overlap == 0}
					if strategy == Code {
						opts.Language = testLanguage(name)
					}
					chunks, err := c.Chunk(context.Background(), text, &opts)
					if err != nil {
						if errors.Is(err, ErrSizeTooSmall) && sz.size < 8 {
							continue
						}
						t.Fatalf("%s size %d overlap %d: %v", name, sz.size, sz.overlap, err)
					}
					checkInvariants(t, strategy, text, opts, chunks)
				}
			}
		})
	}
}

func TestChunk_RandomTextKeepsInvariants(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "word", " ", "  ", "\n", "\n\n", "\t", ".", ". ", "!", "中", "文。", "😀", "👍🏽", "\u0301", "#", "```", "|", "-", "\r\n", "é", "\xff"}
	for i, strategy := range strategiesUnderTest() {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(7, uint64(i)))
			c, _ := New(strategy)
			for range 150 {
				var b strings.Builder
				for n := r.IntN(600); b.Len() < n; {
					b.WriteString(alphabet[r.IntN(len(alphabet))])
				}
				text := b.String()
				size := 6 + r.IntN(60)
				opts := Options{ChunkSize: size, ChunkOverlap: r.IntN(size / 2), NoOverlap: false}
				if opts.ChunkOverlap == 0 {
					opts.NoOverlap = true
				}
				chunks, err := c.Chunk(context.Background(), text, &opts)
				if err != nil {
					t.Fatalf("%q size %d: %v", clip(text), size, err)
				}
				checkInvariants(t, strategy, text, opts, chunks)
			}
		})
	}
}

func TestChunk_Deterministic(t *testing.T) {
	t.Parallel()
	text := corpus(t)["english.txt"][:30000]
	for _, strategy := range strategiesUnderTest() {
		c, _ := New(strategy)
		a, err1 := c.Chunk(context.Background(), text, &Options{ChunkSize: 100})
		b, err2 := c.Chunk(context.Background(), text, &Options{ChunkSize: 100})
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs differ (errors %v, %v)", strategy, err1, err2)
		}
	}
}

func TestChunk_OverlapIsApplied(t *testing.T) {
	t.Parallel()
	text := corpus(t)["english.txt"][:40000]
	for _, strategy := range strategiesUnderTest() {
		c, _ := New(strategy)
		chunks, err := c.Chunk(context.Background(), text, &Options{ChunkSize: 120, ChunkOverlap: 30})
		if err != nil {
			t.Fatal(err)
		}
		overlapping := 0
		for i := 1; i < len(chunks); i++ {
			if chunks[i].StartOffset < chunks[i-1].EndOffset {
				overlapping++
			}
		}
		if overlapping < (len(chunks)-1)/2 {
			t.Errorf("%s: only %d of %d neighbours overlap", strategy, overlapping, len(chunks)-1)
		}
		none, _ := c.Chunk(context.Background(), text, &Options{ChunkSize: 120, NoOverlap: true})
		for i := 1; i < len(none); i++ {
			if none[i].StartOffset < none[i-1].EndOffset {
				t.Fatalf("%s: NoOverlap chunks %d and %d overlap", strategy, i-1, i)
			}
		}
	}
}

func TestChunk_FillsChunks(t *testing.T) {
	t.Parallel()
	// Packing must not be timid: chunks of prose average well over half the size.
	text := corpus(t)["english.txt"][:60000]
	for _, strategy := range []string{Recursive, Fixed, Sliding} {
		c, _ := New(strategy)
		chunks, err := c.Chunk(context.Background(), text, &Options{ChunkSize: 256, NoOverlap: true})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, ch := range chunks {
			total += ch.TokenCount
		}
		if avg := total / len(chunks); avg < 256*6/10 {
			t.Errorf("%s: chunks average %d tokens of 256", strategy, avg)
		}
	}
}

func TestOptions_Errors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		strategy string
		opts     Options
		want     error
	}{
		{"negative size", Recursive, Options{ChunkSize: -1}, ErrNegativeSize},
		{"negative overlap", Recursive, Options{ChunkOverlap: -5}, ErrNegativeOverlap},
		{"overlap equals size", Fixed, Options{ChunkSize: 100, ChunkOverlap: 100}, ErrOverlapTooLarge},
		{"overlap above size", Sliding, Options{ChunkSize: 10, ChunkOverlap: 20}, ErrOverlapTooLarge},
		{"overlap with NoOverlap", Recursive, Options{ChunkOverlap: 5, NoOverlap: true}, ErrOverlapTooLarge},
		{"other strategy's option", Recursive, Options{Language: "go"}, ErrNotApplicable},
		{"strategy mismatch", Fixed, Options{Strategy: Recursive}, ErrStrategyMismatch},
		{"window without offsets", Fixed, Options{Counter: tokenizer.Estimator{}}, ErrNoTokenOffsets},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := New(tc.strategy)
			_, err := c.Chunk(context.Background(), "some text", &tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := New("nonsense"); !errors.Is(err, ErrUnknownStrategy) || !strings.Contains(err.Error(), "recursive") {
		t.Errorf("New(nonsense) = %v, want ErrUnknownStrategy listing the known ones", err)
	}
	if _, err := Default().Chunk(context.Background(), "x", &Options{Strategy: "nonsense"}); !errors.Is(err, ErrUnknownStrategy) {
		t.Errorf("Default with an unknown strategy: %v", err)
	}
}

func TestOptions_ZeroMeansDefaults(t *testing.T) {
	t.Parallel()
	c, err := resolve(Recursive, nil)
	if err != nil || c.size != DefaultChunkSize || c.overlap != DefaultChunkOverlap {
		t.Fatalf("resolve(nil) = size %d overlap %d, %v", c.size, c.overlap, err)
	}
	if c, _ := resolve(Recursive, &Options{ChunkSize: 40}); c.overlap != 8 {
		t.Errorf("default overlap for size 40 = %d, want 8 (a fifth)", c.overlap)
	}
	if c, _ := resolve(Recursive, &Options{NoOverlap: true}); c.overlap != 0 {
		t.Errorf("NoOverlap gave overlap %d", c.overlap)
	}
}

func TestChunk_HonoursCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	text := strings.Repeat("Some words in a sentence. ", 2000)
	for _, strategy := range strategiesUnderTest() {
		c, _ := New(strategy)
		if _, err := c.Chunk(ctx, text, &Options{ChunkSize: 32}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: error %v, want context.Canceled", strategy, err)
		}
	}
}

func TestRecursive_KeepsIndentationAndSeparators(t *testing.T) {
	t.Parallel()
	text := "First paragraph line one.\nLine two.\n\n    Indented second paragraph.\n\n\tTabbed third.\n"
	chunks, err := NewRecursive().Chunk(context.Background(), text, &Options{ChunkSize: 8, NoOverlap: true})
	if err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	for _, ch := range chunks {
		joined.WriteString(ch.Content)
	}
	if joined.String() != text {
		t.Errorf("chunks joined = %q, want the text back", joined.String())
	}
	found := false
	for _, ch := range chunks {
		if strings.HasPrefix(ch.Content, "    Indented") {
			found = true
		}
	}
	if !found {
		t.Errorf("no chunk starts with the indented paragraph: %+v", chunks)
	}
}

func TestWindow_ExactOverlapAndNoRedundantTail(t *testing.T) {
	t.Parallel()
	enc := tokenizer.CL100K()
	for _, reps := range []int{200, 198} {
		text := strings.Repeat("alpha beta gamma delta ", reps)
		n := len(enc.TokenEnds(text))
		// Windows of 100 start every 80 tokens until one reaches the end, and no window lies inside another.
		want := 1
		for first := 0; first+100 < n; first += 80 {
			want++
		}
		lastStart := (want - 1) * 80
		for _, strategy := range []string{Fixed, Sliding} {
			c, _ := New(strategy)
			chunks, err := c.Chunk(context.Background(), text, &Options{ChunkSize: 100, ChunkOverlap: 20})
			if err != nil {
				t.Fatal(err)
			}
			if len(chunks) != want {
				t.Errorf("%s, %d tokens: %d windows, want %d", strategy, n, len(chunks), want)
			}
			last := chunks[len(chunks)-1]
			if last.EndOffset != len(text) || enc.Count(last.Content) != n-lastStart {
				t.Errorf("%s: last window ends at %d with %d tokens, want the end with %d", strategy, last.EndOffset, enc.Count(last.Content), n-lastStart)
			}
			if strategy == Sliding && last.Metadata["token_start"] != strconv.Itoa(lastStart) {
				t.Errorf("sliding: last window metadata %v", last.Metadata)
			}
		}
	}
}

// MyChunker is the seed's custom-chunker pattern: it must keep working.
type MyChunker struct{}

func (c *MyChunker) Chunk(_ context.Context, text string, opts *Options) ([]ChunkResult, error) {
	var results []ChunkResult
	for i, sentence := range strings.SplitAfter(text, ". ") {
		results = append(results, ChunkResult{Content: sentence, Index: i, TokenCount: tokenizer.Estimate(sentence)})
	}
	return results, nil
}

func TestRegistry_CustomChunker(t *testing.T) {
	t.Parallel()
	var _ Chunker = &MyChunker{}
	r := NewRegistry()
	if err := r.Register("sentences-test", &MyChunker{}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Chunk(context.Background(), "One. Two. Three.", &Options{Strategy: "sentences-test"})
	if err != nil || len(got) != 3 {
		t.Fatalf("custom chunker via the registry: %v, %v", got, err)
	}
	if !slices.Contains(r.Strategies(), "sentences-test") {
		t.Errorf("Strategies() = %v, without the registered one", r.Strategies())
	}
	// The registry is the program's, not the package's: the built-ins do not see it.
	if _, err := New("sentences-test"); !errors.Is(err, ErrUnknownStrategy) {
		t.Errorf("New after registering in a registry: %v, want ErrUnknownStrategy", err)
	}
	if _, err := NewRegistry().Lookup("sentences-test"); !errors.Is(err, ErrUnknownStrategy) {
		t.Errorf("a new registry has the other's strategy: %v", err)
	}
	if err := r.Register("", &MyChunker{}); !errors.Is(err, ErrNoChunker) {
		t.Errorf("Register with no name: %v, want ErrNoChunker", err)
	}
	if err := r.Register("x", nil); !errors.Is(err, ErrNoChunker) {
		t.Errorf("Register of nil: %v, want ErrNoChunker", err)
	}
}

func TestRegistry_ZeroValueIsEmpty(t *testing.T) {
	t.Parallel()
	var r Registry
	if _, err := r.Lookup(Recursive); !errors.Is(err, ErrUnknownStrategy) || len(r.Strategies()) != 0 {
		t.Fatalf("zero registry: %v, %v", err, r.Strategies())
	}
	if err := r.Register("mine", &MyChunker{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup("mine"); err != nil {
		t.Error(err)
	}
}

func TestRegistry_ReplacesABuiltIn(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	if c, err := r.Lookup(Code); err != nil || reflect.TypeOf(c) != reflect.TypeOf(NewCodeText()) {
		t.Fatalf("Lookup(code) = %T, %v; want the plain-text code chunker", c, err)
	}
	if err := r.Register(Code, &MyChunker{}); err != nil {
		t.Fatal(err)
	}
	if c, _ := r.Lookup(Code); reflect.TypeOf(c) != reflect.TypeOf(&MyChunker{}) {
		t.Errorf("Lookup(code) after Register = %T, want the registered chunker", c)
	}
	if c, _ := New(Code); reflect.TypeOf(c) != reflect.TypeOf(NewCodeText()) {
		t.Errorf("New(code) = %T after a registry replaced it, want the built-in", c)
	}
	if !slices.Equal(Strategies(), []string{Code, Fixed, Markdown, Recursive, Semantic, Sliding}) {
		t.Errorf("Strategies() = %v", Strategies())
	}
}

// FuzzChunk checks the invariants on any text, size and overlap, for every strategy.
func FuzzChunk(f *testing.F) {
	for i, s := range tricky {
		f.Add(s, uint8(8+i), uint8(i%4), uint8(i))
	}
	f.Fuzz(func(t *testing.T, text string, size, overlap, which uint8) {
		if len(text) > 4000 {
			text = text[:4000]
		}
		names := strategiesUnderTest()
		strategy := names[int(which)%len(names)]
		sz := 4 + int(size)%120
		opts := Options{ChunkSize: sz, ChunkOverlap: int(overlap) % sz}
		if opts.ChunkOverlap == 0 {
			opts.NoOverlap = true
		}
		c, _ := New(strategy)
		chunks, err := c.Chunk(context.Background(), text, &opts)
		if errors.Is(err, ErrSizeTooSmall) && sz < 8 {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", strategy, err)
		}
		checkInvariants(t, strategy, text, opts, chunks)
	})
}

func TestIsOptionError(t *testing.T) {
	t.Parallel()
	_, err := Default().Chunk(context.Background(), "text", &Options{ChunkSize: 10, ChunkOverlap: 20})
	if !IsOptionError(err) {
		t.Errorf("overlap over size: %v is not an option error", err)
	}
	if IsOptionError(context.Canceled) || IsOptionError(nil) {
		t.Error("a context error or nil is an option error")
	}
}
