package chunker

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/context-loom/loom/tokenizer"
)

// Embedder embeds texts; embed.Embedder is one.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
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
	meter  *tokenizer.Meter   // counts
	split  tokenizer.Splitter // nil: counts of units never add up
	chunks []ChunkResult

	boundaries []uint64 // bit p: a grapheme cluster starts at byte p (built when first needed)
	stop       error    // set when one more chunk than maxChunks was to be made

	overlapLevels []SplitFunc // where the packer may cut a unit for overlap (see packer); nil: whole units
	cuts          []int       // tail's scratch

	lines    lineCounter // for line
	lineBase int         // newlines before text, for a window (see Builder.Window)
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
	// Next to an ASCII character, only the two characters tell whether a cluster starts between them (of
	// Unicode's rules, those of \r\n, controls, prepended marks and extending marks apply): the text needs to
	// be segmented only where non-ASCII characters meet.
	switch c, prev := b.text[p], b.text[p-1]; {
	case c < utf8.RuneSelf && prev < utf8.RuneSelf:
		return prev != '\r' || c != '\n'
	case c < utf8.RuneSelf:
		_, w := utf8.DecodeLastRuneInString(b.text[:p])
		cluster, _, _, _ := uniseg.FirstGraphemeClusterInString(b.text[p-w:p+1], -1)
		return len(cluster) == w
	case prev < utf8.RuneSelf:
		_, w := utf8.DecodeRuneInString(b.text[p:])
		cluster, _, _, _ := uniseg.FirstGraphemeClusterInString(b.text[p-1:p+w], -1)
		return len(cluster) == 1
	}
	if b.boundaries == nil {
		b.boundaries = clusterStarts(b.text)
	}
	return b.boundaries[p/64]&(1<<(p%64)) != 0
}

// clusterStarts returns a bit set of the grapheme cluster starts of text. Between two ASCII characters
// there is always a boundary, except inside \r\n; only around other characters is uniseg needed, from a
// boundary that nothing before it can move: one between two ASCII characters.
func clusterStarts(text string) []uint64 {
	bits := make([]uint64, len(text)/64+1)
	set := func(p int) { bits[p/64] |= 1 << (p % 64) }
	ascii := func(p int) bool { return text[p] < utf8.RuneSelf } // p in range
	// settled reports whether p is a cluster start whatever precedes it.
	settled := func(p int) bool {
		return p == 0 || ascii(p-1) && ascii(p) && (text[p-1] != '\r' || text[p] != '\n')
	}
	for i := 0; i < len(text); {
		if ascii(i) {
			if i == 0 || ascii(i-1) && (text[i-1] != '\r' || text[i] != '\n') {
				set(i)
			}
			i++
			continue
		}
		// Non-ASCII at i: segment from the settled start before it to the first place after it where two
		// ASCII characters meet.
		from := i - 1
		for from > 0 && !settled(from) {
			from--
		}
		from = max(from, 0)
		to := i + 1
		for to < len(text) && !(ascii(to-1) && ascii(to)) {
			to++
		}
		rest, state, pos := text[from:to], -1, from
		for len(rest) > 0 {
			var cluster string
			cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
			set(pos)
			pos += len(cluster)
		}
		i = to
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

func newBuilder(ctx context.Context, text string, c config) *builder {
	b := &builder{ctx: ctx, text: text, config: c}
	b.meter = tokenizer.NewMeter(c.counter)
	b.split, _ = c.counter.(tokenizer.Splitter)
	return b
}

// fits counts s, stopping early once past limit where the counter allows: it returns the exact count and
// true when s has at most limit tokens.
func (b *builder) fits(s string, limit int) (int, bool) { return b.meter.CountUpTo(s, limit) }

// lastChunk returns the last chunk made, or nil.
func (b *builder) lastChunk() *ChunkResult {
	if len(b.chunks) == 0 {
		return nil
	}
	return &b.chunks[len(b.chunks)-1]
}

// sameMap reports whether a and b are the same map (not only equal ones): chunks of one section or group
// share their metadata map.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
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

// packer groups a stream of consecutive units (each at most size tokens) into chunks of at most size
// tokens, greedily. Neighbours share up to overlap tokens: the last whole units of a chunk, and when they
// leave room (a long sentence, a long paragraph), the end of the unit before them, cut at the builder's
// overlap levels (sentences, then words) so that neighbours share close to overlap tokens. Every chunk
// takes at least one unit the one before did not have, and starts after it. Counts are summed from the
// units and then checked exactly (tokens can merge differently across a join), giving up units at the end,
// then overlap, until it fits.
//
// A chunk is made as soon as the units after the last chunk hold more than size tokens, so a packer holds
// only the units of one chunk and its overlap, whatever the length of the stream.
type packer struct {
	b       *builder
	units   []unit
	prev    int // index of the first whole unit of the last chunk; -1 before the first
	next    int // index of the first unit in no chunk yet
	pending int // tokens of units[next:]
}

func (b *builder) packer() *packer { return &packer{b: b, prev: -1} }

// add appends u to the stream, making the chunks that it completes.
func (p *packer) add(u unit) {
	p.units = append(p.units, u)
	p.pending += u.tokens
	for p.pending > p.b.size && p.b.stop == nil {
		p.chunk()
	}
}

// flush makes the chunks of the units left and starts a new stream.
func (p *packer) flush() {
	for p.next < len(p.units) && p.b.stop == nil {
		p.chunk()
	}
	p.units, p.prev, p.next, p.pending = p.units[:0], -1, 0, 0
}

// chunk makes the chunk that starts at units[next] (and its overlap).
func (p *packer) chunk() {
	b, units, next := p.b, p.units, p.next
	// Overlap: the last whole units before next, as many as fit in the overlap and leave room for
	// units[next].
	k, shared := next, 0
	for k-1 > p.prev && shared+units[k-1].tokens <= b.overlap && shared+units[k-1].tokens+units[next].tokens <= b.size {
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
	// Then the end of the unit before, where the whole units leave room: a unit of this stream, or for its
	// first chunk the chunk before it when the stream continues it (the parts of a span cut finer).
	var head unit
	if b.overlapLevels != nil && b.overlap > shared {
		before, ok := unit{}, false
		if k > 0 && k-1 >= p.prev {
			before, ok = units[k-1], true
		} else if last := b.lastChunk(); p.prev < 0 && last != nil && last.EndOffset == units[next].start && sameMap(last.Metadata, units[next].meta) {
			before, ok = unit{start: last.StartOffset, end: last.EndOffset, tokens: last.TokenCount, meta: last.Metadata}, true
		}
		if ok {
			room := min(b.overlap-shared, b.size-shared-units[next].tokens)
			if pos, n := b.tail(before, room); pos < before.end {
				// The whole overlap: the end of before, and the whole units after it.
				head = unit{start: pos, end: before.end, tokens: n, meta: before.meta}
				if k < next {
					if _, fits := b.fitsRun(head, units[k:next], shared+n, b.overlap); !fits {
						head = unit{}
					}
				}
			}
		}
	}
	j, sum := next, shared+head.tokens
	for j < len(units) && sum+units[j].tokens <= b.size {
		sum += units[j].tokens
		j++
	}
	j = max(j, next+1)
	n, ok := 0, false
	for !ok {
		if j == k+1 && head.end == 0 { // a single unit: its count is known and fits
			n, ok = units[k].tokens, true
			break
		}
		if n, ok = b.fitsRun(head, units[k:j], sumTokens(units[k:j])+head.tokens, b.size); !ok {
			switch {
			case j > next+1:
				j--
			case head.end != 0:
				head = unit{}
			default:
				k++
			}
		}
	}
	start, meta := units[k].start, units[k].meta
	if head.end != 0 {
		start, meta = head.start, head.meta
	}
	b.emit(start, units[j-1].end, n, meta)
	for _, u := range units[next:j] {
		p.pending -= u.tokens
	}
	p.prev, p.next = k, j
	// Units before the last chunk's are no longer needed.
	if p.prev > 64 && p.prev > len(p.units)/2 {
		m := copy(p.units, p.units[p.prev:])
		p.units = p.units[:m]
		p.next -= p.prev
		p.prev = 0
	}
}

// tail returns where the end of u that has at most room tokens starts, cut at the overlap levels: as many
// of u's last pieces at the first level as fit, then of the piece before them at the next level, and so on;
// and the exact count of text[pos:u.end]. It returns u.end when nothing fits.
//
// The cuts are looked for where u's own density of tokens puts room tokens before its end, and counted from
// the nearest one: a few counts of about room tokens, whatever the number of pieces.
func (b *builder) tail(u unit, room int) (pos, tokens int) {
	pos = u.end
	if room <= 0 || u.tokens <= 0 {
		return pos, 0
	}
	perToken := float64(u.end-u.start) / float64(u.tokens) // bytes
	lo, used := u.start, 0                                 // text[lo:pos] is the piece the next level cuts
	additive := b.split != nil                             // used is the count of text[pos:u.end]
	for _, level := range b.overlapLevels {
		left := room - used
		if left <= 0 || lo >= pos {
			break
		}
		reach := int(2*perToken*float64(left)) + 64 // where cuts are looked for, before pos
		cuts := b.cuts[:0]
		for c := b.nextCut(level, max(lo, pos-reach), pos); c >= 0; c = b.nextCut(level, c, pos) {
			cuts = append(cuts, c)
		}
		b.cuts = cuts
		if len(cuts) == 0 {
			continue
		}
		// From the cut nearest the estimate: later while text[cut:pos] does not fit, then earlier while it does.
		i, _ := slices.BinarySearch(cuts, pos-int(perToken*float64(left)))
		i = min(i, len(cuts)-1)
		n, ok := b.fits(b.text[cuts[i]:pos], left)
		for !ok && i+1 < len(cuts) {
			i++
			n, ok = b.fits(b.text[cuts[i]:pos], left)
		}
		if !ok {
			lo = cuts[i] // not even the last piece fits: the next level cuts it
			continue
		}
		for i > 0 {
			m, fits := b.fits(b.text[cuts[i-1]:pos], left)
			if !fits {
				break
			}
			i, n = i-1, m
		}
		if additive && pos < u.end { // pos joins what this level adds to what the levels before took
			additive = b.split.SplitsAt(b.text, pos)
		}
		used, pos = used+n, cuts[i]
		if i > 0 {
			lo = cuts[i-1]
		}
	}
	if pos == u.end || additive {
		return pos, used
	}
	n, ok := b.fits(b.text[pos:u.end], room)
	if !ok {
		return u.end, 0
	}
	return pos, n
}

// fitsUnits is fits for the text of consecutive units whose counts add up to sum: where the counter
// vouches that the counts add at every join, sum is the exact count and nothing is counted again. The
// joins are asked about in the whole text, which holds each with all that surrounds it; by the
// [tokenizer.Splitter] contract, the answer holds for the span too.
func (b *builder) fitsUnits(units []unit, sum, limit int) (int, bool) {
	return b.fitsRun(unit{}, units, sum, limit)
}

// fitsRun is fitsUnits for head (if it is not the zero unit) followed by units.
func (b *builder) fitsRun(head unit, units []unit, sum, limit int) (int, bool) {
	start := units[0].start
	if head.end != 0 {
		start = head.start
	}
	if b.split != nil {
		additive := head.end == 0 || b.split.SplitsAt(b.text, head.end)
		for _, u := range units[:len(units)-1] {
			if !additive {
				break
			}
			additive = b.split.SplitsAt(b.text, u.end)
		}
		if additive {
			return sum, sum <= limit
		}
	}
	return b.fits(b.text[start:units[len(units)-1].end], limit)
}

func sumTokens(units []unit) int {
	n := 0
	for _, u := range units {
		n += u.tokens
	}
	return n
}

// A SplitFunc is one level of places where a text may be cut: it returns the first cut c of text with
// from < c < end, or -1 when there is none. from is the start of a span or a cut of the same level, so
// scanning on from a cut finds the next. [SplitParagraphs], [SplitLines], [SplitSentences] and [SplitWords]
// are the stock levels; [Builder.Split] takes them finest last.
type SplitFunc func(text string, from, end int) int

// nextCut returns the first cut of level after from and before end that is between grapheme clusters, or
// -1.
func (b *builder) nextCut(level SplitFunc, from, end int) int {
	c := level(b.text, from, end)
	for c >= 0 && !b.isBoundary(c) {
		c = level(b.text, c, end)
	}
	return c
}

// cutsOf returns the cuts of level strictly inside text[start:end], in order.
func cutsOf(level SplitFunc, text string, start, end int) []int {
	var cuts []int
	for c := level(text, start, end); c >= 0; c = level(text, c, end) {
		cuts = append(cuts, c)
	}
	return cuts
}

// chunkSpan chunks text[start:end] the recursive way: whole if it fits, else cut at the first level of
// levels that cuts it; runs of parts that fit are packed together, and a part that does not fit is chunked
// at the next levels. Past the last level, text is cut between grapheme clusters, and a cluster larger than
// the size between characters.
func (b *builder) chunkSpan(start, end int, levels []SplitFunc, meta map[string]string) error {
	if err := b.err(); err != nil {
		return err
	}
	if n, ok := b.fits(b.text[start:end], b.size); ok {
		b.emit(start, end, n, meta)
		return nil
	}
	for len(levels) > 0 {
		level := levels[0]
		levels = levels[1:]
		if first := b.nextCut(level, start, end); first >= 0 {
			return b.chunkParts(start, end, level, first, levels, meta)
		}
	}
	if first := b.nextCut(graphemeCuts, start, end); first >= 0 {
		return b.chunkParts(start, end, graphemeCuts, first, nil, meta)
	}
	return b.chunkChars(start, end, meta)
}

// chunkParts chunks text[start:end] cut at level, whose first cut is first, with levels for the parts that
// do not fit (nil: the parts are grapheme clusters, and one that does not fit is cut between characters).
// Parts are packed as they are found, so that memory does not grow with the span.
func (b *builder) chunkParts(start, end int, level SplitFunc, first int, levels []SplitFunc, meta map[string]string) error {
	p := b.packer()
	prev := start
	for i, cut := 0, first; ; i++ {
		if cut < 0 {
			cut = end
		}
		if i%256 == 255 {
			if err := b.err(); err != nil {
				return err
			}
		}
		if n, ok := b.fits(b.text[prev:cut], b.size); ok {
			p.add(unit{start: prev, end: cut, tokens: n, meta: meta})
		} else {
			p.flush()
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
		if cut == end {
			break
		}
		prev, cut = cut, b.nextCut(level, cut, end)
	}
	p.flush()
	return b.err()
}

// chunkChars packs single characters: the last resort, for a grapheme cluster larger than the size.
func (b *builder) chunkChars(start, end int, meta map[string]string) error {
	p := b.packer()
	for i := start; i < end; {
		_, w := utf8.DecodeRuneInString(b.text[i:end])
		n, ok := b.fits(b.text[i:i+w], b.size)
		if !ok {
			return fmt.Errorf("%w: %q at byte %d is %d tokens, the size is %d", ErrSizeTooSmall, b.text[i:i+w], i, n, b.size)
		}
		p.add(unit{start: i, end: i + w, tokens: n, meta: meta})
		i += w
	}
	p.flush()
	return b.err()
}

// graphemeCuts cuts between grapheme clusters.
func graphemeCuts(text string, from, end int) int {
	cluster, _, _, _ := uniseg.FirstGraphemeClusterInString(text[from:end], -1)
	if c := from + len(cluster); c < end {
		return c
	}
	return -1
}

// SplitParagraphs is the [SplitFunc] that cuts after each run of blank lines, so a paragraph keeps its
// indentation.
func SplitParagraphs(text string, from, end int) int {
	for i := from; i < end; {
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
			return k
		}
		i = max(k, j)
	}
	return -1
}

// SplitLines is the [SplitFunc] that cuts after each newline.
func SplitLines(text string, from, end int) int {
	if nl := strings.IndexByte(text[from:end], '\n'); nl >= 0 && from+nl+1 < end {
		return from + nl + 1
	}
	return -1
}

// SplitSentences is the [SplitFunc] that cuts after a sentence's end: ., !, ?, … (and closing quotes or
// brackets) before whitespace, where the whitespace starts the next sentence; or right after a CJK full
// stop, exclamation or question mark.
func SplitSentences(text string, from, end int) int {
	for i := from; i < end; {
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
				return i
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
					return j
				}
			}
			i = j
		}
	}
	return -1
}

func isClosing(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '}', '»', '”', '’', '」', '』', '）', '】':
		return true
	}
	return false
}

// SplitWords is the [SplitFunc] that cuts before each run of whitespace that follows other text, so a word
// keeps the space before it (as the tokenizers do).
func SplitWords(text string, from, end int) int {
	prevSpace := true
	for i := from; i < end; {
		r, w := utf8.DecodeRuneInString(text[i:end])
		space := unicode.IsSpace(r)
		if space && !prevSpace && i > from {
			return i
		}
		prevSpace = space
		i += w
	}
	return -1
}
