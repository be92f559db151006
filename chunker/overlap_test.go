package chunker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// overlapStats returns how many neighbouring chunks share text, out of how many pairs, and the mean
// number of tokens they share (over all pairs).
func overlapStats(chunks []ChunkResult, text string) (overlapping, pairs int, mean float64) {
	total := 0
	for i := 1; i < len(chunks); i++ {
		pairs++
		prev, next := chunks[i-1], chunks[i]
		if next.StartOffset < prev.EndOffset {
			overlapping++
			total += tokenizer.CL100K().Count(text[next.StartOffset:prev.EndOffset])
		}
	}
	return overlapping, pairs, float64(total) / float64(max(pairs, 1))
}

// TestRecursive_OverlapComesCloseToChunkOverlap chunks prose of long sentences (the GPL's text), where
// the last unit of a chunk is mostly larger than the overlap: neighbours must still share close to
// ChunkOverlap tokens, cut from the end of that unit at sentences and words.
func TestRecursive_OverlapComesCloseToChunkOverlap(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "gpl-3.0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, tc := range []struct{ size, overlap int }{{200, 30}, {512, 50}, {100, 20}} {
		opts := Options{ChunkSize: tc.size, ChunkOverlap: tc.overlap}
		chunks, err := NewRecursive().Chunk(context.Background(), text, &opts)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, Recursive, text, opts, chunks)
		overlapping, pairs, mean := overlapStats(chunks, text)
		t.Logf("size %d, overlap %d: %d of %d neighbours overlap, %.1f tokens shared on average", tc.size, tc.overlap, overlapping, pairs, mean)
		if overlapping < pairs*9/10 {
			t.Errorf("size %d, overlap %d: only %d of %d neighbours overlap", tc.size, tc.overlap, overlapping, pairs)
		}
		if mean < 0.7*float64(tc.overlap) {
			t.Errorf("size %d, overlap %d: neighbours share %.1f tokens on average", tc.size, tc.overlap, mean)
		}
	}
}

// TestRecursive_CountsEachByteABoundedNumberOfTimes checks invariant 7 with a counter that counts whole
// strings (no early stop), overlap cut from long units included.
func TestRecursive_CountsEachByteABoundedNumberOfTimes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "gpl-3.0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, tc := range []struct{ size, overlap int }{{100, 20}, {200, 30}, {512, 50}, {2048, 200}} {
		var counted int
		counter := tokenizer.CounterFunc(func(s string) int {
			counted += len(s)
			return tokenizer.CL100K().Count(s)
		})
		if _, err := NewRecursive().Chunk(context.Background(), text, &Options{ChunkSize: tc.size, ChunkOverlap: tc.overlap, Counter: counter}); err != nil {
			t.Fatal(err)
		}
		ratio := float64(counted) / float64(len(text))
		t.Logf("size %d, overlap %d: %.1f bytes counted per byte", tc.size, tc.overlap, ratio)
		if ratio > 8 {
			t.Errorf("size %d, overlap %d: counted %.1f bytes per byte of text", tc.size, tc.overlap, ratio)
		}
	}
}
