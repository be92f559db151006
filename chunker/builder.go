package chunker

import (
	"context"
	"strings"
)

// Builder makes the chunks of one text for a strategy of another package, with the machinery of this
// package's own: the strategy finds the units of its text (declarations, sections, ...), and the Builder
// packs them into chunks or splits a span at [SplitFunc] levels, so that the chunks keep the promises of the
// package documentation (offsets into the text, exact counts within the size, the overlap, no cut inside a
// grapheme cluster, [Options.MaxChunks]). The code strategy of package chunker/code is built on it.
//
// A Builder serves one call of a chunker; it is not safe for concurrent use.
type Builder struct {
	b *builder
}

// NewBuilder validates opts for the strategy called strategy, applies the defaults of zero options, and
// returns a builder of the chunks of text. It returns the errors of invalid options that [Options] lists;
// an option of another strategy is one ([ErrNotApplicable]), and so is opts.Strategy naming another
// ([ErrStrategyMismatch]). Once ctx is done, [Builder.Err] returns its error and no chunk is made.
func NewBuilder(ctx context.Context, strategy, text string, opts *Options) (*Builder, error) {
	c, err := resolve(strategy, opts)
	if err != nil {
		return nil, err
	}
	return &Builder{newBuilder(ctx, text, c)}, nil
}

// Text returns the text the builder chunks.
func (b *Builder) Text() string { return b.b.text }

// Size returns the most tokens a chunk may have: [Options.ChunkSize], or its default.
func (b *Builder) Size() int { return b.b.size }

// Fits counts s with the options' counter, stopping early once past the size where the counter can: it
// returns the exact count and true when s fits in one chunk.
func (b *Builder) Fits(s string) (tokens int, ok bool) { return b.b.fits(s, b.b.size) }

// IsBoundary reports whether a grapheme cluster starts at byte p of the text, so that a chunk may start or
// end there (true at 0 and at the end of the text).
func (b *Builder) IsBoundary(p int) bool { return b.b.isBoundary(p) }

// A Unit is a span of the text, Text()[Start:End], that no chunk boundary may cut, with its exact count.
type Unit struct {
	Start, End, Tokens int
}

// Pack makes chunks of consecutive units, in order, each of which fits in a chunk (see [Builder.Fits]) and
// none of which is before the end of the last chunk made: as many whole units to a chunk as fit, and
// neighbours share the last whole units of a chunk, up to the overlap. Units are counted again where they
// join (tokens can merge differently across a join), so a chunk holds fewer units rather than more tokens
// than the size. Each call starts afresh: its first chunk shares nothing with the chunks made before it.
func (b *Builder) Pack(units []Unit) {
	p := b.b.packer()
	for _, u := range units {
		p.add(unit{start: u.Start, end: u.End, tokens: u.Tokens})
	}
	p.flush()
}

// Split chunks Text()[start:end], which must not be before the end of the last chunk made, the way the
// recursive strategy chunks a text: whole if it fits, else cut at the first of levels that cuts it, the
// parts that fit packed together and each one that does not split at the levels after; past the last
// level, between grapheme clusters, and a cluster larger than the size between characters. It returns
// [Builder.Err]'s error, or one wrapping [ErrSizeTooSmall] when one character is larger than the size.
func (b *Builder) Split(start, end int, levels ...SplitFunc) error {
	return b.b.chunkSpan(start, end, levels, nil)
}

// Err returns why chunking must stop: an error wrapping [ErrTooManyChunks] once one chunk more than
// [Options.MaxChunks] was to be made, or the context's error once it is done; else nil.
func (b *Builder) Err() error { return b.b.err() }

// Chunks returns the chunks made so far, in order. A strategy may set their Metadata; nothing else of them
// is its to change.
func (b *Builder) Chunks() []ChunkResult { return b.b.chunks }

// Result returns the chunks, or [Builder.Err]'s error.
func (b *Builder) Result() ([]ChunkResult, error) { return b.b.result() }

// Line returns the 1-based number of the line that holds byte off of the text, counted in the whole text
// for the builder of a [Builder.Window]. Offsets asked for in order cost one pass over the text.
func (b *Builder) Line(off int) int { return b.b.line(off) }

// Window chunks Text()[start:end] on its own, after the chunks made so far: f makes the chunks of a builder
// over that span, whose offsets are into the span, whose lines are numbered in the whole text, and which
// may make what is left of [Options.MaxChunks]; its chunks are then appended to b's, their offsets and
// indexes made b's. They share nothing with the chunks before them. Window returns f's error, and keeps it
// as [Builder.Err]'s when it is ErrTooManyChunks.
func (b *Builder) Window(start, end int, f func(w *Builder) error) error {
	if err := b.b.err(); err != nil {
		return err
	}
	w := newBuilder(b.b.ctx, b.b.text[start:end], b.b.config)
	w.maxChunks = b.b.remaining()
	w.lineBase = b.b.line(start) - 1
	if err := f(&Builder{w}); err != nil {
		if w.stop != nil {
			b.b.stop = w.stop
		}
		return err
	}
	for _, ch := range w.chunks {
		ch.Index = len(b.b.chunks)
		ch.StartOffset += start
		ch.EndOffset += start
		b.b.chunks = append(b.b.chunks, ch)
	}
	return nil
}

// line returns the 1-based number of the line that holds text[off], in the whole text for a window.
func (b *builder) line(off int) int {
	return b.lineBase + b.lines.at(b.text, off)
}

// lineCounter tells the 1-based line number of byte offsets, counting newlines from the last offset asked
// for, so that offsets in order cost one pass over the text. Its zero value is at the start of a text.
type lineCounter struct {
	off  int // an offset in the text
	line int // newlines in text[:off]
}

// at returns the number of the line that holds text[off].
func (l *lineCounter) at(text string, off int) int {
	if off >= l.off {
		l.line += strings.Count(text[l.off:off], "\n")
	} else {
		l.line -= strings.Count(text[off:l.off], "\n")
	}
	l.off = off
	return l.line + 1
}
