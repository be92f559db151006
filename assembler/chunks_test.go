package assembler_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/tokenizer"
)

// seedTemplate is the template shown in seed 000.
const seedTemplate = "--- Source {{.Index}} ---\n{{.Content}}\n"

// chunksCounterCase is a counter the chunk assembler is tested with. A nil counter means the default.
type chunksCounterCase struct {
	name    string
	counter assembler.TokenCounter
}

// chunksUpToOnly counts exactly and can stop early, but knows no split points: the path between the fast
// one (*tokenizer.Encoding) and the plain one (CounterFunc).
type chunksUpToOnly struct{ e *tokenizer.Encoding }

func (c chunksUpToOnly) Count(s string) int                        { return c.e.Count(s) }
func (c chunksUpToOnly) CountUpTo(s string, limit int) (int, bool) { return c.e.CountUpTo(s, limit) }

func chunksCounters() []chunksCounterCase {
	return []chunksCounterCase{
		{"default", nil},
		{"o200k", tokenizer.O200K()},
		{"simple", assembler.SimpleTokenCounter{}},
		{"estimator", tokenizer.Estimator{}},
		{"func", tokenizer.CounterFunc(tokenizer.CL100K().Count)},
		{"upto-only", chunksUpToOnly{tokenizer.CL100K()}},
	}
}

func chunksCounterOf(c assembler.TokenCounter) assembler.TokenCounter {
	if c == nil {
		return tokenizer.CL100K()
	}
	return c
}

// chunksTemplates are the formats the chunk assembler is tested with; "" is the default format.
var chunksTemplates = []string{
	"",
	seedTemplate,
	"{{.Content}}", // no separator at all: every join is a hard one
	"[{{.Index}}] {{.Source}}: {{.Content}}\n\n",
}

// chunksNew returns an assembler with the given counter (nil: default), template ("": default) and budget.
func chunksNew(t testing.TB, counter assembler.TokenCounter, tmpl string, budget int) *assembler.Assembler {
	t.Helper()
	opts := []assembler.Option{assembler.WithMaxTokens(budget)}
	if counter != nil {
		opts = append(opts, assembler.WithTokenCounter(counter))
	}
	if tmpl != "" {
		tm, err := assembler.ParseTemplate(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, assembler.WithTemplate(tm))
	}
	return assembler.New(opts...)
}

// chunksReference is the specification, written the slow and obvious way: chunks in descending score order
// (stable), each included if and only if the whole context with it counts at most budget.
func chunksReference(t testing.TB, counter assembler.TokenCounter, tmpl string, budget int, results []retriever.Result) *assembler.AssembleResult {
	t.Helper()
	var tm *template.Template
	if tmpl != "" {
		tm = template.Must(template.New("ref").Option("missingkey=zero").Parse(tmpl))
	}
	order := make([]int, len(results))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(results[j].Score, results[i].Score) })
	res := &assembler.AssembleResult{Citations: []assembler.Citation{}}
	for _, i := range order {
		r := results[i]
		if r.Chunk == nil {
			continue
		}
		part := r.Chunk.Content
		if tm != nil {
			source := r.Chunk.Metadata["source"]
			if source == "" {
				source = r.Chunk.DocumentID
			}
			var b strings.Builder
			if err := tm.Execute(&b, assembler.TemplateData{
				Index: len(res.Citations) + 1, Content: r.Chunk.Content, Score: r.Score, Source: source,
				Metadata: r.Chunk.Metadata, ChunkID: r.Chunk.ID, DocumentID: r.Chunk.DocumentID,
			}); err != nil {
				t.Fatal(err)
			}
			part = b.String()
		}
		cand := part
		if len(res.Citations) > 0 {
			if tm == nil {
				cand = res.Context + assembler.DefaultSeparator + part
			} else {
				cand = res.Context + part
			}
		}
		if n := counter.Count(cand); n <= budget {
			res.Context, res.TotalTokens = cand, n
			res.Citations = append(res.Citations, assembler.Citation{
				ChunkIndex: i, Content: r.Chunk.Content, Score: r.Score, Metadata: r.Chunk.Metadata,
				ChunkID: r.Chunk.ID, DocumentID: r.Chunk.DocumentID,
			})
		} else {
			res.TruncatedCount++
		}
	}
	return res
}

// chunksCheck asserts the invariants of got and that it is the reference's result.
func chunksCheck(t testing.TB, counter assembler.TokenCounter, tmpl string, budget int, results []retriever.Result, got *assembler.AssembleResult) {
	t.Helper()
	if n := counter.Count(got.Context); got.TotalTokens != n {
		t.Fatalf("TotalTokens = %d, but the Context counts %d\ncontext: %q", got.TotalTokens, n, got.Context)
	}
	if got.TotalTokens > budget {
		t.Fatalf("TotalTokens = %d exceeds the budget %d", got.TotalTokens, budget)
	}
	nonNil := 0
	for _, r := range results {
		if r.Chunk != nil {
			nonNil++
		}
	}
	if len(got.Citations)+got.TruncatedCount != nonNil {
		t.Fatalf("%d citations + %d truncated != %d chunks", len(got.Citations), got.TruncatedCount, nonNil)
	}
	want := chunksReference(t, counter, tmpl, budget, results)
	if got.Context != want.Context || got.TotalTokens != want.TotalTokens || got.TruncatedCount != want.TruncatedCount {
		t.Fatalf("got (%q, %d tokens, %d truncated), want (%q, %d tokens, %d truncated)",
			got.Context, got.TotalTokens, got.TruncatedCount, want.Context, want.TotalTokens, want.TruncatedCount)
	}
	if len(got.Citations) != len(want.Citations) {
		t.Fatalf("%d citations, want %d", len(got.Citations), len(want.Citations))
	}
	for i := range got.Citations {
		g, w := got.Citations[i], want.Citations[i]
		if g.ChunkIndex != w.ChunkIndex || g.Content != w.Content || g.ChunkID != w.ChunkID || g.DocumentID != w.DocumentID ||
			!(g.Score == w.Score || math.IsNaN(g.Score) && math.IsNaN(w.Score)) || fmt.Sprint(g.Metadata) != fmt.Sprint(w.Metadata) {
			t.Fatalf("citation %d = %+v, want %+v", i, g, w)
		}
	}
}

// chunksPieces are the bits random chunk texts are made of: the joins between them, and between chunks and
// separators, are where counts fail to add up.
var chunksPieces = []string{
	"the", " quick", " brown fox", ".", "\n", "\n\n", "\n\n\n", " ", "  ", "\t", "\r\n", "/", "// comment", "---",
	"'s", "'ll", "12345", " 678", "上下文", "是一个系统，而不是一个字符串。", "コンテキスト", "문맥", "Привет", " мир",
	"👨‍👩‍👧", "🇫🇷", "é", "\u00a0", "\u2028", "<|endoftext|>", "\xff", "\xe4\xb8", "x\xc3(", "func main() {\n\treturn\n}",
	"Source", ":", "  \n  ", "-", "--", "\x00",
}

func chunksRandomText(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(chunksPieces[r.IntN(len(chunksPieces))])
	}
	return b.String()
}

func chunksRandomResults(r *rand.Rand) []retriever.Result {
	results := make([]retriever.Result, r.IntN(12))
	for i := range results {
		if r.IntN(15) == 0 {
			results[i] = retriever.Result{Score: r.Float64()} // a nil chunk
			continue
		}
		c := &loom.Chunk{ID: fmt.Sprintf("c%d", i), DocumentID: fmt.Sprintf("d%d", r.IntN(3)), Content: chunksRandomText(r)}
		if r.IntN(2) == 0 {
			c.Metadata = map[string]string{"source": fmt.Sprintf("file%d.md", i)}
		}
		results[i] = retriever.Result{Chunk: c, Score: float64(r.IntN(5)) / 4} // ties are common
	}
	return results
}

func TestAssembler_NeverExceedsTheBudgetAndCountsExactly(t *testing.T) {
	t.Parallel()
	for _, cc := range chunksCounters() {
		for ti, tmpl := range chunksTemplates {
			t.Run(fmt.Sprintf("%s/template%d", cc.name, ti), func(t *testing.T) {
				t.Parallel()
				r := rand.New(rand.NewPCG(uint64(ti), 42))
				counter := chunksCounterOf(cc.counter)
				for range 200 {
					results := chunksRandomResults(r)
					budget := 1 + r.IntN(60)
					if r.IntN(4) == 0 {
						budget = 1 + r.IntN(3)
					}
					got, err := chunksNew(t, cc.counter, tmpl, budget).Assemble(context.Background(), results)
					if err != nil {
						t.Fatal(err)
					}
					chunksCheck(t, counter, tmpl, budget, results, got)
				}
			})
		}
	}
}

// TestAssembler_CountsSeparatorsAndTemplateText builds cases where Weave's sum of per-chunk counts fits the
// budget but the real context does not.
func TestAssembler_CountsSeparatorsAndTemplateText(t *testing.T) {
	t.Parallel()
	e := tokenizer.CL100K()
	a := "Loom counts every token it returns."
	b := "Separators cost tokens too."
	sum := e.Count(a) + e.Count(b)
	results := []retriever.Result{
		{Chunk: &loom.Chunk{ID: "a", Content: a}, Score: 0.9},
		{Chunk: &loom.Chunk{ID: "b", Content: b}, Score: 0.8},
	}
	tests := []struct {
		name      string
		tmpl      string
		budget    int
		wantIDs   []string
		wantTrunc int
	}{
		{"default separator", "", sum, []string{"a"}, 1},
		{"default separator, room for it", "", e.Count(a + assembler.DefaultSeparator + b), []string{"a", "b"}, 0},
		{"template header", seedTemplate, sum, []string{"a"}, 1},
		{"template header, no room for one chunk's", seedTemplate, e.Count(a), nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := chunksNew(t, nil, tt.tmpl, tt.budget).Assemble(context.Background(), results)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range got.Citations {
				ids = append(ids, c.ChunkID)
			}
			if !slices.Equal(ids, tt.wantIDs) || got.TruncatedCount != tt.wantTrunc {
				t.Fatalf("included %v, %d truncated; want %v, %d", ids, got.TruncatedCount, tt.wantIDs, tt.wantTrunc)
			}
			if got.TotalTokens > tt.budget || got.TotalTokens != e.Count(got.Context) {
				t.Fatalf("TotalTokens %d, context counts %d, budget %d", got.TotalTokens, e.Count(got.Context), tt.budget)
			}
			chunksCheck(t, e, tt.tmpl, tt.budget, results, got)
		})
	}
}

func TestAssembler_SkipsWhatDoesNotFitAndKeepsLaterSmallerChunks(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("A long chunk that cannot fit. ", 20)
	results := []retriever.Result{
		{Chunk: &loom.Chunk{ID: "small1", Content: "Short."}, Score: 0.95},
		{Chunk: &loom.Chunk{ID: "big", Content: big}, Score: 0.9},
		{Chunk: &loom.Chunk{ID: "small2", Content: "Also short."}, Score: 0.5},
		{Chunk: &loom.Chunk{ID: "big2", Content: big + big}, Score: 0.4},
		{Chunk: &loom.Chunk{ID: "small3", Content: "Tiny."}, Score: 0.1},
	}
	got, err := assembler.New(assembler.WithMaxTokens(30)).Assemble(context.Background(), results)
	if err != nil {
		t.Fatal(err)
	}
	want := "Short." + assembler.DefaultSeparator + "Also short." + assembler.DefaultSeparator + "Tiny."
	if got.Context != want || got.TruncatedCount != 2 {
		t.Fatalf("got %q with %d truncated, want %q with 2", got.Context, got.TruncatedCount, want)
	}
	chunksCheck(t, tokenizer.CL100K(), "", 30, results, got)
}

func TestAssembler_TakesChunksByDescendingScore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		scores []float64
		want   []int // ChunkIndex of the citations
	}{
		{"descending", []float64{0.2, 0.9, 0.5}, []int{1, 2, 0}},
		{"ties keep their order", []float64{0.5, 0.9, 0.5, 0.9}, []int{1, 3, 0, 2}},
		{"negative and zero", []float64{-1, 0, 1}, []int{2, 1, 0}},
		{"NaN last", []float64{math.NaN(), 0.1, math.NaN(), -5}, []int{1, 3, 0, 2}},
		{"infinities", []float64{0, math.Inf(-1), math.Inf(1)}, []int{2, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			results := make([]retriever.Result, len(tt.scores))
			for i, s := range tt.scores {
				results[i] = retriever.Result{Chunk: &loom.Chunk{Content: fmt.Sprintf("chunk %d", i)}, Score: s}
			}
			got, err := assembler.New().Assemble(context.Background(), results)
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			var parts []string
			for _, c := range got.Citations {
				idx = append(idx, c.ChunkIndex)
				parts = append(parts, c.Content)
			}
			if !slices.Equal(idx, tt.want) {
				t.Fatalf("order %v, want %v", idx, tt.want)
			}
			if got.Context != strings.Join(parts, assembler.DefaultSeparator) {
				t.Fatalf("context %q is not the citations in order", got.Context)
			}
		})
	}
}

func TestAssembler_CitationsDescribeTheIncludedChunks(t *testing.T) {
	t.Parallel()
	meta := map[string]string{"source": "guide.md", "page": "3"}
	results := []retriever.Result{
		{Chunk: &loom.Chunk{ID: "c1", DocumentID: "d1", Content: "First.", Metadata: meta}, Score: 0.7},
		{Chunk: &loom.Chunk{ID: "c2", DocumentID: "d2", Content: strings.Repeat("too long ", 100)}, Score: 0.8},
		{Chunk: &loom.Chunk{ID: "c3", DocumentID: "d1", Content: "Third."}, Score: 0.9},
	}
	got, err := assembler.New(assembler.WithMaxTokens(50)).Assemble(context.Background(), results)
	if err != nil {
		t.Fatal(err)
	}
	want := []assembler.Citation{
		{ChunkIndex: 2, Content: "Third.", Score: 0.9, ChunkID: "c3", DocumentID: "d1"},
		{ChunkIndex: 0, Content: "First.", Score: 0.7, Metadata: meta, ChunkID: "c1", DocumentID: "d1"},
	}
	if fmt.Sprint(got.Citations) != fmt.Sprint(want) {
		t.Fatalf("citations\n%+v\nwant\n%+v", got.Citations, want)
	}
	// Each citation's content is in the context, in citation order.
	at := 0
	for _, c := range got.Citations {
		i := strings.Index(got.Context[at:], c.Content)
		if i < 0 {
			t.Fatalf("citation %q not in the context after byte %d", c.Content, at)
		}
		at += i + len(c.Content)
	}
}

func TestAssembler_TemplateSeesEveryField(t *testing.T) {
	t.Parallel()
	tmpl := assembler.NewTemplate(`[{{.Index}}] {{.Source}} {{.Metadata.page}}|{{.Metadata.missing}}|{{.ChunkID}}|{{.DocumentID}}|{{printf "%.2f" .Score}}: {{.Content}}` + "\n")
	results := []retriever.Result{
		{Chunk: &loom.Chunk{ID: "c1", DocumentID: "d1", Content: "one", Metadata: map[string]string{"source": "a.md", "page": "7"}}, Score: 0.5},
		{Chunk: &loom.Chunk{ID: "c2", DocumentID: "d2", Content: "two"}, Score: 0.75},
		{Chunk: &loom.Chunk{ID: "c3", DocumentID: "d3", Content: "three", Metadata: map[string]string{"source": ""}}, Score: 0.25},
	}
	got, err := assembler.New(assembler.WithTemplate(tmpl)).Assemble(context.Background(), results)
	if err != nil {
		t.Fatal(err)
	}
	want := "[1] d2 ||c2|d2|0.75: two\n[2] a.md 7||c1|d1|0.50: one\n[3] d3 ||c3|d3|0.25: three\n"
	if got.Context != want {
		t.Fatalf("context\n%q\nwant\n%q", got.Context, want)
	}
}

// TestAssembler_IndexCountsIncludedChunks: a skipped chunk does not use up a source number.
func TestAssembler_IndexCountsIncludedChunks(t *testing.T) {
	t.Parallel()
	results := []retriever.Result{
		{Chunk: &loom.Chunk{Content: "kept"}, Score: 3},
		{Chunk: &loom.Chunk{Content: strings.Repeat("dropped ", 200)}, Score: 2},
		{Chunk: &loom.Chunk{Content: "kept too"}, Score: 1},
	}
	got, err := chunksNew(t, nil, seedTemplate, 40).Assemble(context.Background(), results)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--- Source 1 ---\nkept\n--- Source 2 ---\nkept too\n"; got.Context != want || got.TruncatedCount != 1 {
		t.Fatalf("got %q (%d truncated), want %q (1)", got.Context, got.TruncatedCount, want)
	}
}

func TestAssembler_TemplateErrors(t *testing.T) {
	t.Parallel()
	results := []retriever.Result{{Chunk: &loom.Chunk{Content: "x"}, Score: 1}}
	tests := []struct {
		name     string
		tmpl     *assembler.Template
		wantExec bool
	}{
		{"does not parse", assembler.NewTemplate("{{.Content"), false},
		{"unknown function", assembler.NewTemplate("{{nope .Content}}"), false},
		{"unknown field", assembler.NewTemplate("{{.Nope}}"), true},
		{"fails to execute", assembler.NewTemplate(`{{index .Metadata 1}}`), true},
		{"nil", nil, false},
		{"zero", &assembler.Template{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := assembler.New(assembler.WithTemplate(tt.tmpl))
			got, err := a.Assemble(context.Background(), results)
			if !errors.Is(err, assembler.ErrTemplate) || got != nil {
				t.Fatalf("Assemble = %v, %v; want nil, ErrTemplate", got, err)
			}
			var exec template.ExecError
			if errors.As(err, &exec) != tt.wantExec {
				t.Fatalf("error %v: ExecError %v, want %v", err, !tt.wantExec, tt.wantExec)
			}
			if (a.Err() != nil) == tt.wantExec { // a parse error is known before Assemble, an execution error is not
				t.Fatalf("Err() = %v", a.Err())
			}
		})
	}
	if _, err := assembler.ParseTemplate("{{.Content"); !errors.Is(err, assembler.ErrTemplate) {
		t.Fatalf("ParseTemplate: %v, want ErrTemplate", err)
	}
	if tm, err := assembler.ParseTemplate(seedTemplate); err != nil || tm == nil {
		t.Fatalf("ParseTemplate(seed template) = %v, %v", tm, err)
	}
}

func TestNew_InvalidOptionsAreErrorsNotPanics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []assembler.Option
		want error
	}{
		{"zero budget", []assembler.Option{assembler.WithMaxTokens(0)}, assembler.ErrInvalidMaxTokens},
		{"negative budget", []assembler.Option{assembler.WithMaxTokens(-1)}, assembler.ErrInvalidMaxTokens},
		{"nil counter", []assembler.Option{assembler.WithTokenCounter(nil)}, assembler.ErrNilCounter},
		{"nil encoding", []assembler.Option{assembler.WithTokenCounter((*tokenizer.Encoding)(nil))}, assembler.ErrNilCounter},
		{"nil func", []assembler.Option{assembler.WithTokenCounter(tokenizer.CounterFunc(nil))}, assembler.ErrNilCounter},
		{"nil template", []assembler.Option{assembler.WithTemplate(nil)}, assembler.ErrTemplate},
		{"first error wins", []assembler.Option{assembler.WithMaxTokens(0), assembler.WithTokenCounter(nil)}, assembler.ErrInvalidMaxTokens},
		{"a valid option later does not hide it", []assembler.Option{assembler.WithMaxTokens(0), assembler.WithMaxTokens(10)}, assembler.ErrInvalidMaxTokens},
		{"nil option is ignored", []assembler.Option{nil}, nil},
		{"no options", nil, nil},
	}
	results := []retriever.Result{{Chunk: &loom.Chunk{Content: "x"}, Score: 1}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := assembler.New(tt.opts...)
			if !errors.Is(a.Err(), tt.want) || (tt.want == nil) != (a.Err() == nil) {
				t.Fatalf("Err() = %v, want %v", a.Err(), tt.want)
			}
			got, err := a.Assemble(context.Background(), results)
			if tt.want == nil {
				if err != nil || got.Context != "x" {
					t.Fatalf("Assemble = %+v, %v", got, err)
				}
				return
			}
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("Assemble = %v, %v; want nil, %v", got, err, tt.want)
			}
		})
	}
}

func TestAssembler_ZeroValueAndNilUseTheDefaults(t *testing.T) {
	t.Parallel()
	results := []retriever.Result{
		{Chunk: &loom.Chunk{Content: "a"}, Score: 1},
		{Chunk: &loom.Chunk{Content: "b"}, Score: 2},
	}
	want, err := assembler.New().Assemble(context.Background(), results)
	if err != nil {
		t.Fatal(err)
	}
	var nilAssembler *assembler.Assembler
	for name, a := range map[string]*assembler.Assembler{"zero": {}, "nil": nilAssembler} {
		got, err := a.Assemble(context.Background(), results)
		if err != nil || got.Context != want.Context || got.TotalTokens != want.TotalTokens {
			t.Fatalf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	if want.Context != "b"+assembler.DefaultSeparator+"a" || want.TotalTokens != tokenizer.CL100K().Count(want.Context) {
		t.Fatalf("New() gave %+v: not cl100k_base and the default separator", want)
	}
}

func TestAssembler_DefaultBudgetIs4096(t *testing.T) {
	t.Parallel()
	e := tokenizer.CL100K()
	text := strings.Repeat("word ", 4095) + "word" // 4096 tokens
	if n := e.Count(text); n != assembler.DefaultMaxTokens {
		t.Fatalf("test text counts %d", n)
	}
	for _, tt := range []struct {
		text string
		fits bool
	}{{text, true}, {text + " word", false}} {
		got, err := assembler.New().Assemble(context.Background(), []retriever.Result{{Chunk: &loom.Chunk{Content: tt.text}}})
		if err != nil {
			t.Fatal(err)
		}
		if (len(got.Citations) == 1) != tt.fits {
			t.Fatalf("%d tokens: fits %v, want %v", e.Count(tt.text), !tt.fits, tt.fits)
		}
	}
}

func TestAssembler_CountsCJKExactly(t *testing.T) {
	t.Parallel()
	e := tokenizer.CL100K()
	text := "上下文是一个系统，而不是一个字符串。コンテキストはシステムです。문맥은 문자열이 아니라 시스템입니다."
	n := e.Count(text)
	// The seed's counter, len(text)/4, would have let this text into a budget it overflows.
	if weave := len(text) / 4; n <= weave {
		t.Fatalf("cl100k_base counts %d tokens, len/4 = %d: expected an undercount", n, weave)
	}
	for _, tt := range []struct {
		budget int
		fits   bool
	}{{n, true}, {n - 1, false}, {len(text) / 4, false}} {
		got, err := assembler.New(assembler.WithMaxTokens(tt.budget)).Assemble(context.Background(),
			[]retriever.Result{{Chunk: &loom.Chunk{Content: text}, Score: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if fits := len(got.Citations) == 1; fits != tt.fits || (fits && got.TotalTokens != n) {
			t.Fatalf("budget %d: %+v; want fits=%v with %d tokens", tt.budget, got, tt.fits, n)
		}
	}
}

func TestSimpleTokenCounter_NeverZeroForText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"Hi!", "a", ".", " ", "中", "👍"} {
		if n := (assembler.SimpleTokenCounter{}).Count(s); n < 1 || n != tokenizer.Estimate(s) {
			t.Errorf("Count(%q) = %d, want tokenizer.Estimate's count, at least 1", s, n)
		}
	}
	if n := (assembler.SimpleTokenCounter{}).Count(""); n != 0 {
		t.Errorf(`Count("") = %d`, n)
	}
}

func TestAssembler_NilChunksAreSkippedNotTruncated(t *testing.T) {
	t.Parallel()
	results := []retriever.Result{
		{Score: 0.99},
		{Chunk: &loom.Chunk{Content: "kept"}, Score: 0.5},
		{Score: 0.4},
		{Chunk: &loom.Chunk{Content: strings.Repeat("x ", 100)}, Score: 0.3},
	}
	got, err := assembler.New(assembler.WithMaxTokens(10)).Assemble(context.Background(), results)
	if err != nil {
		t.Fatal(err)
	}
	if got.Context != "kept" || got.TruncatedCount != 1 || len(got.Citations) != 1 || got.Citations[0].ChunkIndex != 1 {
		t.Fatalf("got %+v", got)
	}
	if s := assembler.AssembleSimple(results); s != "kept"+assembler.DefaultSeparator+strings.Repeat("x ", 100) {
		t.Fatalf("AssembleSimple = %q", s)
	}
}

func TestAssembler_EmptyResults(t *testing.T) {
	t.Parallel()
	for _, results := range [][]retriever.Result{nil, {}, {{}}} {
		got, err := assembler.New().Assemble(context.Background(), results)
		if err != nil || got.Context != "" || got.TotalTokens != 0 || got.TruncatedCount != 0 || got.Citations == nil || len(got.Citations) != 0 {
			t.Fatalf("Assemble(%v) = %+v, %v", results, got, err)
		}
	}
}

func TestAssembleSimple_JoinsInTheGivenOrder(t *testing.T) {
	t.Parallel()
	c := func(s string) *loom.Chunk { return &loom.Chunk{Content: s} }
	tests := []struct {
		name    string
		results []retriever.Result
		want    string
	}{
		{"none", nil, ""},
		{"one", []retriever.Result{{Chunk: c("a")}}, "a"},
		{"given order, not score order", []retriever.Result{{Chunk: c("low"), Score: 0.1}, {Chunk: c("high"), Score: 0.9}}, "low\n\n---\n\nhigh"},
		{"nil chunks skipped", []retriever.Result{{}, {Chunk: c("a")}, {}, {Chunk: c("b")}, {}}, "a\n\n---\n\nb"},
		{"empty content kept", []retriever.Result{{Chunk: c("")}, {Chunk: c("b")}}, "\n\n---\n\nb"},
		{"no budget", []retriever.Result{{Chunk: c(strings.Repeat("x", 100000))}}, strings.Repeat("x", 100000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := assembler.AssembleSimple(tt.results); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAssembler_StopsWhenTheContextIsDone(t *testing.T) {
	t.Parallel()
	results := []retriever.Result{
		{Chunk: &loom.Chunk{Content: "one"}, Score: 3},
		{Chunk: &loom.Chunk{Content: "two"}, Score: 2},
		{Chunk: &loom.Chunk{Content: "three"}, Score: 1},
	}
	t.Run("before", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, err := assembler.New().Assemble(ctx, results)
		if !errors.Is(err, context.Canceled) || got != nil {
			t.Fatalf("Assemble = %v, %v; want nil, context.Canceled", got, err)
		}
	})
	t.Run("between chunks", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		counter := tokenizer.CounterFunc(func(s string) int {
			calls++
			cancel() // the first count cancels: the assembler must stop before the next chunk
			return tokenizer.CL100K().Count(s)
		})
		got, err := assembler.New(assembler.WithTokenCounter(counter)).Assemble(ctx, results)
		if !errors.Is(err, context.Canceled) || got != nil {
			t.Fatalf("Assemble = %v, %v; want nil, context.Canceled", got, err)
		}
		if calls != 1 {
			t.Fatalf("counted %d times after cancellation", calls-1)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), -1)
		defer cancel()
		if _, err := assembler.New().Assemble(ctx, results); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestAssembler_SafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	a := chunksNew(t, nil, seedTemplate, 200)
	r := rand.New(rand.NewPCG(7, 7))
	inputs := make([][]retriever.Result, 16)
	wants := make([]*assembler.AssembleResult, len(inputs))
	for i := range inputs {
		inputs[i] = chunksRandomResults(r)
		wants[i] = chunksReference(t, tokenizer.CL100K(), seedTemplate, 200, inputs[i])
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(inputs)*4)
	for range 4 {
		for i := range inputs {
			wg.Go(func() {
				got, err := a.Assemble(context.Background(), inputs[i])
				if err != nil {
					errs <- err
				} else if got.Context != wants[i].Context || got.TotalTokens != wants[i].TotalTokens {
					errs <- fmt.Errorf("input %d: got %q, want %q", i, got.Context, wants[i].Context)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzAssemble assembles arbitrary chunk texts (split from the input at NUL bytes), including invalid UTF-8,
// into an arbitrary budget, and checks the result against the reference, exactly.
func FuzzAssemble(f *testing.F) {
	f.Add("Hello, world.\x00Second chunk\n\x00\n\nthird", uint16(10), uint8(0))
	f.Add("上下文\x00是一个系统\x00，而不是", uint16(5), uint8(1))
	f.Add("a\n\x00\n\x00/b\x00 c\x00\xff\xfe\x00\xe4\xb8", uint16(3), uint8(2))
	f.Add("x\n\n\x00\n\n---\x00---\n\n\x00  \x00\t\t", uint16(12), uint8(3))
	f.Add("Hi!\x00Hi!\x00Hi!", uint16(1), uint8(4))
	counters := []assembler.TokenCounter{tokenizer.CL100K(), tokenizer.O200K(), assembler.SimpleTokenCounter{}}
	f.Fuzz(func(t *testing.T, data string, budget uint16, mode uint8) {
		texts := strings.Split(data, "\x00")
		if len(texts) > 64 {
			texts = texts[:64]
		}
		results := make([]retriever.Result, len(texts))
		for i, s := range texts {
			results[i] = retriever.Result{Chunk: &loom.Chunk{ID: fmt.Sprint(i), Content: s}, Score: float64((i * 7) % 5)}
		}
		b := int(budget)%512 + 1
		counter := counters[int(mode)%len(counters)]
		tmpl := chunksTemplates[int(mode)/len(counters)%len(chunksTemplates)]
		got, err := chunksNew(t, counter, tmpl, b).Assemble(context.Background(), results)
		if err != nil {
			t.Fatal(err)
		}
		chunksCheck(t, counter, tmpl, b, results, got)
	})
}

// chunksBenchResults cuts 200 chunks of 1 to 4 KB (about 250 to 1,000 tokens, typical retrieval chunk sizes)
// from the tokenizer's English and Go corpora.
func chunksBenchResults(b *testing.B) ([]retriever.Result, int) {
	b.Helper()
	var corpus []string
	for _, name := range []string{"english.txt", "code.go.txt"} {
		data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", name))
		if err != nil {
			b.Fatal(err)
		}
		corpus = append(corpus, string(data))
	}
	r := rand.New(rand.NewPCG(1, 2))
	results := make([]retriever.Result, 200)
	size := 0
	for i := range results {
		text := corpus[i%len(corpus)]
		n := 1000 + r.IntN(3000)
		at := r.IntN(len(text) - n)
		for at > 0 && !utf8.RuneStart(text[at]) {
			at--
		}
		end := at + n
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
		results[i] = retriever.Result{
			Chunk: &loom.Chunk{ID: fmt.Sprint(i), DocumentID: fmt.Sprint(i % 7), Content: text[at:end],
				Metadata: map[string]string{"source": fmt.Sprintf("doc%d.md", i%7)}},
			Score: r.Float64(),
		}
		size += end - at
	}
	return results, size
}

func BenchmarkAssemble(b *testing.B) {
	results, size := chunksBenchResults(b)
	for _, bc := range []struct {
		name    string
		counter assembler.TokenCounter
		tmpl    string
	}{
		{"cl100k", nil, ""},
		{"cl100k/template", nil, seedTemplate},
		{"o200k", tokenizer.O200K(), ""},
		{"estimate", assembler.SimpleTokenCounter{}, ""},
		{"cl100k-without-SplitsAt", chunksUpToOnly{tokenizer.CL100K()}, ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := chunksNew(b, bc.counter, bc.tmpl, 16384)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				res, err := a.Assemble(context.Background(), results)
				if err != nil {
					b.Fatal(err)
				}
				if res.TotalTokens > 16384 || len(res.Citations) == 0 {
					b.Fatalf("%d tokens, %d citations", res.TotalTokens, len(res.Citations))
				}
			}
		})
	}
}

// chunksMeter is cl100k_base, with its fast paths, recording how many bytes it is asked to count.
type chunksMeter struct {
	e     *tokenizer.Encoding
	bytes *int
}

func (m chunksMeter) Count(s string) int { *m.bytes += len(s); return m.e.Count(s) }
func (m chunksMeter) CountUpTo(s string, limit int) (int, bool) {
	*m.bytes += len(s)
	return m.e.CountUpTo(s, limit)
}
func (m chunksMeter) SplitsAt(s string, p int) bool { return m.e.SplitsAt(s, p) }

// TestAssembler_CountsEachChunkAboutOnce: with a counter that knows where counts add up, a candidate is
// counted without the context before it, so the text counted is about the input plus the context, not the
// input times the context.
func TestAssembler_CountsEachChunkAboutOnce(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the of and to in a is that for it as was with be by on not he this are or his from at which")
	starts := []string{"", "\n", "  ", "/", "\n\n"} // starts that defeat a split at the join
	for _, tmpl := range chunksTemplates {
		results := make([]retriever.Result, 150)
		input := 0
		for i := range results {
			var b strings.Builder
			b.WriteString(starts[i%len(starts)])
			for range 50 + r.IntN(400) {
				b.WriteString(words[r.IntN(len(words))])
				b.WriteString([]string{" ", " ", " ", ". ", ".\n", ",\n\n"}[r.IntN(6)])
			}
			results[i] = retriever.Result{Chunk: &loom.Chunk{Content: b.String()}, Score: r.Float64()}
			input += b.Len()
		}
		counted := 0
		counter := chunksMeter{tokenizer.CL100K(), &counted}
		got, err := chunksNew(t, counter, tmpl, 8000).Assemble(context.Background(), results)
		if err != nil {
			t.Fatal(err)
		}
		if n := tokenizer.CL100K().Count(got.Context); got.TotalTokens != n || n > 8000 {
			t.Fatalf("TotalTokens %d, context counts %d, budget 8000", got.TotalTokens, n)
		}
		if limit := 2 * (input + len(got.Context)); counted > limit {
			t.Errorf("template %q: counted %d bytes for %d bytes of chunks and a context of %d", tmpl, counted, input, len(got.Context))
		}
	}
}
