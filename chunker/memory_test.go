package chunker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/chunker/internal/chunktest"
)

// memoryCases are the strategies and inputs BenchmarkChunkMemory measures (the code strategy's parsing
// chunker has its own, in package chunker/code).
var memoryCases = []struct{ strategy, input string }{
	{Recursive, "prose"}, {Recursive, "dense"},
	{Fixed, "prose"}, {Fixed, "dense"},
	{Sliding, "prose"}, {Sliding, "dense"},
	{Semantic, "prose"}, {Semantic, "dense"},
	{Markdown, "markdown"}, {Markdown, "dense"}, {Markdown, "headings"}, {Markdown, "list"},
	{Code, "go"}, {Code, "dense"},
}

// memoryCase returns the case of BenchmarkChunkMemory called "strategy/input".
func memoryCase(name string) (string, chunktest.ChunkFunc, error) {
	strategy, input, _ := strings.Cut(name, "/")
	text, lang, err := chunktest.MemoryInput("..", input)
	if err != nil {
		return "", nil, err
	}
	c, err := New(strategy)
	if err != nil {
		return "", nil, err
	}
	opts := &Options{Strategy: strategy}
	if strategy == Code {
		opts.Language = lang
	}
	return text, func(ctx context.Context, text string) (int, error) {
		chunks, err := c.Chunk(ctx, text, opts)
		return len(chunks), err
	}, nil
}

func TestMain(m *testing.M) { chunktest.Main(m, memoryCase) }

// BenchmarkChunkMemory reports the peak memory of chunking per MB of input ("peakMB/MB"), for every strategy,
// on prose and on the inputs that have made chunking blow up. The peak is the rise of the resident set
// (VmHWM, Linux) of a fresh child process chunking the input once (chunktest.MeasurePeak), so that memory
// kept from earlier runs hides nothing.
// Run it with -benchtime=1x: the time and allocations it reports are those of the same call in this process.
// The peak includes the chunks returned, about 60 bytes each and their metadata maps (a few hundred bytes
// each with a heading path or code symbols): an input that makes a chunk every few bytes ("headings") is
// bounded by chunks/MB, which Options.MaxChunks caps.
func BenchmarkChunkMemory(b *testing.B) {
	for _, mc := range memoryCases {
		name := mc.strategy + "/" + mc.input
		b.Run(name, func(b *testing.B) {
			peak, chunks := chunktest.MeasurePeak(b, name)
			text, chunk, err := memoryCase(name)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := chunk(context.Background(), text); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(peak)/float64(len(text)), "peakMB/MB")
			b.ReportMetric(float64(chunks)/(float64(len(text))/(1<<20)), "chunks/MB")
		})
	}
}

// BenchmarkRecursive512 is the bench module's benchmark of the same name on this package's corpus: the
// recursive chunker at 512 tokens with 50 of overlap, on English, Russian and CJK prose, Go and Python
// source and Markdown.
func BenchmarkRecursive512(b *testing.B) {
	var parts []string
	for _, path := range []string{
		filepath.Join("..", "tokenizer", "testdata", "corpus", "english.txt"),
		filepath.Join("..", "tokenizer", "testdata", "corpus", "cyrillic.txt"),
		filepath.Join("..", "tokenizer", "testdata", "corpus", "cjk.txt"),
		filepath.Join("..", "tokenizer", "testdata", "corpus", "code.go.txt"),
		filepath.Join("testdata", "godebug.md"),
		filepath.Join("testdata", "textwrap.py"),
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, string(data))
	}
	text := strings.Join(parts, "\n\n")
	opts := &Options{ChunkSize: 512, ChunkOverlap: 50}
	c := NewRecursive()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Chunk(context.Background(), text, opts); err != nil {
			b.Fatal(err)
		}
	}
}
