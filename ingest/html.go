package ingest

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlToMarkdown extracts the visible text of an HTML document as Markdown, and its title.
//
// The document is parsed as a browser would (golang.org/x/net/html). What is not shown is dropped: <head>
// (but its <title> is the title), <script>, <style>, <noscript>, <template>, <svg>, <iframe>, <canvas>,
// comments, and the elements that hide themselves, with all they hold: the hidden attribute,
// aria-hidden="true", and an inline style of display: none, visibility: hidden or collapse, or
// content-visibility: hidden (see hiddenAttrs). <nav>, <header>, <footer> and <aside> are kept.
// Structure is kept as Markdown, for the markdown chunker:
//   - h1 to h6 become "#" to "######" headings, on one line;
//   - paragraphs and other blocks (div, section, ...) are separated by blank lines;
//   - list items become "- " items ("1. ", "2. ", ... in an <ol>), nested ones indented;
//   - blockquotes become "> " lines;
//   - <pre> becomes a fenced code block, its text verbatim (the fence is longer than any run of backticks in
//     it; a "language-x" or "lang-x" class gives the info string);
//   - a table becomes a GitHub table: "| a | b |" rows, the first row the header, "|" in a cell escaped;
//   - <br> is a line break, <hr> a block break;
//   - a link is its text (the URL is left out: it seldom helps retrieval), an image its alt text.
//
// Elsewhere, runs of white space become one space and entities are decoded. Text is not escaped as
// Markdown, except that a line of text starting with "#", "```" or "~~~" gets a backslash before it, so that
// a paragraph never reads as a heading or a fence. Indentation stops growing after eight levels of lists and
// quotes. The title is the <title>'s text, or the first <h1>'s when there is no title.
//
// A document the parser rejects (elements nested more than 512 deep) is read token by token instead: its
// text and headings, with blocks separated and the content of <script>, <style>, <noscript>, <iframe>,
// <template>, <svg>, <canvas> and of hidden elements left out, but no lists, quotes, fences or tables.
func htmlToMarkdown(text string) (markdown, title string) {
	doc, err := html.Parse(strings.NewReader(text))
	if err != nil {
		return tokensToMarkdown(text)
	}
	w := &mdWriter{}
	w.node(doc)
	title = findTitle(doc)
	return w.String(), title
}

// maxNesting is how many levels of list and quote prefixes are written out.
const maxNesting = 8

// mdWriter writes Markdown. Block structure is kept lazily: breaks owed before the next content, a space
// owed within a line, a list marker or heading marks owed at the start of the next line.
type mdWriter struct {
	out      strings.Builder
	prefixes []string // per open list item or quote: the continuation prefix ("  ", "> ")
	item     string   // the marker of a list item with no content yet ("- ", "3. ")
	itemAt   int      // the index in prefixes of the item's indentation
	lead     string   // heading marks owed before the next content ("## ")
	breaks   int      // newlines owed before the next content: 1 a line break, 2 a blank line
	space    bool     // a space owed before the next content on this line
	col0     bool     // nothing but the prefix is on the current line
	last     string   // the prefix of the last line written, without a list marker
	written  bool     // something has been written
	inline   int      // > 0 inside a heading or table cell: blocks and line breaks become spaces
	lists    []int    // per open list: the next number of an ordered list, or -1
}

// String returns the Markdown written, ending in a newline unless it is empty.
func (w *mdWriter) String() string {
	if !w.written {
		return ""
	}
	return w.out.String() + "\n"
}

// linePrefix returns the prefix of a new line: with the pending list marker in place of its item's
// indentation when item is true. Prefixes deeper than maxNesting are left out, but for a pending marker and
// what was opened after it.
func (w *mdWriter) linePrefix(item bool) string {
	marker := item && w.item != ""
	var b strings.Builder
	for i, p := range w.prefixes {
		switch {
		case marker && i == w.itemAt:
			b.WriteString(w.item)
		case i < maxNesting || marker && i > w.itemAt:
			b.WriteString(p)
		}
	}
	if marker && w.itemAt >= len(w.prefixes) {
		b.WriteString(w.item)
	}
	return b.String()
}

// begin pays what is owed before content: newlines, the line's prefix, a list marker and heading marks, or
// a space. It reports whether the content starts a line of its own, with nothing before it but the prefix
// of an enclosing list item or quote.
func (w *mdWriter) begin(empty bool) (bare bool) {
	if w.written && w.breaks > 0 {
		w.out.WriteByte('\n')
		if w.breaks > 1 { // a blank line, inside only what holds both lines
			next := w.linePrefix(false)
			n := 0
			for n < len(next) && n < len(w.last) && next[n] == w.last[n] {
				n++
			}
			w.out.WriteString(strings.TrimRight(next[:n], " "))
			w.out.WriteByte('\n')
		}
		w.col0 = true
	}
	w.breaks = 0
	if w.col0 || !w.written {
		bare = w.item == "" && w.lead == ""
		w.last = w.linePrefix(false)
		p := w.linePrefix(true) + w.lead
		if empty {
			p = strings.TrimRight(p, " ")
		}
		w.out.WriteString(p)
		w.item, w.lead = "", ""
		w.col0 = false
	} else if w.space {
		w.out.WriteByte(' ')
	}
	w.space = false
	w.written = true
	return bare
}

// block ends the current block: the next content starts after a blank line (a line break when breaks is 1).
func (w *mdWriter) block(breaks int) {
	if w.inline > 0 {
		w.space = true
		return
	}
	if w.item != "" { // a list item with no content yet keeps its own break
		return
	}
	w.breaks = max(w.breaks, breaks)
}

// lineBreak is a <br>.
func (w *mdWriter) lineBreak() {
	switch {
	case w.inline > 0:
		w.space = true
	case w.item == "" && w.written:
		w.breaks = min(w.breaks+1, 2)
	}
}

func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// text writes s with its runs of white space collapsed.
func (w *mdWriter) text(s string) {
	for i := 0; i < len(s); {
		if isHTMLSpace(s[i]) {
			w.space = true
			i++
			continue
		}
		j := i
		for j < len(s) && !isHTMLSpace(s[j]) {
			j++
		}
		word := s[i:j]
		if w.begin(false) && (word[0] == '#' || strings.HasPrefix(word, "```") || strings.HasPrefix(word, "~~~")) {
			w.out.WriteByte('\\')
		}
		w.out.WriteString(word)
		i = j
	}
}

// line writes s verbatim as a line of its own.
func (w *mdWriter) line(s string) {
	if w.written {
		w.breaks = max(w.breaks, 1)
	}
	w.begin(s == "")
	w.out.WriteString(s)
	w.breaks = 1
}

// dropped are the elements whose content is never shown.
var dropped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Iframe: true, atom.Canvas: true, atom.Title: true,
}

// blocks are the elements that start and end a block (besides those with rules of their own).
var blocks = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Body: true, atom.Center: true,
	atom.Details: true, atom.Dialog: true, atom.Div: true, atom.Dl: true, atom.Fieldset: true,
	atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Form: true, atom.Header: true,
	atom.Hgroup: true, atom.Hr: true, atom.Html: true, atom.Legend: true, atom.Main: true, atom.Nav: true,
	atom.P: true, atom.Section: true, atom.Summary: true, atom.Caption: true, atom.Menu: true,
	atom.Search: true,
}

// lines are the elements that take a line of their own.
var lines = map[atom.Atom]bool{
	atom.Dt: true, atom.Dd: true, atom.Option: true, atom.Tr: true, atom.Td: true, atom.Th: true,
}

// hidden reports whether n hides itself and all it holds (see hiddenAttrs).
func hidden(n *html.Node) bool { return hiddenAttrs(n.Attr) }

// hiddenAttrs reports whether an element with attrs is not shown, by what it says of itself: the hidden
// attribute (any value), aria-hidden="true" (any case and spacing), or an inline style whose display is
// none, whose visibility is hidden or collapse, or whose content-visibility is hidden (see styleHides).
// Such an element is dropped with all it holds: hidden text is a classic hiding place for instructions
// injected into a page, and a reader never sees it. (A descendant that sets visibility: visible again is
// dropped too.) Style sheets, classes and other ways of hiding (zero size, off-screen, transparent text)
// are not looked at.
func hiddenAttrs(attrs []html.Attribute) bool {
	for _, a := range attrs {
		if a.Namespace != "" {
			continue
		}
		switch a.Key {
		case "hidden":
			return true
		case "aria-hidden":
			if strings.EqualFold(strings.Trim(a.Val, " \t\n\r\f"), "true") {
				return true
			}
		case "style":
			if styleHides(a.Val) {
				return true
			}
		}
	}
	return false
}

// styleHides reports whether an inline style attribute's declarations hide the element, as a browser reads
// them: comments are white space, escapes (\6e, \n) are decoded, names and keywords are of any case, and
// of the declarations of one property the last valid one wins, unless an earlier one is !important and it
// is not. A value a browser would throw away (display: garbage) does not undo an earlier display: none.
func styleHides(style string) bool {
	type decl struct {
		value     string
		important bool
	}
	valid := map[string]map[string]bool{"display": displayValues, "visibility": visibilityValues, "content-visibility": contentVisibilityValues}
	got := map[string]*decl{"display": {}, "visibility": {}, "content-visibility": {}}
	for part := range strings.SplitSeq(cssUnescape(cssStripComments(style)), ";") {
		name, value, ok := strings.Cut(part, ":")
		if !ok {
			continue
		}
		name = strings.ToLower(strings.TrimSpace(name))
		d := got[name]
		if d == nil {
			continue
		}
		value = strings.ToLower(strings.Join(strings.Fields(value), " "))
		important := false
		if i := strings.LastIndexByte(value, '!'); i >= 0 && strings.TrimSpace(value[i+1:]) == "important" {
			value, important = strings.TrimSpace(value[:i]), true
		}
		if !valid[name][value] || (d.important && !important) {
			continue
		}
		*d = decl{value: value, important: important}
	}
	return got["display"].value == "none" || got["visibility"].value == "hidden" || got["visibility"].value == "collapse" ||
		got["content-visibility"].value == "hidden"
}

// The values a browser accepts for the properties styleHides reads (lowercase, single spaces).
var (
	cssGlobal               = []string{"inherit", "initial", "unset", "revert", "revert-layer"}
	displayValues           = cssValues(cssGlobal, "none", "contents", "block", "inline", "run-in", "flow", "flow-root", "table", "flex", "grid", "ruby", "list-item", "inline-block", "inline-table", "inline-flex", "inline-grid", "inline-list-item", "table-row-group", "table-header-group", "table-footer-group", "table-row", "table-cell", "table-column-group", "table-column", "table-caption", "ruby-base", "ruby-text", "ruby-base-container", "ruby-text-container", "math", "inline math", "block math", "block flow", "block flow-root", "block table", "block flex", "block grid", "block ruby", "inline flow", "inline flow-root", "inline table", "inline flex", "inline grid", "inline ruby", "run-in flow", "block flow list-item", "inline flow list-item", "block list-item", "inline list-item", "flow list-item", "flow-root list-item", "list-item block", "list-item inline", "list-item flow", "-webkit-box", "-webkit-inline-box", "-webkit-flex", "-webkit-inline-flex", "-ms-flexbox", "-ms-inline-flexbox", "-ms-grid", "-ms-inline-grid", "-moz-box", "-moz-inline-box")
	visibilityValues        = cssValues(cssGlobal, "visible", "hidden", "collapse")
	contentVisibilityValues = cssValues(cssGlobal, "visible", "auto", "hidden")
)

func cssValues(global []string, values ...string) map[string]bool {
	m := map[string]bool{}
	for _, v := range append(values, global...) {
		m[v] = true
	}
	return m
}

// cssStripComments replaces each /* comment */ (an unterminated one runs to the end) with a space.
func cssStripComments(s string) string {
	if !strings.Contains(s, "/*") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "/*")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteByte(' ')
		j := strings.Index(s[i+2:], "*/")
		if j < 0 {
			return b.String()
		}
		s = s[i+2+j+2:]
	}
}

// cssUnescape decodes CSS escapes: a backslash and 1 to 6 hex digits (and one white space after them) is
// that code point (0, a surrogate or one past U+10FFFF is U+FFFD); a backslash and a newline is nothing;
// a backslash and any other character is that character.
func cssUnescape(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			i++
			continue
		}
		i++
		j := i
		for j < len(s) && j-i < 6 && isHex(s[j]) {
			j++
		}
		switch {
		case j > i:
			v, _ := strconv.ParseUint(s[i:j], 16, 32)
			r := rune(v)
			if r == 0 || r > unicode.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
				r = unicode.ReplacementChar
			}
			b.WriteRune(r)
			if j < len(s) && isHTMLSpace(s[j]) {
				j++
			}
			i = j
		case i < len(s) && s[i] == '\n':
			i++
		case i < len(s):
			_, size := utf8.DecodeRuneInString(s[i:])
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	return b.String()
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func (w *mdWriter) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.node(c)
	}
}

// node writes n and what it holds.
func (w *mdWriter) node(n *html.Node) {
	switch n.Type {
	case html.DocumentNode:
		w.children(n)
		return
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
	default: // comments, doctypes
		return
	}
	if n.Namespace != "" { // MathML: its text is shown
		if n.Namespace == "svg" || hidden(n) {
			return
		}
		w.children(n)
		return
	}
	if dropped[n.DataAtom] || hidden(n) {
		return
	}
	switch n.DataAtom {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if w.inline > 0 {
			w.children(n)
			return
		}
		w.block(2)
		w.lead = strings.Repeat("#", int(n.Data[1]-'0')) + " "
		w.inline++
		w.children(n)
		w.inline--
		w.lead = ""
		w.block(2)
	case atom.Ul, atom.Ol:
		nested := len(w.lists) > 0
		if nested {
			w.block(1)
		} else {
			w.block(2)
		}
		next := -1
		if n.DataAtom == atom.Ol {
			next = 1
			if s, ok := attr(n, "start"); ok {
				if v, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && v >= 0 && v < 1e9 {
					next = v
				}
			}
		}
		w.lists = append(w.lists, next)
		w.children(n)
		w.lists = w.lists[:len(w.lists)-1]
		if nested {
			w.block(1)
		} else {
			w.block(2)
		}
	case atom.Li:
		if w.inline > 0 {
			w.space = true
			w.children(n)
			return
		}
		marker := "- "
		if k := len(w.lists) - 1; k >= 0 && w.lists[k] >= 0 {
			marker = strconv.Itoa(w.lists[k]) + ". "
			w.lists[k]++
		}
		w.item = "" // an empty item before this one
		w.block(1)
		w.item, w.itemAt = marker, len(w.prefixes)
		w.prefixes = append(w.prefixes, strings.Repeat(" ", len(marker)))
		w.children(n)
		w.prefixes = w.prefixes[:len(w.prefixes)-1]
		w.item = ""
		w.block(1)
	case atom.Blockquote:
		w.block(2)
		w.prefixes = append(w.prefixes, "> ")
		w.children(n)
		w.prefixes = w.prefixes[:len(w.prefixes)-1]
		w.block(2)
	case atom.Pre:
		if w.inline > 0 {
			w.children(n)
			return
		}
		w.pre(n)
	case atom.Table:
		if w.inline > 0 {
			w.space = true
			w.children(n)
			w.space = true
			return
		}
		w.table(n)
	case atom.Br:
		w.lineBreak()
	case atom.Img:
		if alt, _ := attr(n, "alt"); alt != "" {
			w.text(alt)
		}
	default:
		switch {
		case blocks[n.DataAtom]:
			w.block(2)
			w.children(n)
			w.block(2)
		case lines[n.DataAtom]:
			w.block(1)
			w.children(n)
			w.block(1)
		default:
			w.children(n)
		}
	}
}

// pre writes a <pre> as a fenced code block.
func (w *mdWriter) pre(n *html.Node) {
	var b strings.Builder
	verbatim(&b, n)
	body := strings.TrimRight(b.String(), "\n")
	if strings.TrimSpace(body) == "" {
		w.block(2)
		return
	}
	run, longest := 0, 0
	for i := 0; i < len(body); i++ {
		if body[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	w.block(2)
	w.line(fence + codeLanguage(n))
	for l := range strings.SplitSeq(body, "\n") {
		w.line(l)
	}
	w.line(fence)
	w.block(2)
}

// verbatim writes the text under n as it is, <br> as a newline, leaving out what is never shown.
func verbatim(b *strings.Builder, n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == html.TextNode:
			b.WriteString(c.Data)
		case c.Type != html.ElementNode || c.Namespace == "svg" || dropped[c.DataAtom] || hidden(c):
		case c.DataAtom == atom.Br:
			b.WriteByte('\n')
		case c.DataAtom == atom.Img:
			alt, _ := attr(c, "alt")
			b.WriteString(alt)
		default:
			verbatim(b, c)
		}
	}
}

// codeLanguage returns the language a "language-x" or "lang-x" class of a <pre> or of a <code> in it names,
// or "".
func codeLanguage(pre *html.Node) string {
	for _, n := range []*html.Node{pre, pre.FirstChild} {
		if n == nil || n.Type != html.ElementNode {
			continue
		}
		class, _ := attr(n, "class")
		for f := range strings.FieldsSeq(class) {
			lang, ok := strings.CutPrefix(f, "language-")
			if !ok {
				lang, ok = strings.CutPrefix(f, "lang-")
			}
			if ok && lang != "" && strings.IndexFunc(lang, func(r rune) bool {
				return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("+-_.#", r))
			}) < 0 {
				return lang
			}
		}
	}
	return ""
}

// table writes a table as a GitHub table, its first row the header.
func (w *mdWriter) table(n *html.Node) {
	var caption string
	var rows [][]string
	var rowsOf func(n *html.Node)
	rowsOf = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || hidden(c) {
				continue
			}
			switch c.DataAtom {
			case atom.Caption:
				caption = inlineText(c)
			case atom.Thead, atom.Tbody, atom.Tfoot:
				rowsOf(c)
			case atom.Tr:
				var row []string
				empty := true
				for cell := c.FirstChild; cell != nil; cell = cell.NextSibling {
					if cell.Type == html.ElementNode && (cell.DataAtom == atom.Td || cell.DataAtom == atom.Th) && !hidden(cell) {
						t := strings.ReplaceAll(inlineText(cell), "|", `\|`)
						empty = empty && t == ""
						row = append(row, t)
					}
				}
				if !empty {
					rows = append(rows, row)
				}
			}
		}
	}
	rowsOf(n)
	w.block(2)
	if caption != "" {
		w.text(caption)
		w.block(2)
	}
	if len(rows) == 0 {
		return
	}
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	row := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range cols {
			b.WriteByte(' ')
			if i < len(cells) {
				b.WriteString(cells[i])
			}
			b.WriteString(" |")
		}
		w.line(b.String())
	}
	row(rows[0])
	row(slices.Repeat([]string{"---"}, cols))
	for _, r := range rows[1:] {
		row(r)
	}
	w.block(2)
}

// inlineText returns the text under n on one line, white space collapsed.
func inlineText(n *html.Node) string {
	w := &mdWriter{inline: 1}
	w.children(n)
	return strings.TrimSpace(w.out.String())
}

// findTitle returns the text of the document's first <title>, or of its first <h1> that is shown when it
// has no title.
func findTitle(doc *html.Node) string {
	var h1 *html.Node
	var find func(n *html.Node) string
	find = func(n *html.Node) string {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || c.Namespace != "" {
				continue
			}
			switch c.DataAtom {
			case atom.Title:
				var b strings.Builder
				verbatim(&b, c)
				if t := strings.Join(strings.Fields(b.String()), " "); t != "" {
					return t
				}
				continue
			case atom.H1:
				if h1 == nil && !hidden(c) {
					h1 = c
				}
			}
			if hidden(c) && c.DataAtom != atom.Head { // a hidden <head> still holds the title
				continue
			}
			if t := find(c); t != "" {
				return t
			}
		}
		return ""
	}
	if t := find(doc); t != "" {
		return t
	}
	if h1 != nil {
		return inlineText(h1)
	}
	return ""
}

// tokensToMarkdown extracts text from HTML the parser rejected, token by token.
func tokensToMarkdown(text string) (markdown, title string) {
	z := html.NewTokenizer(strings.NewReader(text))
	w := &mdWriter{}
	skip := false // the next text token is the raw content of a dropped element
	inTitle := false
	// An element that is not shown (hidden, or a <template>, <svg> or <canvas>) is left out with all it
	// holds: up to the end tag that closes it, counting the elements of its name opened inside it. (One
	// whose end tag is left out runs to the end of the document: more is dropped, never less.)
	var hideName string
	hideDepth := 0
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return w.String(), strings.TrimSpace(title)
		case html.TextToken:
			switch {
			case hideDepth > 0:
			case inTitle:
				if title == "" {
					title = strings.Join(strings.Fields(string(z.Text())), " ")
				}
			case !skip:
				w.text(string(z.Text()))
			}
			skip = false
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			a := tok.DataAtom
			start := tt != html.EndTagToken
			if hideDepth > 0 {
				switch {
				case tt == html.StartTagToken && tok.Data == hideName:
					hideDepth++
				case tt == html.EndTagToken && tok.Data == hideName:
					hideDepth--
				}
				continue
			}
			if tt == html.StartTagToken && !voidElements[a] && (hiddenAttrs(tok.Attr) || a == atom.Template || a == atom.Svg || a == atom.Canvas) {
				hideName, hideDepth = tok.Data, 1
				continue
			}
			skip = start && (a == atom.Script || a == atom.Style || a == atom.Noscript || a == atom.Iframe)
			inTitle = start && a == atom.Title
			switch a {
			case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				w.block(2)
				w.lead = ""
				if start {
					w.lead = strings.Repeat("#", int(a.String()[1]-'0')) + " "
				}
			case atom.Br:
				w.lineBreak()
			default:
				if blocks[a] || lines[a] || a == atom.Li || a == atom.Ul || a == atom.Ol || a == atom.Pre ||
					a == atom.Table || a == atom.Blockquote {
					w.block(2)
				}
			}
		}
	}
}

// voidElements are the elements that have no end tag and hold nothing.
var voidElements = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true, atom.Embed: true, atom.Hr: true, atom.Img: true,
	atom.Input: true, atom.Keygen: true, atom.Link: true, atom.Meta: true, atom.Param: true, atom.Source: true,
	atom.Track: true, atom.Wbr: true,
}
