package chunker

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rivo/uniseg"
)

// MarkdownChunker splits Markdown at its headings, keeping fenced code blocks and tables whole when they
// fit. Like every strategy it loses no byte: Content is a slice of the original text.
//
// The text is read the CommonMark way, line by line: ATX headings ("# Title", up to three spaces of
// indentation, an optional closing run of #) and setext headings (a paragraph underlined with === or
// ---); fenced code blocks (``` or ~~~, closed by a fence of the same character at least as long, or
// running to the end of the document); HTML blocks that the spec ends at a marker (comments, <pre>,
// <script>, <style>, ...) or at a blank line (<div>, <details>, ...); GitHub tables (a header row with
// pipes over a delimiter row such as |---|:--:|, then rows up to a blank line or another block); YAML
// ("---") or TOML ("+++") front matter at the very start; list items and block quotes. A line inside a
// fence, an HTML block, a list item or a block quote is never a section heading.
//
// Sections run from a heading to the next heading of any level. A chunk's metadata gives the heading path
// of the section it starts in: "h1" ... "h6" hold the current heading of each level (deeper levels reset
// when a higher one changes; levels with no heading, or an empty one, are absent) and "headings" joins
// them with " > ", as in {"h1": "Intro", "h2": "Setup", "headings": "Intro > Setup"}. A heading's text is
// as written, inline markup and all, less a trailing attribute block such as {#intro}; a setext heading's
// lines are joined with spaces. Text before the first heading has no metadata; front matter has
// {"front_matter": "yaml"} (or "toml").
//
// The path is bounded, so that a chunk's metadata stays small whatever the text: a heading's text is cut
// to [MaxHeadingBytes] (ending in "…"), and when "headings" would be longer than [MaxHeadingPathBytes], the
// outermost headings are left out of the path and of the "h1".."h6" keys.
//
// Sizing keeps section boundaries as chunk boundaries, so that every byte of a chunk lies under the
// heading path in its metadata:
//   - A section that fits is one chunk. A small one, under a quarter of ChunkSize, also takes in the
//     subsections that follow it (never a sibling or a section higher up) while it is small and they fit,
//     so that a heading with a line or two does not make a chunk of its own. Front matter and the text
//     before the first heading take in nothing.
//   - A section that does not fit is cut into blocks: the heading, paragraphs, list items, block quotes,
//     fenced code blocks, tables and HTML blocks, each with the blank lines after it. The blocks are
//     packed into chunks, neighbours sharing up to ChunkOverlap tokens of whole blocks.
//   - A block that does not fit is cut at the first of its levels that cuts it: a fenced code block, table
//     or front matter at lines (a table's rows), then words; a paragraph or other text at lines, then
//     sentences, then words. The pieces that fit are packed with the blocks around them; one that does not
//     is chunked on its own at the levels below.
//
// Overlap never crosses a section boundary.
type MarkdownChunker struct{}

var _ Chunker = (*MarkdownChunker)(nil)

// NewMarkdown returns the markdown strategy.
func NewMarkdown() *MarkdownChunker { return &MarkdownChunker{} }

// Chunk splits text. It returns an error for invalid options (see [Options]), [ErrSizeTooSmall] when one
// character is more tokens than the size, one wrapping [ErrTooManyChunks] past [Options.MaxChunks], or
// ctx's error when it is done.
//
// The text is read line by line and chunked section by section as they end, so that what is held is the
// section being read, not every block of the text: a section that has grown larger than the size is chunked
// block by block as its blocks end.
func (m *MarkdownChunker) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	c, err := resolve(Markdown, opts)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	b := newBuilder(ctx, text, c)
	r := &mdRun{builder: b, small: b.size / 4}
	sc := &mdScanner{text: text}
	at := 0
	if end, format := mdFrontMatterEnd(text); end > 0 {
		sc.blocks = append(sc.blocks, mdBlock{start: 0, kind: mdFrontMatter, title: format})
		at = end
		if err := r.read(sc, at); err != nil {
			return nil, err
		}
	}
	for lines := 0; at < len(text); lines++ {
		if lines%256 == 255 {
			if err := b.err(); err != nil {
				return nil, err
			}
		}
		s, next := mdLineAt(text, at)
		if at == 0 {
			s = strings.TrimPrefix(s, "\ufeff") // a byte order mark
		}
		sc.line(at, s, next)
		at = next
		if err := r.read(sc, at); err != nil {
			return nil, err
		}
	}
	if err := r.end(sc); err != nil {
		return nil, err
	}
	var prev map[string]string
	for i := range b.chunks { // each chunk its own map: callers may change one
		m := b.chunks[i].Metadata
		if m != nil && sameMap(m, prev) {
			b.chunks[i].Metadata = maps.Clone(m)
		}
		prev = m
	}
	return b.result()
}

// mdRun is the state of one call: the sections read but not chunked yet, and the section being read.
type mdRun struct {
	*builder
	small int         // a section under this many tokens takes in its subsections
	queue []mdSection // sections read, not chunked: a small one waiting for the sections after it

	started bool      // the section being read has its first block
	cur     mdSection // the section being read (its blocks are the scanner's)
	curKind mdKind    // the kind of its first block
	path    [7]string // the current heading of each level
	check   int       // bytes of cur past which to count whether it still fits: from 4 bytes a token, doubling
	big     *packer   // cur does not fit: its ended blocks are packed here
}

// read takes in what the line that ends at byte at did: the first block of a section, the end of a section
// (a heading, or the text after front matter), the end of a block of a section that does not fit.
func (r *mdRun) read(sc *mdScanner, at int) error {
	if len(sc.blocks) == 0 {
		return nil
	}
	if !r.started {
		sc.blocks[0].start = 0 // leading blank lines belong to the first block
		r.start(sc.blocks[0])
	}
	// Only the last block is new, or changed: a paragraph that a setext underline made a heading.
	last := len(sc.blocks) - 1
	blk := sc.blocks[last]
	switch {
	case blk.start == r.cur.start:
		if blk.kind == mdHeading && r.curKind != mdHeading {
			r.start(blk) // the section's first paragraph, made a heading
		}
	case blk.kind == mdHeading || last > 0 && sc.blocks[last-1].kind == mdFrontMatter:
		if err := r.endSection(sc.blocks[:last], blk.start); err != nil {
			return err
		}
		sc.blocks = append(sc.blocks[:0], blk)
		r.start(blk)
		return nil
	}
	// Whether the section still fits is counted on its ended blocks: the last may still grow, or become the
	// next section's heading.
	if r.big == nil && last > 0 && blk.start-r.cur.start > r.check {
		if _, ok := r.fits(r.text[r.cur.start:blk.start], r.size); ok {
			r.check *= 2
		} else {
			// The sections before cannot take this one in: chunk them, then this one's blocks as they end.
			if err := r.drain(true); err != nil {
				return err
			}
			r.big = r.packer()
		}
	}
	if r.big != nil && last > 0 {
		for i, blk := range sc.blocks[:last] {
			if err := r.block(r.big, blk, sc.blocks[i+1].start, r.cur.meta); err != nil {
				return err
			}
		}
		sc.blocks = append(sc.blocks[:0], blk)
	}
	return nil
}

// start begins the section whose first block is blk, with the metadata of its heading path.
func (r *mdRun) start(blk mdBlock) {
	r.started, r.check, r.big, r.curKind = true, 4*r.size, nil, blk.kind
	r.cur = mdSection{start: blk.start}
	switch blk.kind {
	case mdFrontMatter:
		r.cur.meta = map[string]string{"front_matter": blk.title}
	case mdHeading:
		r.path[blk.level] = blk.title
		clear(r.path[blk.level+1:])
		r.cur.level, r.cur.meta = blk.level, mdHeadingMeta(r.path)
	}
}

// endSection ends the section being read at byte end; blocks are its blocks not packed yet.
func (r *mdRun) endSection(blocks []mdBlock, end int) error {
	s := r.cur
	s.end = end
	if r.big != nil {
		for i, blk := range blocks {
			next := end
			if i+1 < len(blocks) {
				next = blocks[i+1].start
			}
			if err := r.block(r.big, blk, next, s.meta); err != nil {
				return err
			}
		}
		r.big.flush()
		r.big = nil
		return r.err()
	}
	s.count, s.fit = r.fits(r.text[s.start:s.end], r.size)
	s.blocks = slices.Clone(blocks)
	r.queue = append(r.queue, s)
	return r.drain(false)
}

// end ends the text: the last section, and every section waiting.
func (r *mdRun) end(sc *mdScanner) error {
	if !r.started {
		return nil
	}
	if err := r.endSection(sc.blocks, len(r.text)); err != nil {
		return err
	}
	return r.drain(true)
}

// drain chunks the sections of the queue whose chunks are known: all of them when final, else those
// that do not wait for sections not read yet.
func (r *mdRun) drain(final bool) error {
	for len(r.queue) > 0 {
		if err := r.err(); err != nil {
			return err
		}
		s := r.queue[0]
		if !s.fit {
			if err := r.section(s); err != nil {
				return err
			}
			r.queue = r.queue[1:]
			continue
		}
		// A small section takes in the subsections that follow it while it is small and they fit.
		j, total := 1, s.count
		for s.level > 0 && j < len(r.queue) && total < r.small && r.queue[j].level > s.level && r.queue[j].fit &&
			total+r.queue[j].count <= r.size {
			total += r.queue[j].count
			j++
		}
		if !final && j == len(r.queue) && s.level > 0 && total < r.small {
			break // the next section, not read yet, may join
		}
		p := r.packer()
		for _, t := range r.queue[:j] {
			p.add(unit{start: t.start, end: t.end, tokens: t.count, meta: t.meta})
		}
		p.flush()
		r.queue = r.queue[j:]
	}
	if len(r.queue) == 0 {
		r.queue = nil // not the memory of every section drained
	}
	return r.err()
}

// section packs the blocks of a section that does not fit.
func (r *mdRun) section(s mdSection) error {
	p := r.packer()
	for i, blk := range s.blocks {
		end := s.end
		if i+1 < len(s.blocks) {
			end = s.blocks[i+1].start
		}
		if err := r.block(p, blk, end, s.meta); err != nil {
			return err
		}
	}
	p.flush()
	return r.err()
}

// block adds the block blk, which ends at byte end, of a section with metadata meta to run, cutting it
// when it does not fit.
func (r *mdRun) block(run *packer, blk mdBlock, end int, meta map[string]string) error {
	if err := r.err(); err != nil {
		return err
	}
	start := blk.start
	if n, ok := r.fits(r.text[start:end], r.size); ok {
		run.add(unit{start: start, end: end, tokens: n, meta: meta})
		return nil
	}
	// Cut the block at its first level that cuts it; the pieces that fit join the run, and the others are
	// chunked at the levels below.
	levels := blk.kind.levels()
	cut := -1
	var level SplitFunc
	for cut < 0 && len(levels) > 0 {
		level = levels[0]
		cut = r.nextCut(level, start, end)
		levels = levels[1:]
	}
	prev := start
	for {
		if cut < 0 {
			cut = end
		}
		if n, ok := r.fits(r.text[prev:cut], r.size); ok {
			run.add(unit{start: prev, end: cut, tokens: n, meta: meta})
		} else {
			run.flush()
			if err := r.chunkSpan(prev, cut, levels, meta); err != nil {
				return err
			}
		}
		if cut == end {
			return nil
		}
		prev, cut = cut, r.nextCut(level, cut, end)
	}
}

// mdKind is the kind of a Markdown block.
type mdKind uint8

const (
	mdText        mdKind = iota // paragraphs, list items, block quotes, thematic breaks, indented code
	mdHeading                   // a section heading: ATX or setext, outside list items and block quotes
	mdFence                     // a fenced code block
	mdTable                     // a GitHub table
	mdHTML                      // an HTML block
	mdFrontMatter               // YAML or TOML front matter
)

// levels returns where a block of the kind that does not fit is cut, coarsest first.
func (k mdKind) levels() []SplitFunc {
	switch k {
	case mdText, mdHTML:
		return []SplitFunc{SplitLines, SplitSentences, SplitWords}
	default: // code, table rows, front matter, a setext heading's lines
		return []SplitFunc{SplitLines, SplitWords}
	}
}

// mdBlock is a block of a Markdown text. It runs from start to the next block's start (or the end of the
// text), so it holds the blank lines after it; the first block starts at 0.
type mdBlock struct {
	start int
	kind  mdKind
	level int    // a heading's level, 1 to 6
	title string // a heading's text, or the front matter's format
}

// mdSection is a heading and its blocks up to the next heading; or the text before the first heading; or
// the front matter.
type mdSection struct {
	start, end int
	level      int // the heading's level; 0 for no heading
	meta       map[string]string
	blocks     []mdBlock
	count      int  // its tokens, when fit
	fit        bool // it fits in a chunk
}

// Bounds of the heading path in a chunk's metadata, so that its size does not depend on the input.
const (
	// MaxHeadingBytes is the most bytes of a heading's text in the metadata: a longer one is cut between
	// grapheme clusters and ends with "…" (within the bound).
	MaxHeadingBytes = 200
	// MaxHeadingPathBytes is the most bytes of the "headings" path: while it is longer, the outermost
	// headings are left out of the path (and their "h1".."h6" keys with them); the innermost heading is
	// always kept.
	MaxHeadingPathBytes = 500
	// HeadingSeparator joins the headings of the "headings" path.
	HeadingSeparator = " > "
)

// mdHeadingMeta returns the metadata of a heading path: "h1".."h6" and "headings", or nil for none.
func mdHeadingMeta(path [7]string) map[string]string {
	first, size := len(path), 0 // the outermost level kept, and the path's bytes from it
	for level := len(path) - 1; level >= 0; level-- {
		if path[level] == "" {
			continue
		}
		n := len(path[level])
		if size > 0 {
			n += len(HeadingSeparator)
		}
		if size > 0 && size+n > MaxHeadingPathBytes {
			break
		}
		first, size = level, size+n
	}
	var meta map[string]string
	var names []string
	for level := first; level < len(path); level++ {
		title := path[level]
		if title == "" {
			continue
		}
		if meta == nil {
			meta = map[string]string{}
		}
		meta["h"+strconv.Itoa(level)] = title
		names = append(names, title)
	}
	if meta != nil {
		meta["headings"] = strings.Join(names, HeadingSeparator)
	}
	return meta
}

// mdBoundHeading cuts a heading's text to MaxHeadingBytes, between grapheme clusters, ending it with "…".
func mdBoundHeading(title string) string {
	if len(title) <= MaxHeadingBytes {
		return title
	}
	const ellipsis = "…"
	end, rest, state := 0, title, -1
	for len(rest) > 0 {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		if end+len(cluster) > MaxHeadingBytes-len(ellipsis) {
			break
		}
		end += len(cluster)
	}
	return title[:end] + ellipsis
}

// mdPara is the kind of the open paragraph-like run of lines, which later lines may continue.
type mdPara uint8

const (
	mdParaNone   mdPara = iota
	mdParaTop           // a paragraph at the top level: a setext underline makes it a section heading
	mdParaNested        // a paragraph inside a list item
	mdParaQuote         // a block quote, continued by > lines and lazy lines
	mdParaCode          // indented code, continued by indented lines
)

// mdLeaf is the kind of the open block whose lines are not Markdown.
type mdLeaf uint8

const (
	mdLeafNone mdLeaf = iota
	mdLeafFence
	mdLeafHTML
	mdLeafTable
)

// mdScanner finds the blocks of a Markdown text line by line. Of the containers it follows list items
// (by their content's column), enough to tell a heading or fence inside one from one after it.
type mdScanner struct {
	text   string
	blocks []mdBlock
	lists  []int // the content columns of the open list items, innermost last
	para   mdPara

	leaf       mdLeaf
	leafBase   int    // the content column of the list item holding the leaf (0 at the top level)
	fenceChar  byte   // ` or ~
	fenceLen   int    // the opening fence's length
	htmlEnd    string // what ends the HTML block ("" for a blank line)
	tableDelim bool   // the next line is the table's delimiter row
}

// scanMarkdown returns the blocks of text, in order; the first starts at 0 (leading blank lines are its).
func scanMarkdown(text string) []mdBlock {
	sc := &mdScanner{text: text}
	at := 0
	if end, format := mdFrontMatterEnd(text); end > 0 {
		sc.blocks = append(sc.blocks, mdBlock{start: 0, kind: mdFrontMatter, title: format})
		at = end
	}
	for at < len(text) {
		s, next := mdLineAt(text, at)
		if at == 0 {
			s = strings.TrimPrefix(s, "\ufeff") // a byte order mark
		}
		sc.line(at, s, next)
		at = next
	}
	if len(sc.blocks) == 0 { // only blank lines
		sc.blocks = append(sc.blocks, mdBlock{kind: mdText})
	}
	sc.blocks[0].start = 0
	return sc.blocks
}

// mdLineAt returns the line at byte at without its line ending (\n or \r\n), and where the next line
// starts.
func mdLineAt(text string, at int) (string, int) {
	end, next := len(text), len(text)
	if nl := strings.IndexByte(text[at:], '\n'); nl >= 0 {
		end, next = at+nl, at+nl+1
	}
	s := text[at:end]
	if next > end { // \r before \n belongs to the line ending
		s = strings.TrimSuffix(s, "\r")
	}
	return s, next
}

// mdIndent returns the column of s's first character that is not a space or tab (tabs stop every four
// columns) and its byte offset; the offset is len(s) for a blank line.
func mdIndent(s string) (col, off int) {
	for off < len(s) {
		switch s[off] {
		case ' ':
			col++
		case '\t':
			col += 4 - col%4
		default:
			return col, off
		}
		off++
	}
	return col, off
}

// open starts a block at byte at, in the list items the line stays in.
func (sc *mdScanner) open(at, keep int, blk mdBlock, para mdPara) {
	sc.lists = sc.lists[:keep]
	blk.start = at
	sc.blocks = append(sc.blocks, blk)
	sc.para = para
}

// line reads the line s that starts at byte at; the next line starts at byte next.
func (sc *mdScanner) line(at int, s string, next int) {
	col, off := mdIndent(s)
	blank := off == len(s)
	if sc.leaf != mdLeafNone && sc.inLeaf(s, col, off, blank) {
		return
	}
	if blank {
		sc.para = mdParaNone
		return
	}
	// The list items the line stays in: those whose content it is indented to.
	keep := len(sc.lists)
	for keep > 0 && col < sc.lists[keep-1] {
		keep--
	}
	base := 0
	if keep > 0 {
		base = sc.lists[keep-1]
	}
	rest := s[off:]
	continued := sc.para != mdParaNone && sc.para != mdParaCode // a plain line continues the paragraph

	if col-base >= 4 { // indented code, or a paragraph's continuation
		if sc.para == mdParaNone {
			sc.open(at, keep, mdBlock{kind: mdText}, mdParaCode)
		}
		return
	}
	if sc.para == mdParaTop {
		if level := mdSetextLevel(rest); level > 0 {
			sc.setext(at, level)
			return
		}
	}
	if mdThematicBreak(rest) {
		sc.open(at, keep, mdBlock{kind: mdText}, mdParaNone)
		return
	}
	if level, title, ok := mdATXHeading(rest); ok {
		blk := mdBlock{kind: mdText}
		if keep == 0 {
			blk = mdBlock{kind: mdHeading, level: level, title: title}
		}
		sc.open(at, keep, blk, mdParaNone)
		return
	}
	if ch, n, ok := mdFenceOpen(rest); ok {
		sc.open(at, keep, mdBlock{kind: mdFence}, mdParaNone)
		sc.leaf, sc.leafBase, sc.fenceChar, sc.fenceLen = mdLeafFence, base, ch, n
		return
	}
	if end, from, ok := mdHTMLStart(rest); ok {
		sc.open(at, keep, mdBlock{kind: mdHTML}, mdParaNone)
		if end == "" || !mdContainsFold(rest[from:], end) {
			sc.leaf, sc.leafBase, sc.htmlEnd = mdLeafHTML, base, end
		}
		return
	}
	if rest[0] == '>' {
		if sc.para != mdParaQuote || keep < len(sc.lists) {
			sc.open(at, keep, mdBlock{kind: mdText}, mdParaQuote)
		}
		return
	}
	if content, interrupts, ok := mdListItem(rest, col); ok && (interrupts || !continued || keep < len(sc.lists)) {
		sc.open(at, keep, mdBlock{kind: mdText}, mdParaNested)
		sc.lists = append(sc.lists, content)
		return
	}
	if strings.IndexByte(rest, '|') >= 0 && sc.tableHeader(rest, next) {
		sc.open(at, keep, mdBlock{kind: mdTable}, mdParaNone)
		sc.leaf, sc.leafBase, sc.tableDelim = mdLeafTable, base, true
		return
	}
	// A plain line: it continues an open paragraph (lazily when it is less indented than the paragraph's
	// list item), or starts one.
	if continued {
		return
	}
	para := mdParaTop
	if keep > 0 {
		para = mdParaNested
	}
	sc.open(at, keep, mdBlock{kind: mdText}, para)
}

// inLeaf reports whether the line belongs to the open leaf block, closing the leaf when the line ends it.
// A line that ends the leaf without belonging to it is left to be read as any other.
func (sc *mdScanner) inLeaf(s string, col, off int, blank bool) bool {
	if !blank && col < sc.leafBase { // the line leaves the list item, and so the leaf
		sc.leaf = mdLeafNone
		return false
	}
	switch sc.leaf {
	case mdLeafFence:
		if !blank && col-sc.leafBase < 4 && mdClosesFence(s[off:], sc.fenceChar, sc.fenceLen) {
			sc.leaf = mdLeafNone
		}
		return true
	case mdLeafHTML:
		if sc.htmlEnd == "" {
			if blank {
				sc.leaf = mdLeafNone
				return false
			}
			return true
		}
		if mdContainsFold(s, sc.htmlEnd) {
			sc.leaf = mdLeafNone
		}
		return true
	default: // mdLeafTable
		switch {
		case blank:
		case sc.tableDelim:
			sc.tableDelim = false
			return true
		case col-sc.leafBase >= 4 || !mdStartsBlock(s[off:], col):
			return true
		}
		sc.leaf = mdLeafNone
		return false
	}
}

// setext makes the open top-level paragraph, the last block, a section heading of the level.
func (sc *mdScanner) setext(at, level int) {
	blk := &sc.blocks[len(sc.blocks)-1]
	var lines []string
	size := 0
	for i := blk.start; i < at && size <= 2*MaxHeadingBytes; { // the rest would be cut off
		s, next := mdLineAt(sc.text, i)
		if i == 0 {
			s = strings.TrimPrefix(s, "\ufeff")
		}
		i = next
		if s = strings.Trim(s, " \t"); s == "" && len(lines) == 0 {
			continue // blank lines before the paragraph: the first block starts at 0
		}
		lines = append(lines, s)
		size += len(s) + 1
	}
	blk.kind, blk.level, blk.title = mdHeading, level, mdHeadingText(strings.Join(lines, " "))
	sc.para = mdParaNone
}

// tableHeader reports whether the line rest, whose next line starts at byte next, heads a table: the next
// line is a delimiter row with as many cells.
func (sc *mdScanner) tableHeader(rest string, next int) bool {
	if next >= len(sc.text) {
		return false
	}
	delim, _ := mdLineAt(sc.text, next)
	n, ok := mdDelimiterCells(delim)
	return ok && n == mdTableCells(rest)
}

// mdStartsBlock reports whether rest, the line from its first non-blank character at column col, starts a
// block that ends a table.
func mdStartsBlock(rest string, col int) bool {
	if mdThematicBreak(rest) || rest[0] == '>' {
		return true
	}
	if _, _, ok := mdATXHeading(rest); ok {
		return true
	}
	if _, _, ok := mdFenceOpen(rest); ok {
		return true
	}
	if _, _, ok := mdHTMLStart(rest); ok {
		return true
	}
	_, _, ok := mdListItem(rest, col)
	return ok
}

// mdFrontMatterEnd returns the end of the front matter that text starts with (after its closing line),
// and its format, "yaml" (between --- lines, or --- and ...) or "toml" (between +++ lines); 0 for none.
// The line after the opening one must not be blank, so that a leading thematic break is not taken for
// front matter.
func mdFrontMatterEnd(text string) (int, string) {
	first, at := mdLineAt(text, 0)
	first = strings.TrimRight(strings.TrimPrefix(first, "\ufeff"), " \t")
	format, closers := "", []string(nil)
	switch first {
	case "---":
		format, closers = "yaml", []string{"---", "..."}
	case "+++":
		format, closers = "toml", []string{"+++"}
	default:
		return 0, ""
	}
	for i := 0; at < len(text); i++ {
		s, next := mdLineAt(text, at)
		s = strings.TrimRight(s, " \t")
		for _, c := range closers {
			if s == c {
				return next, format
			}
		}
		if i == 0 && s == "" {
			return 0, ""
		}
		at = next
	}
	return 0, ""
}

// mdATXHeading parses rest, a line from its first non-blank character, as an ATX heading.
func mdATXHeading(rest string) (level int, title string, ok bool) {
	for level < len(rest) && rest[level] == '#' {
		level++
	}
	if level == 0 || level > 6 || level < len(rest) && rest[level] != ' ' && rest[level] != '\t' {
		return 0, "", false
	}
	title = strings.Trim(rest[level:], " \t")
	// An optional closing run of #, after a space (or the whole title).
	if t := strings.TrimRight(title, "#"); t == "" {
		title = ""
	} else if len(t) < len(title) && (t[len(t)-1] == ' ' || t[len(t)-1] == '\t') {
		title = strings.TrimRight(t, " \t")
	}
	return level, mdHeadingText(title), true
}

// mdHeadingText drops a trailing attribute block, as in "Introduction {#intro}" or "Setup {.tabbed}", and
// bounds the text (see MaxHeadingBytes).
func mdHeadingText(title string) string {
	return mdBoundHeading(mdHeadingAttributes(strings.TrimPrefix(title, "\ufeff")))
}

// mdHeadingAttributes drops a trailing attribute block.
func mdHeadingAttributes(title string) string {
	if !strings.HasSuffix(title, "}") {
		return title
	}
	i := strings.LastIndexByte(title, '{')
	switch {
	case i <= 0 || title[i-1] != ' ' && title[i-1] != '\t': // no attributes, or a title that is only them
	case !strings.ContainsRune("#.:", rune(title[i+1])): // not {#id}, {.class} or {: ...}
	case strings.ContainsAny(title[i+1:len(title)-1], "{}"):
	default:
		return strings.TrimRight(title[:i], " \t")
	}
	return title
}

// mdSetextLevel returns 1 for a line of =, 2 for a line of -, or 0.
func mdSetextLevel(rest string) int {
	rest = strings.TrimRight(rest, " \t")
	switch {
	case strings.Trim(rest, "=") == "":
		return 1
	case strings.Trim(rest, "-") == "":
		return 2
	}
	return 0
}

// mdThematicBreak reports whether rest is three or more *, - or _ (the same one), with spaces or tabs.
func mdThematicBreak(rest string) bool {
	c, n := rest[0], 0
	if c != '*' && c != '-' && c != '_' {
		return false
	}
	for i := range len(rest) {
		switch rest[i] {
		case c:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// mdFenceOpen parses rest as an opening code fence: three or more ` or ~ (an info string after backticks
// may not hold a backtick).
func mdFenceOpen(rest string) (ch byte, n int, ok bool) {
	if rest[0] != '`' && rest[0] != '~' {
		return 0, 0, false
	}
	ch = rest[0]
	for n < len(rest) && rest[n] == ch {
		n++
	}
	if n < 3 || ch == '`' && strings.IndexByte(rest[n:], '`') >= 0 {
		return 0, 0, false
	}
	return ch, n, true
}

// mdClosesFence reports whether rest closes a fence of n ch: at least n of them and nothing else but blanks.
func mdClosesFence(rest string, ch byte, n int) bool {
	m := 0
	for m < len(rest) && rest[m] == ch {
		m++
	}
	return m >= n && strings.Trim(rest[m:], " \t") == ""
}

// mdRawTags are the tags whose HTML blocks end at their closing tag (CommonMark's type 1).
var mdRawTags = []string{"pre", "script", "style", "textarea"}

// mdBlockTags are the tags whose HTML blocks end at a blank line (CommonMark's type 6).
var mdBlockTags = map[string]bool{
	"address": true, "article": true, "aside": true, "base": true, "basefont": true, "blockquote": true,
	"body": true, "caption": true, "center": true, "col": true, "colgroup": true, "dd": true, "details": true,
	"dialog": true, "dir": true, "div": true, "dl": true, "dt": true, "fieldset": true, "figcaption": true,
	"figure": true, "footer": true, "form": true, "frame": true, "frameset": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "head": true, "header": true, "hr": true, "html": true,
	"iframe": true, "legend": true, "li": true, "link": true, "main": true, "menu": true, "menuitem": true,
	"nav": true, "noframes": true, "ol": true, "optgroup": true, "option": true, "p": true, "param": true,
	"search": true, "section": true, "summary": true, "table": true, "tbody": true, "td": true, "tfoot": true,
	"th": true, "thead": true, "title": true, "tr": true, "track": true, "ul": true,
}

// mdHTMLStart parses rest as the start of an HTML block. It returns what ends the block ("" for a blank
// line) and where in rest to look for it on this line.
func mdHTMLStart(rest string) (end string, from int, ok bool) {
	if len(rest) < 2 || rest[0] != '<' {
		return "", 0, false
	}
	switch {
	case strings.HasPrefix(rest, "<!--"):
		return "-->", 4, true
	case strings.HasPrefix(rest, "<?"):
		return "?>", 2, true
	case strings.HasPrefix(rest, "<![CDATA["):
		return "]]>", 9, true
	case rest[1] == '!' && len(rest) > 2 && mdIsLetter(rest[2]):
		return ">", 2, true
	}
	i := 1
	closing := rest[1] == '/'
	if closing {
		i++
	}
	j := i
	for j < len(rest) && (mdIsLetter(rest[j]) || j > i && rest[j] >= '0' && rest[j] <= '9') {
		j++
	}
	if j == i {
		return "", 0, false
	}
	if j < len(rest) && rest[j] != ' ' && rest[j] != '\t' && rest[j] != '>' && !strings.HasPrefix(rest[j:], "/>") {
		return "", 0, false
	}
	name := strings.ToLower(rest[i:j])
	for _, raw := range mdRawTags {
		if !closing && name == raw {
			return "</" + raw + ">", j, true
		}
	}
	if mdBlockTags[name] {
		return "", j, true
	}
	return "", 0, false
}

func mdIsLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// mdContainsFold reports whether s contains substr, which is lower case, ignoring ASCII case.
func mdContainsFold(s, substr string) bool {
	for i := 0; i+len(substr) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(substr)], substr) {
			return true
		}
	}
	return false
}

// mdListItem parses rest, a line from its first non-blank character at column col, as the start of a list
// item: a bullet (-, +, *) or a number of up to nine digits and . or ), then a blank or the end of the line.
// It returns the column of the item's content, and whether the item may interrupt a paragraph (it is not
// empty, and a numbered one starts at 1).
func mdListItem(rest string, col int) (content int, interrupts, ok bool) {
	width, first := 0, true
	switch c := rest[0]; {
	case c == '-' || c == '+' || c == '*':
		width = 1
	case '0' <= c && c <= '9':
		for width < len(rest) && width < 9 && '0' <= rest[width] && rest[width] <= '9' {
			width++
		}
		if width == len(rest) || rest[width] != '.' && rest[width] != ')' {
			return 0, false, false
		}
		first = strings.TrimLeft(rest[:width], "0") == "1"
		width++
	default:
		return 0, false, false
	}
	after := rest[width:]
	if after != "" && after[0] != ' ' && after[0] != '\t' {
		return 0, false, false
	}
	spaces, off := mdIndent(after)
	if off == len(after) { // an empty item
		return col + width + 1, false, true
	}
	if spaces > 4 { // the content is indented code, one column after the marker
		spaces = 1
	}
	return col + width + spaces, first, true
}

// mdTableCells returns the number of cells in a table row: its unescaped pipes split it, and one pipe at
// either end does not count.
func mdTableCells(row string) int {
	row = strings.Trim(row, " \t")
	n := 1
	for i := 0; i < len(row); i++ {
		switch row[i] {
		case '\\':
			i++
		case '|':
			if i > 0 && i < len(row)-1 {
				n++
			}
		}
	}
	return n
}

// mdDelimiterCells parses a table's delimiter row, such as "|---|:--:|", and returns its number of cells.
// The row must have a pipe.
func mdDelimiterCells(row string) (int, bool) {
	row = strings.Trim(row, " \t")
	if strings.IndexByte(row, '|') < 0 {
		return 0, false
	}
	row = strings.TrimPrefix(row, "|")
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, "\\|") {
		row = row[:len(row)-1]
	}
	cells := strings.Split(row, "|")
	for _, cell := range cells {
		cell = strings.Trim(cell, " \t")
		cell = strings.TrimSuffix(strings.TrimPrefix(cell, ":"), ":")
		if cell == "" || strings.Trim(cell, "-") != "" {
			return 0, false
		}
	}
	return len(cells), true
}
