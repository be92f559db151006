package chunker

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/context-loom/loom/tokenizer"
)

// checkInvariants asserts the package's promises (see the package documentation) for one call's result.
func checkInvariants(t testing.TB, strategy, text string, opts Options, chunks []ChunkResult) {
	t.Helper()
	c, err := resolve(strategy, &opts)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if strings.TrimSpace(text) == "" {
		if len(chunks) != 0 {
			t.Fatalf("%s: whitespace-only text gave %d chunks", strategy, len(chunks))
		}
		return
	}
	if len(chunks) == 0 {
		t.Fatalf("%s: no chunks for %q", strategy, clip(text))
	}
	bounds := map[int]bool{}
	for _, b := range cutsOf(graphemeCuts, text, 0, len(text)) {
		bounds[b] = true
	}
	bounds[0], bounds[len(text)] = true, true
	covered := make([]bool, len(text))
	for i, ch := range chunks {
		// 1. Offsets into the original text.
		if ch.StartOffset < 0 || ch.EndOffset > len(text) || ch.StartOffset >= ch.EndOffset {
			t.Fatalf("%s: chunk %d has offsets [%d, %d) in a text of %d bytes", strategy, i, ch.StartOffset, ch.EndOffset, len(text))
		}
		if text[ch.StartOffset:ch.EndOffset] != ch.Content {
			t.Fatalf("%s: chunk %d content %q is not text[%d:%d] = %q", strategy, i, clip(ch.Content), ch.StartOffset, ch.EndOffset, clip(text[ch.StartOffset:ch.EndOffset]))
		}
		// 2. Exact count within the cap.
		if n := c.counter.Count(ch.Content); n != ch.TokenCount {
			t.Fatalf("%s: chunk %d TokenCount %d, counter says %d", strategy, i, ch.TokenCount, n)
		}
		if ch.TokenCount > c.size {
			t.Fatalf("%s: chunk %d has %d tokens, size %d", strategy, i, ch.TokenCount, c.size)
		}
		// 3. Order and indexes.
		if ch.Index != i {
			t.Fatalf("%s: chunk %d has Index %d", strategy, i, ch.Index)
		}
		if i > 0 {
			prev := chunks[i-1]
			if ch.StartOffset <= prev.StartOffset || ch.EndOffset <= prev.EndOffset {
				t.Fatalf("%s: chunk %d [%d, %d) does not follow chunk %d [%d, %d)", strategy, i, ch.StartOffset, ch.EndOffset, i-1, prev.StartOffset, prev.EndOffset)
			}
			checkOverlap(t, strategy, text, c, prev, ch)
		}
		for k := ch.StartOffset; k < ch.EndOffset; k++ {
			covered[k] = true
		}
		// 4. Character and grapheme boundaries.
		for _, off := range []int{ch.StartOffset, ch.EndOffset} {
			if charStart(text, off) != off {
				t.Fatalf("%s: chunk %d boundary %d is inside a character of %q", strategy, i, off, clip(text))
			}
			if !bounds[off] && !clusterExceeds(text, off, c) {
				t.Fatalf("%s: chunk %d boundary %d is inside a grapheme cluster that fits; text %q, options %+v, chunks %+v", strategy, i, off, clip(text), opts, chunks[max(i-1, 0):i+1])
			}
		}
	}
	for k := 0; k < len(text); {
		r, w := utf8.DecodeRuneInString(text[k:])
		if !covered[k] && !unicode.IsSpace(r) {
			t.Fatalf("%s: byte %d (%q) is in no chunk", strategy, k, r)
		}
		k += w
	}
}

// checkOverlap asserts that neighbours share at most the overlap (exactly, for the window strategies).
func checkOverlap(t testing.TB, strategy, text string, c config, prev, next ChunkResult) {
	t.Helper()
	if next.StartOffset >= prev.EndOffset {
		if c.overlap > 0 && (strategy == Fixed || strategy == Sliding) && utf8.ValidString(text) && isASCII(text) {
			t.Fatalf("%s: chunks [%d, %d) and [%d, %d) share nothing, overlap %d", strategy, prev.StartOffset, prev.EndOffset, next.StartOffset, next.EndOffset, c.overlap)
		}
		return
	}
	shared := text[next.StartOffset:prev.EndOffset]
	if strategy == Fixed || strategy == Sliding {
		if !isASCII(text) {
			return // edges may have moved to character boundaries
		}
		ends := c.counter.(tokenEnder).TokenEnds(text)
		n := 0
		for _, e := range ends {
			if e > next.StartOffset && e <= prev.EndOffset {
				n++
			}
		}
		if n != c.overlap && prev.TokenCount == c.size {
			t.Fatalf("%s: neighbours share %d tokens (%q), want %d", strategy, n, clip(shared), c.overlap)
		}
		return
	}
	if n := c.counter.Count(shared); n > c.overlap {
		t.Fatalf("%s: neighbours share %d tokens (%q), overlap is %d", strategy, n, clip(shared), c.overlap)
	}
}

// clusterExceeds reports whether the grapheme cluster containing byte off is larger than the size.
func clusterExceeds(text string, off int, c config) bool {
	rest, state, pos := text, -1, 0
	for len(rest) > 0 {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		if pos < off && off < pos+len(cluster) {
			return c.counter.Count(cluster) > c.size
		}
		pos += len(cluster)
	}
	return false
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

var _ tokenizer.Counter = tokenizer.CounterFunc(nil)
