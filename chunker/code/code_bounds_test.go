//go:build cgo

package code

import (
	"context"
	"errors"
	"flag"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/chunker/internal/chunktest"
	"github.com/context-loom/loom/ingest"
)

// spinningTypeScript made tree-sitter's TypeScript grammar recover from errors without end: a parse of
// these 19 bytes never finished.
const spinningTypeScript = "''</</-[\" \n/e}x?@b "

func TestCode_SpinningParseFallsBackToText(t *testing.T) {
	t.Parallel()
	for _, text := range []string{spinningTypeScript, codeFiles(t)["cache.ts"] + spinningTypeScript, strings.Repeat(spinningTypeScript+"\n", 100)} {
		opts := chunker.Options{ChunkSize: 64, Language: "typescript"}
		chunks, err := New().Chunk(context.Background(), text, &opts)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, text, opts, chunks)
		for _, ch := range chunks {
			if ch.Metadata[chunker.MetaParse] != chunker.ParseFallback || ch.Metadata[chunker.MetaParseReason] != chunker.FallbackTimeout ||
				ch.Metadata["language"] != "typescript" || ch.Metadata["kind"] != kindText {
				t.Fatalf("%d bytes: chunk %d metadata %v, want a fallback for a timeout", len(text), ch.Index, ch.Metadata)
			}
		}
	}
}

func TestCode_ParsedChunksHaveNoFallbackFlag(t *testing.T) {
	t.Parallel()
	for name, text := range codeFiles(t) {
		for _, ch := range chunkCode(t, name, text, 100, 10) {
			if _, ok := ch.Metadata[chunker.MetaParse]; ok {
				t.Fatalf("%s: chunk %d has %s=%q", name, ch.Index, chunker.MetaParse, ch.Metadata[chunker.MetaParse])
			}
		}
	}
}

// TestCode_CallersContextEndsAParse checks that a parse that the caller's ctx ends is an error, not a
// fallback: the chunker's own time bound is made longer than the test.
func TestCode_CallersContextEndsAParse(t *testing.T) {
	t.Parallel()
	c := New()
	c.timeout = func(int) time.Duration { return time.Hour }
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	chunks, err := c.Chunk(ctx, spinningTypeScript, &chunker.Options{Language: "typescript"})
	if !errors.Is(err, context.DeadlineExceeded) || chunks != nil {
		t.Fatalf("got %d chunks, error %v; want the context's error", len(chunks), err)
	}
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	const limit = 40
	tests := []struct {
		name, text string
		end        int // of the first window
		whole      bool
	}{
		{"short", "func a() {}\n", 12, true},
		{"after a blank line", "func a() {\n\tx()\n}\n\nfunc b() {\n\ty()\n}\n" + strings.Repeat("z", 40), 19, true},
		{"column 0, not a bracket", "func a() {\n\tx()\n\ty()\n}\nfunc b() {\n\tyy()\n}\n" + strings.Repeat("z", 40), 23, true},
		{"any line start", "\tfunc a() {\n\t\tx()\n\t}\n\tfunc b() {\n\t\tyy()\n\t}\n" + strings.Repeat("z", 40), 40, true},
		{"one long line", strings.Repeat("x", 50) + "\nnext\n" + strings.Repeat("z", 40), 51, false},
		{"one long line at the end", strings.Repeat("x", 50), 50, false},
	}
	for _, tc := range tests {
		end, whole := parseWindow(tc.text, 0, limit)
		if end != tc.end || whole != tc.whole {
			t.Errorf("%s: window [0, %d) whole %v, want [0, %d) %v", tc.name, end, whole, tc.end, tc.whole)
		}
		if whole && end > limit && end != len(tc.text) {
			t.Errorf("%s: window of %d bytes, limit %d", tc.name, end, limit)
		}
	}
}

// TestCode_LargeTextIsParsedInWindows chunks a text larger than the parse limit: every window is parsed
// (the symbols of every copy are found), and a line longer than the limit falls back.
func TestCode_LargeTextIsParsedInWindows(t *testing.T) {
	t.Parallel()
	file := codeFiles(t)["server.go"]
	text := strings.Repeat(file, 4) + "var long = \"" + strings.Repeat("x", len(file)+200) + "\"\n" + file
	c := New()
	c.maxParse = len(file) + 100
	opts := chunker.Options{ChunkSize: 200, Language: "go"}
	chunks, err := c.Chunk(context.Background(), text, &opts)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, text, opts, chunks)
	whole, err := New().Chunk(context.Background(), file, &opts)
	if err != nil {
		t.Fatal(err)
	}
	var symbols []string
	for _, ch := range whole {
		if ch.Metadata["symbols"] != "" {
			symbols = append(symbols, strings.Split(ch.Metadata["symbols"], ",")...)
		}
	}
	found := map[string]int{}
	lines := strings.Count(file, "\n")
	for _, ch := range chunks {
		for _, s := range strings.Split(ch.Metadata["symbols"], ",") {
			found[s]++
		}
		if ch.Metadata[chunker.MetaParse] == chunker.ParseFallback && ch.Metadata[chunker.MetaParseReason] != chunker.FallbackTooLarge {
			t.Errorf("chunk %d falls back for %q", ch.Index, ch.Metadata[chunker.MetaParseReason])
		}
		// Line numbers count from the start of the text, not of the window.
		if want := strings.Count(text[:ch.StartOffset+len(ch.Content)-len(strings.TrimLeft(ch.Content, " \t\r\n"))], "\n") + 1; ch.Metadata["start_line"] != strconv.Itoa(want) {
			t.Fatalf("chunk %d start_line %s, want %d", ch.Index, ch.Metadata["start_line"], want)
		}
	}
	for _, s := range symbols {
		if found[s] < 5 {
			t.Errorf("symbol %q in %d chunks, want it in each of the 5 copies", s, found[s])
		}
	}
	if chunks[len(chunks)-1].Metadata["end_line"] != strconv.Itoa(5*lines+1) {
		t.Errorf("last chunk ends at line %s, want %d", chunks[len(chunks)-1].Metadata["end_line"], 5*lines+1)
	}
	fallbacks := 0
	longStart := strings.Index(text, "var long")
	longEnd := longStart + strings.IndexByte(text[longStart:], '\n') + 1
	for _, ch := range chunks {
		if ch.Metadata[chunker.MetaParse] == chunker.ParseFallback {
			fallbacks++
			if ch.StartOffset < longStart || ch.EndOffset > longEnd {
				t.Errorf("chunk %d falls back but is not the long line: %q", ch.Index, chunktest.Clip(ch.Content))
			}
		}
	}
	if fallbacks == 0 {
		t.Error("the line longer than the parse limit was parsed")
	}
}

// fuzzTextSize is the size of the texts the fuzz targets make: 64 KB when fuzzing (go test -fuzz) or with
// LOOM_FULL_SWEEPS=1 (the nightly size); 16 KB for the seeds of a plain run, where the seven targets' 150
// seeds at 64 KB took three minutes of one core, most of `make test`'s run without the race detector; and
// maxPropertyText under the detector. Every seed still runs, each pathological shape repeated to fill it.
func fuzzTextSize() int {
	if os.Getenv("LOOM_FULL_SWEEPS") == "1" || flag.Lookup("test.fuzz").Value.String() != "" {
		return 64 << 10
	}
	return min(16<<10, maxPropertyText())
}

// fuzzParse checks, for one grammar, that chunking any text of up to fuzzTextSize keeps the invariants
// and takes less than a second of the thread's CPU time (tree-sitter's parse runs on the calling thread;
// CPU time, unlike wall time, does not grow when the machine is busy). repeat/255 of it is filled with
// copies of the text the fuzzer made, which is how small pathological inputs become slow ones.
func fuzzParse(f *testing.F, lang string) {
	for name, text := range codeFiles(f) {
		if ingest.LanguageForFile(name) == lang {
			f.Add(text, uint8(100), uint8(0))
		}
	}
	for _, tc := range brokenSources {
		if tc.lang == lang {
			f.Add(tc.src, uint8(40), uint8(3))
		}
	}
	f.Add(spinningTypeScript, uint8(40), uint8(0))
	f.Add(spinningTypeScript, uint8(40), uint8(255))
	// Shapes that are slow for parsers or for the walk of the tree, each repeated up to 64 KB: deep nesting,
	// unclosed strings and comments, a node every two bytes, long lines.
	for _, pattern := range []string{"{\n", "(", "[", "if x {\n", "f(\n", "\"", "/*", "`${", "<a>", "'", "a=1;\n", "1+", "x ", "\n", "\t\t", "#", "//\n"} {
		f.Add(pattern, uint8(92), uint8(255))
	}
	f.Fuzz(func(t *testing.T, text string, size, repeat uint8) {
		maxText := fuzzTextSize()
		if len(text) > maxText {
			text = text[:maxText]
		}
		if fill := maxText * int(repeat) / 255; fill > len(text) && text != "" {
			text = strings.Repeat(text, fill/len(text)+1)[:fill]
		}
		opts := chunker.Options{ChunkSize: 8 + int(size), Language: lang}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before, measured := threadCPU()
		chunks, err := New().Chunk(context.Background(), text, &opts)
		after, _ := threadCPU()
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if used := time.Duration(after - before); measured && used > time.Second {
			t.Fatalf("%s: %d bytes took %v of CPU time", lang, len(text), used)
		}
		checkInvariants(t, text, opts, chunks)
	})
}

func FuzzParseGo(f *testing.F)         { fuzzParse(f, "go") }
func FuzzParsePython(f *testing.F)     { fuzzParse(f, "python") }
func FuzzParseJavaScript(f *testing.F) { fuzzParse(f, "javascript") }
func FuzzParseTypeScript(f *testing.F) { fuzzParse(f, "typescript") }
func FuzzParseTSX(f *testing.F)        { fuzzParse(f, "tsx") }
func FuzzParseRust(f *testing.F)       { fuzzParse(f, "rust") }
func FuzzParseJava(f *testing.F)       { fuzzParse(f, "java") }
