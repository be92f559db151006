package chunker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/context-loom/loom/embed"
)

// DefaultBreakpointPercentile is the semantic strategy's default threshold.
const DefaultBreakpointPercentile = 95

// SemanticChunker groups sentences by meaning: it embeds each sentence with its neighbours (a window of
// three; a batch of sentences at a time), measures the cosine distance between consecutive windows, and breaks where the distance exceeds
// the BreakpointPercentile-th percentile of all of them. Groups that fit become chunks; a group larger than
// the size is packed sentence by sentence (with overlap), and a sentence larger than the size is cut at
// lines, then words. Each chunk's metadata has "group", the index of its group.
//
// Its default embedder is the offline lexical one (embed.Default), so groups follow shared words, not
// meaning; give Options.Embedder a model-backed embedder (embed.NewOpenAI) for semantic groups.
type SemanticChunker struct{}

var _ Chunker = (*SemanticChunker)(nil)

// NewSemantic returns the semantic strategy.
func NewSemantic() *SemanticChunker { return &SemanticChunker{} }

// semanticBatch is how many sentences the semantic strategy embeds in one call.
const semanticBatch = 256

// window is how many sentences on each side of a sentence its embedding includes.
const window = 1

// Chunk splits text. Besides option errors, it returns the embedder's errors.
func (s *SemanticChunker) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	c, err := resolve(Semantic, opts)
	if err != nil {
		return nil, err
	}
	percentile := c.opts.BreakpointPercentile
	if percentile == 0 {
		percentile = DefaultBreakpointPercentile
	}
	if percentile <= 0 || percentile > 100 || math.IsNaN(percentile) {
		return nil, fmt.Errorf("%w (got %v)", ErrBadPercentile, percentile)
	}
	var embedder Embedder = embed.Default()
	if c.opts.Embedder != nil {
		embedder = c.opts.Embedder
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	b := newBuilder(ctx, text, c)

	// Sentences: cut at paragraphs and sentence ends, between grapheme clusters.
	bounds := []int{0}
	for c := b.nextCut(sentenceBounds, 0, len(text)); c >= 0; c = b.nextCut(sentenceBounds, c, len(text)) {
		bounds = append(bounds, c)
	}
	bounds = append(bounds, len(text))
	n := len(bounds) - 1

	// Breaks between sentence i and i+1 where their windows are far apart. The windows are embedded a batch
	// at a time, so that only a batch of vectors is held.
	breaks := make([]bool, n)
	if n > 2 {
		dist := make([]float64, 0, n-1)
		var prev []float32
		windows := make([]string, 0, min(n, semanticBatch))
		for from := 0; from < n; from += semanticBatch {
			windows = windows[:0]
			for i := from; i < min(from+semanticBatch, n); i++ {
				windows = append(windows, text[bounds[max(i-window, 0)]:bounds[min(i+window+1, n)]])
			}
			vectors, err := embedder.Embed(ctx, windows)
			if err != nil {
				return nil, fmt.Errorf("chunker: embed sentences: %w", err)
			}
			if len(vectors) != len(windows) {
				return nil, fmt.Errorf("chunker: embedder returned %d vectors for %d sentences", len(vectors), len(windows))
			}
			for _, v := range vectors {
				if prev != nil {
					if len(prev) != len(v) {
						return nil, errors.New("chunker: embedder returned vectors of different dimensions")
					}
					dist = append(dist, 1-float64(embed.Cosine(prev, v)))
				}
				prev = v
			}
			prev = slices.Clone(prev) // not the batch's memory
		}
		threshold := percentileOf(dist, percentile)
		for i, d := range dist {
			breaks[i] = d > threshold
		}
	}

	// Groups of sentences between breaks, each chunked on its own.
	group := 0
	for first := 0; first < n; {
		last := first
		for last < n-1 && !breaks[last] {
			last++
		}
		meta := map[string]string{"group": strconv.Itoa(group)}
		if err := b.chunkGroup(bounds[first:last+2], meta); err != nil {
			return nil, err
		}
		group++
		first = last + 1
	}
	return b.result()
}

// chunkGroup chunks the sentences between consecutive bounds: whole if they fit, else packed sentence by
// sentence, with sentences larger than the size cut at lines and then words.
func (b *builder) chunkGroup(bounds []int, meta map[string]string) error {
	if err := b.err(); err != nil {
		return err
	}
	start, end := bounds[0], bounds[len(bounds)-1]
	if n, ok := b.fits(b.text[start:end], b.size); ok {
		b.emit(start, end, n, meta)
		return nil
	}
	inner := bounds[1 : len(bounds)-1]
	level := func(_ string, from, end int) int { // the next of the bounds
		if i, _ := slices.BinarySearch(inner, from+1); i < len(inner) && inner[i] < end {
			return inner[i]
		}
		return -1
	}
	return b.chunkParts(start, end, level, level(b.text, start, end), []SplitFunc{SplitLines, SplitWords}, meta)
}

// sentenceBounds cuts at paragraphs and at sentence ends.
func sentenceBounds(text string, from, end int) int {
	// A paragraph cut before the next sentence cut is found without scanning past it (a blank run cannot
	// hold a sentence's end, so none ends after it).
	s := SplitSentences(text, from, end)
	limit := end
	if s >= 0 {
		limit = s
	}
	if p := SplitParagraphs(text, from, limit); p >= 0 {
		return p
	}
	return s
}

// percentileOf returns the p-th percentile (0 < p <= 100) of values, interpolating between ranks.
func percentileOf(values []float64, p float64) float64 {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(rank-float64(lo))
}
