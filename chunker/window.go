package chunker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/context-loom/loom/tokenizer"
)

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
	te, ok := c.counter.(tokenizer.TokenEnder)
	if !ok {
		return nil, fmt.Errorf("%w: the %s strategy, with a %T", ErrNoTokenOffsets, w.name, c.counter)
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	b := newBuilder(ctx, text, c)
	toks := &tokenStream{te: te, text: text}
	toks.split, _ = c.counter.(tokenizer.Splitter)
	for start := 0; start < len(text); {
		if err := b.err(); err != nil {
			return nil, err
		}
		// Tokens [first, last): from the first that ends after start. ends holds one token more than the
		// window, unless the text ends before.
		first := toks.search(start + 1)
		toks.fill(first + c.size + 1)
		first = toks.trim(first)
		ends := toks.ends
		last := min(first+c.size, len(ends))
		end, n, err := w.fit(b, start, ends, first, last, toks.done == len(text))
		if err != nil {
			return nil, err
		}
		if prevEnd := b.lastEnd(); end <= prevEnd && start < prevEnd {
			// The overlap leaves no room to reach past the last window (a large cluster follows): drop it.
			start = prevEnd
			if end, n, err = w.fit(b, start, ends, first, last, toks.done == len(text)); err != nil {
				return nil, err
			}
		}
		var meta map[string]string
		if w.withMeta {
			meta = map[string]string{"token_start": strconv.Itoa(toks.base + first), "token_end": strconv.Itoa(toks.base + last)}
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
func (w *WindowChunker) fit(b *builder, start int, ends []int, first, last int, all bool) (int, int, error) {
	for _, snap := range []func(int) int{
		b.clusterStart,
		func(off int) int { return charStart(b.text, off) },
	} {
		for k := last; k > first; k-- {
			end := len(b.text)
			if k < len(ends) || !all {
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
		if end := b.nextCluster(start); last < len(ends) || !all {
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

// tokenSegment is the size of text whose tokens a tokenStream reads at a time.
const tokenSegment = 64 << 10

// tokenStream reads the token ends of a text segment by segment, where the counter vouches that the
// encoding splits the text (see tokenizer.Splitter), so that a window chunker holds the ends of about one segment and
// one window, not of the whole text. Without such a place (one line with no space), a segment runs on.
type tokenStream struct {
	te    tokenizer.TokenEnder
	split tokenizer.Splitter // nil: one segment
	text  string
	ends  []int // the ends of tokens base, base+1, ...: byte offsets in text
	base  int
	done  int // the tokens of text[:done] are read
}

// fill reads segments until ends holds n tokens or the text is read.
func (t *tokenStream) fill(n int) {
	for len(t.ends) < n && t.done < len(t.text) {
		from, to := t.done, len(t.text)
		if t.split != nil && to-from > tokenSegment {
			to = from + tokenSegment
			for to < len(t.text) && !t.split.SplitsAt(t.text[from:], to-from) {
				to++
			}
		}
		ends := t.te.TokenEnds(t.text[from:to])
		if len(t.ends) == 0 { // no copy of a segment as long as the text
			for i := range ends {
				ends[i] += from
			}
			t.ends = ends
		} else {
			for _, e := range ends {
				t.ends = append(t.ends, from+e)
			}
		}
		t.done = to
	}
}

// search returns the index in ends of the first token that ends at or after off, reading on as needed.
func (t *tokenStream) search(off int) int {
	for {
		if i, _ := slices.BinarySearch(t.ends, off); i < len(t.ends) || t.done == len(t.text) {
			return i
		}
		t.fill(len(t.ends) + 1)
	}
}

// trim drops the ends before index i, once they are many, and returns i's new index.
func (t *tokenStream) trim(i int) int {
	if i < tokenSegment/8 || i < len(t.ends)/2 {
		return i
	}
	m := copy(t.ends, t.ends[i:])
	t.ends = t.ends[:m]
	t.base += i
	return 0
}
