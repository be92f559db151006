package chunktest

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

// peakChildEnv names the case a child process of the test binary measures (see Main).
const peakChildEnv = "LOOM_CHUNKER_PEAK_CHILD"

// memoryInputSize is the size of each input of MemoryInput; LOOM_CHUNKER_PEAK_SIZE (bytes) sets another, to
// see how the peak grows with the input.
var memoryInputSize = func() int {
	if n, err := strconv.Atoi(os.Getenv("LOOM_CHUNKER_PEAK_SIZE")); err == nil && n > 0 {
		return n
	}
	return 2 << 20
}()

// MemoryInput returns the named input of the chunkers' memory benchmarks, about 2 MB, and the language for
// the code strategy. root is the path of the repository's root from the test's directory.
func MemoryInput(root, name string) (text, lang string, err error) {
	repeat := func(path, lang string) (string, string, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", "", err
		}
		return strings.Repeat(string(data)+"\n", memoryInputSize/len(data)+1)[:memoryInputSize], lang, nil
	}
	corpus := filepath.Join(root, "tokenizer", "testdata", "corpus")
	switch name {
	case "prose": // English prose: paragraphs and sentences
		return repeat(filepath.Join(corpus, "english.txt"), "")
	case "markdown":
		return repeat(filepath.Join(root, "chunker", "testdata", "godebug.md"), "")
	case "go": // Go source
		return repeat(filepath.Join(corpus, "code.go.txt"), "go")
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

// ChunkFunc chunks text once and returns how many chunks it made.
type ChunkFunc func(ctx context.Context, text string) (int, error)

// Case returns the text and the chunking of a memory benchmark's case, by name.
type Case func(name string) (text string, chunk ChunkFunc, err error)

// Main is the TestMain of a package with a memory benchmark: in a child process started by [MeasurePeak] it
// measures that case and exits; otherwise it runs the tests.
func Main(m *testing.M, cases Case) {
	if name := os.Getenv(peakChildEnv); name != "" {
		peak, chunks, err := measure(cases, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("peak %d chunks %d\n", peak, chunks)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// MeasurePeak returns how far the resident set (VmHWM, Linux) of a fresh child process of the test binary
// rose above where it was while chunking the named case once, in bytes, and how many chunks it made: Go's
// heap and C memory (tree-sitter's) alike, with nothing hidden by memory kept from earlier runs.
func MeasurePeak(b *testing.B, name string) (peak, chunks int) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peakChildEnv+"="+name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("child: %v: %s", err, stderr.String())
	}
	if _, err := fmt.Sscanf(string(out), "peak %d chunks %d", &peak, &chunks); err != nil {
		b.Fatalf("child said %q: %v", out, err)
	}
	return peak, chunks
}

// measure chunks the named case and returns how far the process's resident set rose above where it was
// before the call, in bytes.
func measure(cases Case, name string) (peak, chunks int, err error) {
	text, chunk, err := cases(name)
	if err != nil {
		return 0, 0, err
	}
	// What is loaded once per process (the encoding's vocabulary, a grammar) is not the call's: a first call
	// on the start of the input loads it.
	if _, err := chunk(context.Background(), text[:4096]); err != nil {
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
	if chunks, err = chunk(context.Background(), text); err != nil {
		return 0, 0, err
	}
	peak, err = procStatus("VmHWM")
	return peak - base, chunks, err
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
