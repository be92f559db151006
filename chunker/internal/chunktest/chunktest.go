// Package chunktest checks the promises of package chunker's documentation on one call's chunks, for the
// tests of package chunker and of the strategies in its subpackages (chunker/code). It does not import
// chunker, so that chunker's own tests can use it: chunks are any struct type with ChunkResult's fields.
package chunktest

import (
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/context-loom/loom/tokenizer"
)

// Spec is what the chunks were asked for, the options resolved: defaults applied.
type Spec struct {
	Strategy string
	Size     int // the chunk size, in tokens
	Overlap  int // the overlap, in tokens
	Counter  tokenizer.Counter
	// ExactOverlap says neighbours share exactly Overlap tokens (the fixed and sliding strategies); the
	// Counter must report token ends then.
	ExactOverlap bool
}

// Chunk is the shape of chunker.ChunkResult.
type Chunk = struct {
	Content     string
	Index       int
	StartOffset int
	EndOffset   int
	TokenCount  int
	Metadata    map[string]string
}

// Check asserts the package's promises (see package chunker's documentation) for chunks, made of text as
// s asks.
func Check[C ~struct {
	Content     string
	Index       int
	StartOffset int
	EndOffset   int
	TokenCount  int
	Metadata    map[string]string
}](t testing.TB, s Spec, text string, chunks []C) {
	t.Helper()
	if strings.TrimSpace(text) == "" {
		if len(chunks) != 0 {
			t.Fatalf("%s: whitespace-only text gave %d chunks", s.Strategy, len(chunks))
		}
		return
	}
	if len(chunks) == 0 {
		t.Fatalf("%s: no chunks for %q", s.Strategy, Clip(text))
	}
	bounds := GraphemeStarts(text)
	covered := make([]bool, len(text))
	w := &whole{text: text, ascii: isASCII(text), valid: utf8.ValidString(text), counter: s.Counter}
	for i := range chunks {
		ch := Chunk(chunks[i])
		// 1. Offsets into the original text.
		if ch.StartOffset < 0 || ch.EndOffset > len(text) || ch.StartOffset >= ch.EndOffset {
			t.Fatalf("%s: chunk %d has offsets [%d, %d) in a text of %d bytes", s.Strategy, i, ch.StartOffset, ch.EndOffset, len(text))
		}
		if text[ch.StartOffset:ch.EndOffset] != ch.Content {
			t.Fatalf("%s: chunk %d content %q is not text[%d:%d] = %q", s.Strategy, i, Clip(ch.Content), ch.StartOffset, ch.EndOffset, Clip(text[ch.StartOffset:ch.EndOffset]))
		}
		// 2. Exact count within the cap.
		if n := s.Counter.Count(ch.Content); n != ch.TokenCount {
			t.Fatalf("%s: chunk %d TokenCount %d, counter says %d", s.Strategy, i, ch.TokenCount, n)
		}
		if ch.TokenCount > s.Size {
			t.Fatalf("%s: chunk %d has %d tokens, size %d", s.Strategy, i, ch.TokenCount, s.Size)
		}
		// 3. Order and indexes.
		if ch.Index != i {
			t.Fatalf("%s: chunk %d has Index %d", s.Strategy, i, ch.Index)
		}
		if i > 0 {
			prev := Chunk(chunks[i-1])
			if ch.StartOffset <= prev.StartOffset || ch.EndOffset <= prev.EndOffset {
				t.Fatalf("%s: chunk %d [%d, %d) does not follow chunk %d [%d, %d)", s.Strategy, i, ch.StartOffset, ch.EndOffset, i-1, prev.StartOffset, prev.EndOffset)
			}
			checkOverlap(t, s, w, prev, ch)
		}
		for k := ch.StartOffset; k < ch.EndOffset; k++ {
			covered[k] = true
		}
		// 4. Character and grapheme boundaries.
		for _, off := range []int{ch.StartOffset, ch.EndOffset} {
			if CharStart(text, off) != off {
				t.Fatalf("%s: chunk %d boundary %d is inside a character of %q", s.Strategy, i, off, Clip(text))
			}
			if !bounds[off] && !clusterExceeds(text, off, s) {
				t.Fatalf("%s: chunk %d boundary %d is inside a grapheme cluster that fits; text %q, spec %+v, chunks %+v", s.Strategy, i, off, Clip(text), s, chunks[max(i-1, 0):i+1])
			}
		}
	}
	for k := 0; k < len(text); {
		r, w := utf8.DecodeRuneInString(text[k:])
		if !covered[k] && !unicode.IsSpace(r) {
			t.Fatalf("%s: byte %d (%q) is in no chunk", s.Strategy, k, r)
		}
		k += w
	}
}

// whole is what checkOverlap needs to know of the whole text, worked out once for all the chunks: once per
// pair of neighbours made the check quadratic in the text's length.
type whole struct {
	text         string
	ascii, valid bool
	counter      tokenizer.Counter
	ends         []int // the token ends of text, once tokenEnds made them
}

// tokenEnds returns where each token of the text ends, in order.
func (w *whole) tokenEnds() []int {
	if w.ends == nil {
		w.ends = w.counter.(tokenizer.TokenEnder).TokenEnds(w.text)
	}
	return w.ends
}

// checkOverlap asserts that neighbours share at most the overlap (exactly, with ExactOverlap).
func checkOverlap(t testing.TB, s Spec, w *whole, prev, next Chunk) {
	t.Helper()
	text := w.text
	if next.StartOffset >= prev.EndOffset {
		if s.Overlap > 0 && s.ExactOverlap && w.valid && w.ascii {
			t.Fatalf("%s: chunks [%d, %d) and [%d, %d) share nothing, overlap %d", s.Strategy, prev.StartOffset, prev.EndOffset, next.StartOffset, next.EndOffset, s.Overlap)
		}
		return
	}
	shared := text[next.StartOffset:prev.EndOffset]
	if s.ExactOverlap {
		if !w.ascii {
			return // edges may have moved to character boundaries
		}
		// The tokens that end in (next.StartOffset, prev.EndOffset]: the ends are in order.
		ends := w.tokenEnds()
		after := func(off int) int { return sort.Search(len(ends), func(i int) bool { return ends[i] > off }) }
		n := after(prev.EndOffset) - after(next.StartOffset)
		if n != s.Overlap && prev.TokenCount == s.Size {
			t.Fatalf("%s: neighbours share %d tokens (%q), want %d", s.Strategy, n, Clip(shared), s.Overlap)
		}
		return
	}
	if n := s.Counter.Count(shared); n > s.Overlap {
		t.Fatalf("%s: neighbours share %d tokens (%q), overlap is %d", s.Strategy, n, Clip(shared), s.Overlap)
	}
}

// GraphemeStarts returns the offsets of text where a grapheme cluster starts, and its end: where
// segmenting from each cluster start finds the next. starts[off] says whether one starts at off, for off
// from 0 to len(text).
func GraphemeStarts(text string) (starts []bool) {
	starts = make([]bool, len(text)+1)
	starts[0], starts[len(text)] = true, true
	for pos := 0; pos < len(text); {
		cluster, _, _, _ := uniseg.FirstGraphemeClusterInString(text[pos:], -1)
		pos += len(cluster)
		starts[pos] = true
	}
	return starts
}

// clusterExceeds reports whether the grapheme cluster containing byte off is larger than the size.
func clusterExceeds(text string, off int, s Spec) bool {
	rest, state, pos := text, -1, 0
	for len(rest) > 0 {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		if pos < off && off < pos+len(cluster) {
			return s.Counter.Count(cluster) > s.Size
		}
		pos += len(cluster)
	}
	return false
}

// CharStart moves off back to the start of the character it is inside of (a no-op at a boundary). Bytes of
// ill-formed UTF-8 are characters of their own.
func CharStart(text string, off int) int {
	for k := 1; k < utf8.UTFMax && off-k >= 0 && off < len(text); k++ {
		if r, w := utf8.DecodeRuneInString(text[off-k:]); w > k && (r != utf8.RuneError || w > 1) {
			return off - k
		}
	}
	return off
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Clip cuts s for a failure message.
func Clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
