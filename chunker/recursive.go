package chunker

import (
	"context"
	"strings"
)

// RecursiveChunker splits at paragraph boundaries (blank lines), then lines, then sentences, then words,
// then grapheme clusters, going finer only where a piece is larger than the chunk size, and packs the
// pieces of each level into chunks. Separators and indentation stay in the chunks: Content is always a
// slice of the original text.
//
// Neighbours share close to ChunkOverlap tokens, never more: the overlap is the last whole pieces of a
// chunk and, where they leave room (a long sentence or paragraph), the end of the piece before them cut at
// sentences, then words.
type RecursiveChunker struct {
	levels []SplitFunc
}

var _ Chunker = (*RecursiveChunker)(nil)

// proseOverlap are the cuts of a unit's end that overlap may start at in prose: sentences, then words.
var proseOverlap = []SplitFunc{SplitSentences, SplitWords}

// NewRecursive returns the recursive chunker, the default strategy.
func NewRecursive() *RecursiveChunker {
	return &RecursiveChunker{levels: []SplitFunc{SplitParagraphs, SplitLines, SplitSentences, SplitWords}}
}

// Chunk splits text. It returns an error for invalid options (see [Options]) or when ctx is done.
func (r *RecursiveChunker) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	c, err := resolve(Recursive, opts)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	b := newBuilder(ctx, text, c)
	b.overlapLevels = proseOverlap
	if err := b.chunkSpan(0, len(text), r.levels, nil); err != nil {
		return nil, err
	}
	return b.result()
}
