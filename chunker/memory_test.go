package chunker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// peakChildEnv names the strategy and input a child process of the test binary measures (see TestMain).
const peakChildEnv = "LOOM_CHUNKER_PEAK_CHILD"

// memoryInputSize is the size of each input of BenchmarkChunkMemory; LOOM_CHUNKER_PEAK_SIZE (bytes) sets
// another, to see how the peak grows with the input.
var memoryInputSize = func() int {
	if n, err := strconv.Atoi(os.Getenv("LOOM_CHUNKER_PEAK_SIZE")); err == nil && n > 0 {
		return n
	}
	return 2 << 20
}()

// memoryInput returns the named input of BenchmarkChunkMemory, about memoryInputSize bytes, and the
// language for the code strategy.
func memoryInput(name string) (text, lang string, err error) {
	repeat := func(path, lang string) (string, string, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", "", err
		}
		return strings.Repeat(string(data)+"\n", memoryInputSize/len(data)+1)[:memoryInputSize], lang, nil
	}
	switch name {
	case "prose": // English prose: paragraphs and sentences
		return repeat(filepath.Join("..", "tokenizer", "testdata", "corpus", "english.txt"), "")
	case "markdown":
		return repeat(filepath.Join("testdata", "godebug.md"), "")
	case "go": // Go source
		return repeat(filepath.Join("..", "tokenizer", "testdata", "corpus", "code.go.txt"), "go")
	case "dense": // one line of JavaScript, a token every byte: the shape that peaked a server at 2.3 GB
		return "var a=" + strings.Repeat("1+", memoryInputSize/2) + "1;\n", "javascript", nil
	case "statements": // a short JavaScript statement on every line: a syntax node every 5 bytes
		return strings.Repeat("a=1;\n", memoryInputSize/5), "javascript", nil
	case "headings": // a Markdown heading on every line: a section every 4 bytes
		return strings.Repeat("# a\n", memoryInputSize/4), "", nil
	case "list": // a Markdown list item on every line: a block every 4 bytes
		return strings.Repeat("- a\n", memoryInputSize/4), "", nil
	}
	return "", "", fmt.Errorf("no input %q", name)
}

// memoryCases are the strategies and inputs BenchmarkChunkMemory measures.
var memoryCases = []struct{ strategy, input string }{
	{Recursive, "prose"}, {Recursive, "dense"},
	{Fixed, "prose"}, {Fixed, "dense"},
	{Sliding, "prose"}, {Sliding, "dense"},
	{Semantic, "prose"}, {Semantic, "dense"},
	{Markdown, "markdown"}, {Markdown, "dense"}, {Markdown, "headings"}, {Markdown, "list"},
	{Code, "go"}, {Code, "dense"}, {Code, "statements"}, {Code, "prose"},
}

func memoryOptions(strategy, lang string) *Options {
	opts := &Options{Strategy: strategy}
	if strategy == Code {
		opts.Language = lang
	}
	return opts
}

// TestMain runs the measurement of a child process when peakChildEnv names one, and the tests otherwise.
func TestMain(m *testing.M) {
	if spec := os.Getenv(peakChildEnv); spec != "" {
		peak, chunks, err := measurePeak(spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("peak %d chunks %d\n", peak, chunks)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// measurePeak chunks the input named by spec ("strategy/input") and returns how far the process's
// resident set rose above where it was before the call, in bytes: Go's heap and tree-sitter's C memory.
func measurePeak(spec string) (peak, chunks int, err error) {
	strategy, input, _ := strings.Cut(spec, "/")
	text, lang, err := memoryInput(input)
	if err != nil {
		return 0, 0, err
	}
	c, err := New(strategy)
	if err != nil {
		return 0, 0, err
	}
	// What is loaded once per process (the encoding's vocabulary, a grammar) is not the call's: a first call
	// on the start of the input loads it.
	if _, err := c.Chunk(context.Background(), text[:4096], memoryOptions(strategy, lang)); err != nil {
		return 0, 0, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, 0, fmt.Errorf("reset the peak: %w", err)
	}
	base, err := procStatus("VmRSS")
	if err != nil {
		return 0, 0, err
	}
	result, err := c.Chunk(context.Background(), text, memoryOptions(strategy, lang))
	if err != nil {
		return 0, 0, err
	}
	peak, err = procStatus("VmHWM")
	runtime.KeepAlive(result)
	return peak - base, len(result), err
}

// procStatus returns a memory figure of /proc/self/status in bytes.
func procStatus(key string) (int, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", key)
}

// BenchmarkChunkMemory reports the peak memory of chunking per MB of input ("peakMB/MB"), for every strategy,
// on prose and on the inputs that have made chunking blow up. The peak is the rise of the resident set
// (VmHWM, Linux) of a fresh child process chunking the input once, so that tree-sitter's C allocations,
// which Go's memory statistics do not see, are counted, and memory kept from earlier runs hides nothing.
// Run it with -benchtime=1x: the time and allocations it reports are those of the same call in this process.
// The peak includes the chunks returned, about 60 bytes each and their metadata maps (a few hundred bytes
// each with a heading path or code symbols): an input that makes a chunk every few bytes ("headings") is
// bounded by chunks/MB, which Options.MaxChunks caps.
func BenchmarkChunkMemory(b *testing.B) {
	for _, mc := range memoryCases {
		b.Run(mc.strategy+"/"+mc.input, func(b *testing.B) {
			text, lang, err := memoryInput(mc.input)
			if err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), peakChildEnv+"="+mc.strategy+"/"+mc.input)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("child: %v: %s", err, stderr.String())
			}
			var peak, chunks int
			if _, err := fmt.Sscanf(string(out), "peak %d chunks %d", &peak, &chunks); err != nil {
				b.Fatalf("child said %q: %v", out, err)
			}
			c, err := New(mc.strategy)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Chunk(context.Background(), text, memoryOptions(mc.strategy, lang)); err != nil {
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
