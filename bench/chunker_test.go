package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/tokenizer"
	tiktokengo "github.com/tiktoken-go/tokenizer"
	"github.com/tmc/langchaingo/textsplitter"
)

// mixedCorpus is a few MB of real prose, Markdown and code: the tokenizer's committed corpus, the chunker's
// test data, and the Markdown and Go source of the Go installation running the benchmark.
func mixedCorpus(b *testing.B) string {
	b.Helper()
	var parts []string
	add := func(path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, string(data))
	}
	for _, name := range []string{"english.txt", "code.go.txt", "cyrillic.txt"} {
		add(filepath.Join("..", "tokenizer", "testdata", "corpus", name))
	}
	for _, name := range []string{"godebug.md", "textwrap.py"} {
		add(filepath.Join("..", "chunker", "testdata", name))
	}
	// The Go installation running the benchmark: the go command's GOROOT (runtime.GOROOT is deprecated, as
	// the build's root need not be this machine's).
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	root := strings.TrimSpace(string(out))
	var md, code []string
	for _, dir := range []string{"src/runtime", "src/cmd/compile", "src/net/http", "src/encoding/json", "src/go/types"} {
		filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			switch {
			case strings.HasSuffix(path, ".md"):
				md = append(md, path)
			case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
				code = append(code, path)
			}
			return nil
		})
	}
	sort.Strings(md)
	sort.Strings(code)
	for _, path := range md {
		add(path)
	}
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	for _, path := range code {
		if size > 3<<20 {
			break
		}
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, string(data))
		size += len(data)
	}
	return strings.Join(parts, "\n\n")
}

var chunkSink int

// BenchmarkRecursive512 compares Loom's recursive chunker, sized with exact cl100k_base counts, with
// langchaingo's RecursiveCharacter given a tiktoken length function, at 512 tokens with 50 of overlap.
func BenchmarkRecursive512(b *testing.B) {
	text := mixedCorpus(b)
	b.Logf("corpus: %d bytes", len(text))
	ctx := context.Background()
	loom := chunker.NewRecursive()
	opts := &chunker.Options{ChunkSize: 512, ChunkOverlap: 50, Counter: tokenizer.CL100K()}
	b.Run("loom", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			chunks, err := loom.Chunk(ctx, text, opts)
			if err != nil {
				b.Fatal(err)
			}
			chunkSink = len(chunks)
		}
	})
	peerCount, err := tiktokengo.Get(tiktokengo.Cl100kBase)
	if err != nil {
		b.Fatal(err)
	}
	langchain := func(lenFunc func(string) int) func(b *testing.B) {
		return func(b *testing.B) {
			splitter := textsplitter.NewRecursiveCharacter(
				textsplitter.WithChunkSize(512),
				textsplitter.WithChunkOverlap(50),
				textsplitter.WithLenFunc(lenFunc),
			)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				chunks, err := splitter.SplitText(text)
				if err != nil {
					b.Fatal(err)
				}
				chunkSink = len(chunks)
			}
		}
	}
	// How users wire it: a tiktoken port as the length function.
	b.Run("langchaingo+tiktoken-go", langchain(func(s string) int {
		n, _ := peerCount.Count(s)
		return n
	}))
	// The same splitter with Loom's counter: what is left is the splitting algorithm.
	b.Run("langchaingo+loom-count", langchain(tokenizer.CL100K().Count))
}
