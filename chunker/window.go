package chunker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tokenEnder is implemented by counters that report where each token ends, like *tokenizer.Encoding.
type tokenEnder interface {
	TokenEnds(text string) []int
}

// WindowChunker cuts exact token windows: each chunk is ChunkSize tokens of the text's encoding (the last
// one what remains) and starts ChunkSize-ChunkOverlap tokens after the one before, so neighbours share
// exactly ChunkOverlap tokens. A window stops at the first window that reaches the end of the text: no
// redundant tail window. Window edges that fall inside a character move back to its start.
//
// The fixed and sliding strategies are both window chunkers; sliding also records each window's token
// range in the metadata ("token_start", "token_end").
type WindowChunker struct {
	name     string
	withMeta bool
}

var _ Chunker = (*WindowChunker)(nil)

// NewFixed returns the fixed strategy: exact token windows.
func NewFixed() *WindowChunker { return &WindowChunker{name: Fixed} }

// NewSliding returns the sliding strategy: exact token windows that record their token range.
func NewSliding() *WindowChunker { return &WindowChunker{name: Sliding, withMeta: true} }

// Chunk splits text. The options' Counter must report token offsets (a *tokenizer.Encoding does; see
// [ErrNoTokenOffsets]).
func (w *WindowChunker) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	c, err := resolve(w.name, opts)
	if err != nil {
		return nil, err
	}
	te, ok := c.counter.(tokenEnder)
	if !ok {
		return nil, fmt.Errorf("%w: the %s strategy, with a %T", ErrNoTokenOffsets, w.name, c.counter)
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	ends := te.TokenEnds(text)
	b := newBuilder(ctx, text, c)
	for start := 0; start < len(text); {
		if err := b.err(); err != nil {
			return nil, err
		}
		// Tokens [first, last): from the first that ends after start.
		first, _ := slices.BinarySearch(ends, start+1)
		last := min(first+c.size, len(ends))
		end, n, err := w.fit(b, start, ends, first, last)
		if err != nil {
			return nil, err
		}
		if prevEnd := b.lastEnd(); end <= prevEnd && start < prevEnd {
			// The overlap leaves no room to reach past the last window (a large cluster follows): drop it.
			start = prevEnd
			if end, n, err = w.fit(b, start, ends, first, last); err != nil {
				return nil, err
			}
		}
		var meta map[string]string
		if w.withMeta {
			meta = map[string]string{"token_start": strconv.Itoa(first), "token_end": strconv.Itoa(last)}
		}
		b.emit(start, end, n, meta)
		if end == len(text) {
			break
		}
		// The next window starts overlap tokens before the first token this one did not take whole (a window
		// that gave up tokens at its end leaves them to the next), and after this one's start.
		taken, _ := slices.BinarySearch(ends, end+1)
		next := max(taken-c.overlap, first+1)
		// Its start moves back to a cluster boundary; forward (less overlap) if that is not after this start.
		nextStart := b.clusterStart(ends[next-1])
		if nextStart <= start {
			nextStart = b.nextCluster(ends[next-1])
		}
		if nextStart <= start {
			nextStart = end
		}
		start = min(nextStart, end)
	}
	return b.result()
}

// fit returns the end of the window of tokens [first, last) that starts at byte start and its exact count.
// The end moves back to a grapheme cluster boundary, or to a character boundary where no cluster boundary
// gives a window; and tokens come off the end while the window's own encoding has more than the size
// (re-encoding a window can merge differently at its edges).
func (w *WindowChunker) fit(b *builder, start int, ends []int, first, last int) (int, int, error) {
	for _, snap := range []func(int) int{
		b.clusterStart,
		func(off int) int { return charStart(b.text, off) },
	} {
		for k := last; k > first; k-- {
			end := len(b.text)
			if k < len(ends) {
				end = snap(ends[k-1])
			}
			if end <= start {
				continue
			}
			if n, ok := b.fits(b.text[start:end], b.size); ok {
				return end, n, nil
			}
		}
		// The window's tokens end inside the cluster at start, which may still fit whole (its own encoding can
		// have fewer tokens than it has in the text).
		if end := b.nextCluster(start); last < len(ends) {
			if n, ok := b.fits(b.text[start:end], b.size); ok {
				return end, n, nil
			}
		}
	}
	// One character is more tokens than the size.
	_, width := utf8.DecodeRuneInString(b.text[start:])
	return 0, 0, fmt.Errorf("%w: %q at byte %d, size %d", ErrSizeTooSmall, b.text[start:start+width], start, b.size)
}

// charStart moves off back to the start of the character it is inside of (a no-op at a boundary). Bytes of
// ill-formed UTF-8 are characters of their own.
func charStart(text string, off int) int {
	for k := 1; k < utf8.UTFMax && off-k >= 0 && off < len(text); k++ {
		if r, w := utf8.DecodeRuneInString(text[off-k:]); w > k && (r != utf8.RuneError || w > 1) {
			return off - k
		}
	}
	return off
}
