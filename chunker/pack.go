package chunker

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Embedder embeds texts; embed.Embedder is one.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// upToCounter is implemented by counters that can stop counting past a limit, like *tokenizer.Encoding.
type upToCounter interface {
	CountUpTo(text string, limit int) (int, bool)
}

// splitter is implemented by counters that know where counts of adjacent texts add up, like
// *tokenizer.Encoding (see its SplitsAt).
type splitter interface {
	SplitsAt(text string, p int) bool
}

// unit is a span of the text that no chunk boundary may cut, with its exact token count.
type unit struct {
	start, end, tokens int
	meta               map[string]string // carried to the chunk that starts with this unit, if any
}

// builder collects the chunks of one call.
type builder struct {
	ctx  context.Context
	text string
	config
	upTo   upToCounter
	split  splitter
	chunks []ChunkResult

	boundaries []uint64 // bit p: a grapheme cluster starts at byte p (built when first needed)
	stop       error    // set when one more chunk than maxChunks was to be made
}

// err returns why chunking must stop: too many chunks, or ctx's error.
func (b *builder) err() error {
	if b.stop != nil {
		return b.stop
	}
	return b.ctx.Err()
}

// result returns the chunks, or why chunking stopped.
func (b *builder) result() ([]ChunkResult, error) {
	if err := b.err(); err != nil {
		return nil, err
	}
	return b.chunks, nil
}

// remaining returns how many more chunks b may make.
func (b *builder) remaining() int { return b.maxChunks - len(b.chunks) }

// tooMany records and returns the error of one chunk more than the limit.
func (b *builder) tooMany() error {
	if b.stop == nil {
		b.stop = fmt.Errorf("%w: more than %d", ErrTooManyChunks, b.opts.MaxChunks)
	}
	return b.stop
}

// isBoundary reports whether a grapheme cluster starts at byte p (true at 0 and at the end).
func (b *builder) isBoundary(p int) bool {
	if p <= 0 || p >= len(b.text) {
		return true
	}
	if b.boundaries == nil {
		b.boundaries = clusterStarts(b.text)
	}
	return b.boundaries[p/64]&(1<<(p%64)) != 0
}

// clusterStarts returns a bit set of the grapheme cluster starts of text. Between two ASCII characters
// there is always a boundary, except inside \r\n; only around other characters is uniseg needed.
func clusterStarts(text string) []uint64 {
	bits := make([]uint64, len(text)/64+1)
	set := func(p int) { bits[p/64] |= 1 << (p % 64) }
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			if i == 0 || text[i-1] < utf8.RuneSelf && (text[i-1] != '\r' || text[i] != '\n') {
				set(i)
			}
			i++
			continue
		}
		// A run of non-ASCII: segment it from the ASCII character before it (a cluster start: no ASCII
		// character extends another) up to the next ASCII character, which starts a cluster of its own.
		from := max(i-1, 0)
		to := i
		for to < len(text) && text[to] >= utf8.RuneSelf {
			to++
		}
		rest, state, pos := text[from:to], -1, from
		for len(rest) > 0 {
			var cluster string
			cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
			set(pos)
			pos += len(cluster)
		}
		if to < len(text) {
			set(to)
		}
		i = to + 1
	}
	return bits
}

// clusterStart returns the start of the grapheme cluster that byte off is in (off itself at a boundary or
// at the end of the text).
func (b *builder) clusterStart(off int) int {
	for !b.isBoundary(off) {
		off--
	}
	return off
}

// nextCluster returns the first cluster start after off, or the end of the text.
func (b *builder) nextCluster(off int) int {
	off++
	for !b.isBoundary(off) {
		off++
	}
	return min(off, len(b.text))
}

// keepBoundaries drops the cuts that are not between grapheme clusters.
func (b *builder) keepBoundaries(cuts []int) []int {
	kept := cuts[:0]
	for _, c := range cuts {
		if b.isBoundary(c) {
			kept = append(kept, c)
		}
	}
	return kept
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func newBuilder(ctx context.Context, text string, c config) *builder {
	b := &builder{ctx: ctx, text: text, config: c}
	b.upTo, _ = c.counter.(upToCounter)
	b.split, _ = c.counter.(splitter)
	return b
}

// fits counts s, stopping early once past limit where the counter allows: it returns the exact count and
// true when s has at most limit tokens.
func (b *builder) fits(s string, limit int) (int, bool) {
	if b.upTo != nil {
		return b.upTo.CountUpTo(s, limit)
	}
	n := b.counter.Count(s)
	return n, n <= limit
}

// lastEnd returns the end of the last chunk, or 0.
func (b *builder) lastEnd() int {
	if len(b.chunks) == 0 {
		return 0
	}
	return b.chunks[len(b.chunks)-1].EndOffset
}

// emit appends the chunk text[start:end] with its exact count. Whitespace alone is no chunk: it joins the
// chunk before it when that one ends where it starts and has room, and is dropped otherwise.
func (b *builder) emit(start, end, tokens int, meta map[string]string) {
	content := b.text[start:end]
	if strings.TrimSpace(content) == "" {
		if len(b.chunks) > 0 {
			last := &b.chunks[len(b.chunks)-1]
			if last.EndOffset == start {
				if n, ok := b.fits(b.text[last.StartOffset:end], b.size); ok {
					last.Content, last.EndOffset, last.TokenCount = b.text[last.StartOffset:end], end, n
				}
			}
		}
		return
	}
	if b.stop != nil {
		return
	}
	if len(b.chunks) >= b.maxChunks {
		b.tooMany()
		return
	}
	b.chunks = append(b.chunks, ChunkResult{
		Content:     content,
		Index:       len(b.chunks),
		StartOffset: start,
		EndOffset:   end,
		TokenCount:  tokens,
		Metadata:    meta,
	})
}

// pack groups consecutive units (each at most size tokens) into chunks of at most size tokens, greedily,
// with neighbours sharing up to overlap tokens of whole units. Every chunk takes at least one unit the one
// before did not have, and starts after it. Counts are summed from the units and then checked exactly
// (tokens can merge differently across a join), giving up units at the end, then overlap, until it fits.
func (b *builder) pack(units []unit) {
	prevStart := -1 // first unit of the last chunk
	for next := 0; next < len(units); {
		// Overlap: the last units before next, as many as fit in the overlap and leave room for units[next].
		k, shared := next, 0
		for k-1 > prevStart && shared+units[k-1].tokens <= b.overlap && shared+units[k-1].tokens+units[next].tokens <= b.size {
			shared += units[k-1].tokens
			k--
		}
		for k < next {
			if _, ok := b.fitsUnits(units[k:next], shared, b.overlap); ok {
				break
			}
			shared -= units[k].tokens
			k++
		}
		j, sum := next, shared
		for j < len(units) && sum+units[j].tokens <= b.size {
			sum += units[j].tokens
			j++
		}
		j = max(j, next+1)
		n, ok := 0, false
		for !ok {
			if j == k+1 { // a single unit: its count is known and fits
				n, ok = units[k].tokens, true
				break
			}
			if n, ok = b.fitsUnits(units[k:j], sumTokens(units[k:j]), b.size); !ok {
				if j > next+1 {
					j--
				} else {
					k++
				}
			}
		}
		b.emit(units[k].start, units[j-1].end, n, units[k].meta)
		prevStart, next = k, j
	}
}

// fitsUnits is fits for the text of consecutive units whose counts add up to sum: where the counter
// vouches that the counts add at every join, sum is the exact count and nothing is counted again.
func (b *builder) fitsUnits(units []unit, sum, limit int) (int, bool) {
	if b.split != nil {
		additive := true
		for _, u := range units[:len(units)-1] {
			if !b.split.SplitsAt(b.text, u.end) {
				additive = false
				break
			}
		}
		if additive {
			return sum, sum <= limit
		}
	}
	return b.fits(b.text[units[0].start:units[len(units)-1].end], limit)
}

func sumTokens(units []unit) int {
	n := 0
	for _, u := range units {
		n += u.tokens
	}
	return n
}

// splitFunc returns the cut positions strictly inside text[start:end], in order.
type splitFunc func(text string, start, end int) []int

// chunkSpan chunks text[start:end] the recursive way: whole if it fits, else cut at the first level of
// levels that cuts it; runs of parts that fit are packed together, and a part that does not fit is chunked
// at the next levels. Past the last level, text is cut between grapheme clusters, and a cluster larger than
// the size between characters.
func (b *builder) chunkSpan(start, end int, levels []splitFunc, meta map[string]string) error {
	if err := b.err(); err != nil {
		return err
	}
	if n, ok := b.fits(b.text[start:end], b.size); ok {
		b.emit(start, end, n, meta)
		return nil
	}
	for len(levels) > 0 {
		cuts := b.keepBoundaries(levels[0](b.text, start, end))
		levels = levels[1:]
		if len(cuts) > 0 {
			return b.chunkParts(start, end, cuts, levels, meta)
		}
	}
	return b.chunkParts(start, end, graphemeCuts(b.text, start, end), nil, meta)
}

// chunkParts chunks text[start:end] cut at cuts, with levels for the parts that do not fit. With no levels
// left, the parts are grapheme clusters and one that does not fit is cut between characters.
func (b *builder) chunkParts(start, end int, cuts []int, levels []splitFunc, meta map[string]string) error {
	var run []unit
	prev := start
	for _, cut := range append(cuts, end) {
		if n, ok := b.fits(b.text[prev:cut], b.size); ok {
			run = append(run, unit{start: prev, end: cut, tokens: n})
		} else {
			b.packWithMeta(run, meta)
			run = nil
			var err error
			if levels == nil {
				err = b.chunkChars(prev, cut, meta)
			} else {
				err = b.chunkSpan(prev, cut, levels, meta)
			}
			if err != nil {
				return err
			}
		}
		prev = cut
	}
	b.packWithMeta(run, meta)
	return nil
}

func (b *builder) packWithMeta(run []unit, meta map[string]string) {
	if len(run) == 0 {
		return
	}
	for i := range run {
		run[i].meta = meta
	}
	b.pack(run)
}

// chunkChars packs single characters: the last resort, for a grapheme cluster larger than the size.
func (b *builder) chunkChars(start, end int, meta map[string]string) error {
	var run []unit
	for i := start; i < end; {
		_, w := utf8.DecodeRuneInString(b.text[i:end])
		n, ok := b.fits(b.text[i:i+w], b.size)
		if !ok {
			return fmt.Errorf("%w: %q at byte %d is %d tokens, the size is %d", ErrSizeTooSmall, b.text[i:i+w], i, n, b.size)
		}
		run = append(run, unit{start: i, end: i + w, tokens: n, meta: meta})
		i += w
	}
	b.pack(run)
	return nil
}

// graphemeCuts cuts between grapheme clusters.
func graphemeCuts(text string, start, end int) []int {
	var cuts []int
	rest, state := text[start:end], -1
	pos := start
	for len(rest) > 0 {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		pos += len(cluster)
		if pos < end {
			cuts = append(cuts, pos)
		}
	}
	return cuts
}

// paragraphCuts cuts after each run of blank lines, so a paragraph keeps its indentation.
func paragraphCuts(text string, start, end int) []int {
	var cuts []int
	for i := start; i < end; {
		nl := strings.IndexByte(text[i:end], '\n')
		if nl < 0 {
			break
		}
		j := i + nl + 1
		// A blank run: more lines holding only spaces, tabs or \r.
		k, blank := j, false
		for {
			m := k
			for m < end && (text[m] == ' ' || text[m] == '\t' || text[m] == '\r') {
				m++
			}
			if m < end && text[m] == '\n' {
				k, blank = m+1, true
				continue
			}
			break
		}
		if blank && k < end {
			cuts = append(cuts, k)
		}
		i = max(k, j)
	}
	return cuts
}

// lineCuts cuts after each newline.
func lineCuts(text string, start, end int) []int {
	var cuts []int
	for i := start; i < end; {
		nl := strings.IndexByte(text[i:end], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
		if i < end {
			cuts = append(cuts, i)
		}
	}
	return cuts
}

// sentenceCuts cuts after a sentence's end: ., !, ?, … (and closing quotes or brackets) before whitespace,
// where the whitespace starts the next sentence; or right after a CJK full stop, exclamation or question mark.
func sentenceCuts(text string, start, end int) []int {
	var cuts []int
	for i := start; i < end; {
		r, w := utf8.DecodeRuneInString(text[i:end])
		i += w
		switch r {
		case '。', '！', '？', '｡':
			for i < end {
				r2, w2 := utf8.DecodeRuneInString(text[i:end])
				if !isClosing(r2) {
					break
				}
				i += w2
			}
			if i < end {
				cuts = append(cuts, i)
			}
		case '.', '!', '?', '…':
			j := i
			for j < end {
				r2, w2 := utf8.DecodeRuneInString(text[j:end])
				if !isClosing(r2) {
					break
				}
				j += w2
			}
			if j < end {
				if r2, _ := utf8.DecodeRuneInString(text[j:end]); unicode.IsSpace(r2) {
					cuts = append(cuts, j)
				}
			}
			i = j
		}
	}
	return cuts
}

func isClosing(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '}', '»', '”', '’', '」', '』', '）', '】':
		return true
	}
	return false
}

// wordCuts cuts before each run of whitespace that follows other text, so a word keeps the space before it
// (as the tokenizers do).
func wordCuts(text string, start, end int) []int {
	var cuts []int
	prevSpace := true
	for i := start; i < end; {
		r, w := utf8.DecodeRuneInString(text[i:end])
		space := unicode.IsSpace(r)
		if space && !prevSpace && i > start {
			cuts = append(cuts, i)
		}
		prevSpace = space
		i += w
	}
	return cuts
}
