package chunker

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// TestMaxChunks_StopsAsSoonAsPassed checks every strategy: the limit is an error wrapping ErrTooManyChunks
// once one chunk more would be made, a text of exactly the limit is chunked, and the strategies that count
// as they go stop counting early.
func TestMaxChunks_StopsAsSoonAsPassed(t *testing.T) {
	t.Parallel()
	text := strings.Repeat(corpus(t)["english.txt"][:20000]+"\n\n", 4)
	for _, strategy := range builtin {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			c, err := New(strategy)
			if err != nil {
				t.Fatal(err)
			}
			all, err := c.Chunk(context.Background(), text, &Options{ChunkSize: 64})
			if err != nil {
				t.Fatal(err)
			}
			n := len(all)
			got, err := c.Chunk(context.Background(), text, &Options{ChunkSize: 64, MaxChunks: n})
			if err != nil || len(got) != n {
				t.Fatalf("MaxChunks %d: %d chunks, %v", n, len(got), err)
			}
			got, err = c.Chunk(context.Background(), text, &Options{ChunkSize: 64, MaxChunks: n - 1})
			if !errors.Is(err, ErrTooManyChunks) || got != nil || IsOptionError(err) {
				t.Fatalf("MaxChunks %d of %d: %d chunks, %v; want ErrTooManyChunks", n-1, n, len(got), err)
			}
			if strategy == Fixed || strategy == Sliding || strategy == Semantic {
				return // they tokenize or embed the whole text first
			}
			whole := &callCounter{}
			if _, err := c.Chunk(context.Background(), text, &Options{ChunkSize: 64, Counter: whole}); err != nil {
				t.Fatal(err)
			}
			limited := &callCounter{}
			if _, err := c.Chunk(context.Background(), text, &Options{ChunkSize: 64, MaxChunks: 3, Counter: limited}); !errors.Is(err, ErrTooManyChunks) {
				t.Fatalf("MaxChunks 3: %v", err)
			}
			if limited.calls.Load() > whole.calls.Load()/4 {
				t.Errorf("%d counts before stopping at 3 chunks, %d for all %d", limited.calls.Load(), whole.calls.Load(), n)
			}
		})
	}
	if _, err := NewRecursive().Chunk(context.Background(), text, &Options{MaxChunks: -1}); !errors.Is(err, ErrNegativeLimit) || !IsOptionError(err) {
		t.Errorf("MaxChunks -1: %v", err)
	}
}

// callCounter is cl100k_base that counts its calls.
type callCounter struct{ calls atomic.Int64 }

func (c *callCounter) Count(s string) int {
	c.calls.Add(1)
	return tokenizer.CL100K().Count(s)
}

func (c *callCounter) CountUpTo(s string, limit int) (int, bool) {
	c.calls.Add(1)
	return tokenizer.CL100K().CountUpTo(s, limit)
}

// TestWindow_ReadsTokensBySegment checks that a text of many segments (see tokenStream) gets the windows
// and token ranges of its whole encoding.
func TestWindow_ReadsTokensBySegment(t *testing.T) {
	t.Parallel()
	text := strings.Repeat(corpus(t)["english.txt"], 2)
	enc := tokenizer.CL100K()
	ends := enc.TokenEnds(text)
	opts := Options{ChunkSize: 300, ChunkOverlap: 40}
	chunks, err := NewSliding().Chunk(context.Background(), text, &opts)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, Sliding, text, opts, chunks)
	for _, ch := range chunks {
		first, _ := slices.BinarySearch(ends, ch.StartOffset+1)
		last := min(first+opts.ChunkSize, len(ends))
		if ch.Metadata["token_start"] != strconv.Itoa(first) || ch.Metadata["token_end"] != strconv.Itoa(last) {
			t.Fatalf("chunk %d at byte %d: tokens [%s, %s), want [%d, %d)", ch.Index, ch.StartOffset,
				ch.Metadata["token_start"], ch.Metadata["token_end"], first, last)
		}
	}
}

// TestChunk_DenseLineAllocatesLittle chunks one line of a token every byte, the shape of a JavaScript file
// that took a server to 2.5 GB: what every strategy allocates stays a small multiple of the text. (The
// peak, C memory included, is BenchmarkChunkMemory's.) The window strategies are left out: they hold the
// text's token ends, as the encoding gives them for a line it cannot split.
func TestChunk_DenseLineAllocatesLittle(t *testing.T) {
	text := "var a=" + strings.Repeat("1+", 256<<10) + "1;\n"
	for _, tc := range []struct{ strategy, lang string }{{Recursive, ""}, {Semantic, ""}, {Markdown, ""}, {Code, "javascript"}, {Code, ""}} {
		c, err := New(tc.strategy)
		if err != nil {
			t.Fatal(err)
		}
		// Bytes for tokens: what is measured is the chunker's, not the encoding's (whose scratch pool the race
		// detector empties at random).
		opts := &Options{Language: tc.lang, Counter: tokenizer.CounterFunc(func(s string) int { return len(s) })}
		if _, err := c.Chunk(context.Background(), text[:1000], opts); err != nil { // what loads once
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		chunks, err := c.Chunk(context.Background(), text, opts)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 4*uint64(len(text)) {
			t.Errorf("%s %s: %d chunks of a %d-byte line allocated %.1f bytes a byte", tc.strategy, tc.lang, len(chunks),
				len(text), float64(allocated)/float64(len(text)))
		}
	}
}
