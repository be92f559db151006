package tokenizer

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/context-loom/loom"
)

// Errors returned by this package.
var (
	// ErrUnknownEncoding is returned by [Get] for a name that is not an encoding; the message lists the known ones.
	ErrUnknownEncoding = loom.NewError(loom.ErrInvalid, "tokenizer: unknown encoding")
	// ErrUnknownModel is returned by [ForModel] for a model name the registry does not know; the message
	// lists the known ones.
	ErrUnknownModel = loom.NewError(loom.ErrInvalid, "tokenizer: unknown model")
	// ErrInvalidModel is returned by [Register] for a model whose name, limits or chat overheads are invalid.
	ErrInvalidModel = loom.NewError(loom.ErrInvalid, "tokenizer: invalid model")
	// ErrSchemaDepth is returned by [CheckSchemaDepth], wrapped with the depth, for tool parameters nested
	// deeper than MaxSchemaDepth.
	ErrSchemaDepth = loom.NewError(loom.ErrInvalid, "tokenizer: a tool's parameters are nested too deep")
)

// Names of the exact encodings.
const (
	CL100KBase = "cl100k_base" // GPT-4, GPT-3.5-turbo, text-embedding-3-*
	O200KBase  = "o200k_base"  // GPT-4o, GPT-4.1, GPT-5, o1, o3, o4
)

//go:embed cl100k_base.vocab.gz o200k_base.vocab.gz
var vocabFiles embed.FS

// generatedEncoding is what the generator knows of an encoding (encodings_gen.go).
type generatedEncoding struct {
	ordinary    int            // ordinary tokens have ids 0..ordinary-1
	maxTokenLen int            // longest ordinary token, in bytes
	specials    map[string]int // special token text -> id
}

// Encoding is an exact byte-pair encoding such as cl100k_base. Get one with [Get]; it is immutable and safe
// for concurrent use. Its vocabulary is decoded on first use.
type Encoding struct {
	name  string
	gen   generatedEncoding
	split splitFunc

	once  sync.Once
	vocab *vocab
	err   error
}

// vocab is the decoded vocabulary of an encoding.
type vocab struct {
	ranks       *rankTable // token bytes -> id (its rank)
	blob        string     // every token's bytes, in id order
	offs        []uint32   // token id's bytes are blob[offs[id]:offs[id+1]]
	maxLen      int
	classes     *classTable
	specials    map[int]string // special id -> text
	scratchPool sync.Pool      // of *scratch
	freeCaches  chan *caches   // bounded free list of caches
}

var encodings = map[string]*Encoding{
	CL100KBase: {name: CL100KBase, gen: generatedEncodings[CL100KBase], split: splitCL100K},
	O200KBase:  {name: O200KBase, gen: generatedEncodings[O200KBase], split: splitO200K},
}

// Encodings returns the names of the exact encodings, sorted.
func Encodings() []string {
	names := make([]string, 0, len(encodings))
	for name := range encodings {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Get returns the encoding called name ("cl100k_base" or "o200k_base"), decoding its vocabulary on first use.
// It returns an error wrapping [ErrUnknownEncoding] for other names.
func Get(name string) (*Encoding, error) {
	e, ok := encodings[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownEncoding, name, strings.Join(Encodings(), ", "))
	}
	if err := e.load(); err != nil {
		return nil, err
	}
	return e, nil
}

// CL100K returns the cl100k_base encoding. It panics only if the binary's embedded vocabulary is corrupt,
// which the package's tests rule out.
func CL100K() *Encoding { return mustGet(CL100KBase) }

// O200K returns the o200k_base encoding. It panics only if the binary's embedded vocabulary is corrupt,
// which the package's tests rule out.
func O200K() *Encoding { return mustGet(O200KBase) }

func mustGet(name string) *Encoding {
	e, err := Get(name)
	if err != nil {
		panic(err)
	}
	return e
}

func (e *Encoding) load() error {
	e.once.Do(func() { e.vocab, e.err = loadVocab(e.name, e.gen) })
	return e.err
}

func loadVocab(name string, gen generatedEncoding) (*vocab, error) {
	f, err := vocabFiles.Open(name + ".vocab.gz")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: open %s vocabulary: %w", name, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: read %s vocabulary: %w", name, err)
	}
	var buf bytes.Buffer
	buf.Grow(gen.ordinary * 8)
	if _, err := io.Copy(&buf, zr); err != nil {
		return nil, fmt.Errorf("tokenizer: read %s vocabulary: %w", name, err)
	}
	raw := buf.Bytes()
	v := &vocab{
		offs:       make([]uint32, 0, gen.ordinary+1),
		maxLen:     gen.maxTokenLen,
		classes:    loadClasses(),
		specials:   make(map[int]string, len(gen.specials)),
		freeCaches: make(chan *caches, runtime.GOMAXPROCS(0)),
	}
	// The file is a length byte and the token's bytes, for each id in order; the blob keeps just the bytes.
	blob := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		n := int(raw[i])
		if n == 0 || i+1+n > len(raw) {
			return nil, fmt.Errorf("tokenizer: %s vocabulary is corrupt at byte %d", name, i)
		}
		v.offs = append(v.offs, uint32(len(blob)))
		blob = append(blob, raw[i+1:i+1+n]...)
		i += 1 + n
	}
	v.offs = append(v.offs, uint32(len(blob)))
	if len(v.offs)-1 != gen.ordinary {
		return nil, fmt.Errorf("tokenizer: %s vocabulary has %d tokens, want %d", name, len(v.offs)-1, gen.ordinary)
	}
	v.blob = string(blob)
	v.ranks = newRankTable(v.blob, v.offs)
	for text, id := range gen.specials {
		v.specials[id] = text
	}
	return v, nil
}

// Name returns the encoding's name, such as "cl100k_base".
func (e *Encoding) Name() string { return e.name }

// VocabSize returns the number of token ids, ordinary and special: one more than the largest id.
func (e *Encoding) VocabSize() int {
	n := e.gen.ordinary
	for _, id := range e.gen.specials {
		n = max(n, id+1)
	}
	return n
}

// SpecialTokens returns the encoding's special tokens (text -> id), a new map on each call.
func (e *Encoding) SpecialTokens() map[string]int {
	m := make(map[string]int, len(e.gen.specials))
	for k, v := range e.gen.specials {
		m[k] = v
	}
	return m
}

// Count returns the number of tokens in text, the same as len(e.Encode(text)) but without building the
// list. For valid UTF-8 it allocates nothing.
func (e *Encoding) Count(text string) int {
	n, _ := e.CountUpTo(text, -1)
	return n
}

// CountUpTo counts the tokens of text but stops once the count exceeds limit: within reports whether the
// text has at most limit tokens, and n is then its exact count; otherwise n is a count greater than limit
// (not the total). A negative limit means no limit.
func (e *Encoding) CountUpTo(text string, limit int) (n int, within bool) {
	text = sanitize(text)
	v := e.vocab
	s := v.getScratch(len(text))
	defer v.putScratch(s)
	for i := 0; i < len(text); {
		j := e.split(v.classes, text, i)
		n += v.countPiece(text[i:j], s)
		if limit >= 0 && n > limit {
			return n, false
		}
		i = j
	}
	return n, true
}

// Encode returns the token ids of text. Text that looks like a special token, such as "<|endoftext|>", is
// encoded as ordinary text; see [Encoding.EncodeSpecial].
func (e *Encoding) Encode(text string) []int {
	return e.appendOrdinary(make([]int, 0, len(text)/4+1), sanitize(text))
}

// EncodeSpecial returns the token ids of text, encoding each occurrence of one of the encoding's special
// tokens (see [Encoding.SpecialTokens]) as that special token. Use it only for trusted text: a user who can
// type "<|endoftext|>" can otherwise end a document early.
func (e *Encoding) EncodeSpecial(text string) []int {
	text = sanitize(text)
	ids := make([]int, 0, len(text)/4+1)
	for {
		at, special := e.nextSpecial(text)
		if at < 0 {
			return e.appendOrdinary(ids, text)
		}
		ids = e.appendOrdinary(ids, text[:at])
		ids = append(ids, e.gen.specials[special])
		text = text[at+len(special):]
	}
}

// nextSpecial returns the position and text of the leftmost special token in text (the longest at that
// position), or -1.
func (e *Encoding) nextSpecial(text string) (int, string) {
	best, bestText := -1, ""
	for special := range e.gen.specials {
		at := strings.Index(text, special)
		if at < 0 {
			continue
		}
		if best < 0 || at < best || (at == best && len(special) > len(bestText)) {
			best, bestText = at, special
		}
	}
	return best, bestText
}

func (e *Encoding) appendOrdinary(ids []int, text string) []int {
	v := e.vocab
	s := v.getScratch(len(text))
	defer v.putScratch(s)
	for i := 0; i < len(text); {
		j := e.split(v.classes, text, i)
		ids = v.appendPiece(ids, text[i:j], s)
		i = j
	}
	return ids
}

// Decode returns the text of token ids: their bytes, concatenated. Decode(Encode(s)) == s for valid UTF-8;
// a prefix of a token list may end inside a character, so its text may not be valid UTF-8. Ids that are not
// tokens of this encoding decode to nothing.
func (e *Encoding) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(e.tokenText(id))
	}
	return b.String()
}

// TokenBytes returns the bytes of one token id, and false if id is not a token of this encoding.
func (e *Encoding) TokenBytes(id int) ([]byte, bool) {
	if !e.isToken(id) {
		return nil, false
	}
	return []byte(e.tokenText(id)), true
}

func (e *Encoding) isToken(id int) bool {
	if id >= 0 && id < e.gen.ordinary {
		return true
	}
	_, ok := e.vocab.specials[id]
	return ok
}

func (e *Encoding) tokenText(id int) string {
	v := e.vocab
	if id >= 0 && id < e.gen.ordinary {
		return v.blob[v.offs[id]:v.offs[id+1]]
	}
	return v.specials[id]
}

// Truncate returns the longest prefix of text that ends at a token boundary of text's encoding and at a
// character boundary, and that itself encodes to at most maxTokens tokens. (A prefix's own encoding can
// differ from the start of the text's: "a  " ends in one token of two spaces where "a  b" has two.) It
// returns text itself when it fits, and "" when maxTokens <= 0. For invalid UTF-8 the cut is made as if each
// ill-formed subsequence were U+FFFD, and a prefix of the original bytes is returned.
func (e *Encoding) Truncate(text string, maxTokens int) string {
	if maxTokens <= 0 {
		return ""
	}
	if _, within := e.CountUpTo(text, maxTokens); within {
		return text
	}
	clean := sanitize(text)

	// The token boundaries of the text, a few past the budget, with the piece each one ends in.
	type cut struct{ off, piece int }
	var cuts []cut
	var pieceStart, tokensBefore []int // per piece: its start, and the tokens before it
	e.walkTokens(clean, func(start, end int) bool {
		if len(pieceStart) == 0 || pieceStart[len(pieceStart)-1] != start {
			pieceStart = append(pieceStart, start)
			tokensBefore = append(tokensBefore, len(cuts))
		}
		cuts = append(cuts, cut{end, len(pieceStart) - 1})
		return len(cuts) < maxTokens+truncateSlack
	})
	// The longest that fits. Only the last pieces of a prefix can split differently (the pre-tokenizer looks
	// one character ahead, and a cut piece merges anew), so a prefix is counted from two pieces before the
	// one the cut is in.
	for k := len(cuts) - 1; k >= 0; k-- {
		c := cuts[k]
		if c.off < len(clean) && !utf8.RuneStart(clean[c.off]) {
			continue
		}
		from := max(c.piece-2, 0)
		left := maxTokens - tokensBefore[from]
		if left < 0 {
			continue
		}
		if _, within := e.CountUpTo(clean[pieceStart[from]:c.off], left); within {
			return text[:originalOffset(text, c.off)]
		}
	}
	return ""
}

// TokenEnds returns, for each token of text's encoding, the byte offset in text at which the token ends:
// token i is text[ends[i-1]:ends[i]] (from 0 for the first). A token can end inside a character (a
// character of several tokens); for invalid UTF-8, offsets are those of the original bytes, each ill-formed
// subsequence counting as the U+FFFD it is encoded as.
func (e *Encoding) TokenEnds(text string) []int {
	clean := sanitize(text)
	ends := make([]int, 0, len(clean)/4+1)
	e.walkTokens(clean, func(_, end int) bool {
		ends = append(ends, end)
		return true
	})
	if len(clean) != len(text) {
		mapOffsets(text, ends)
	}
	return ends
}

// SplitsAt reports whether the encoding's pre-tokenizer splits text at byte p into the very pieces it makes
// of text[:p] and text[p:] alone, so that the tokens of text are those of the two parts and
// Count(text) == Count(text[:p]) + Count(text[p:]). It answers from the characters around p, conservatively:
// false means not known. It is true where a line break ends text[:p] and text[p:] does not start with more
// line breaks (nor a '/'); where text[:p] ends in a character other than whitespace and text[p:] starts with a
// space or a tab; between a digit and a character that is neither a digit nor whitespace (either way round:
// no piece of either encoding holds a digit and another character); and after a letter followed by a
// character that is no letter, mark, digit, whitespace or apostrophe (a letter run ends there in both
// encodings). Chunkers use it to add up the counts of pieces without counting their joins again.
func (e *Encoding) SplitsAt(text string, p int) bool {
	if p <= 0 || p >= len(text) {
		return p == 0 || p == len(text)
	}
	if pieceBoundary(text, p) {
		return true
	}
	switch prev := text[p-1]; {
	case prev == '\n':
		// The whitespace run at p, if any, must hold no line break: \s*[\r\n]+ then ends at p-1 in both. A
		// '/' would extend o200k_base's punctuation piece across the line break.
		if text[p] == '/' {
			return false
		}
		for i := p; i < len(text); {
			r, w := utf8.DecodeRuneInString(text[i:])
			if r == '\r' || r == '\n' {
				return false
			}
			if !unicode.Is(unicode.White_Space, r) {
				break
			}
			i += w
		}
		return true
	case text[p] == ' ' || text[p] == '\t':
		r, _ := utf8.DecodeLastRuneInString(text[:p])
		return r != utf8.RuneError && !unicode.Is(unicode.White_Space, r)
	}
	return false
}

// pieceBoundary reports whether both encodings' pre-tokenizers end a piece at p whatever comes before
// text[p-1] or after text[p], with no whitespace on either side (whose lookahead makes text[:p] alone split
// otherwise): a digit beside a character that is neither a digit nor whitespace (digits make pieces of their
// own), or a letter before a character that is no letter, mark, digit, whitespace or ASCII apostrophe (which
// continues a letter piece as a contraction in o200k_base).
func pieceBoundary(text string, p int) bool {
	a, wa := utf8.DecodeLastRuneInString(text[:p])
	b, wb := utf8.DecodeRuneInString(text[p:])
	if (a == utf8.RuneError && wa <= 1) || (b == utf8.RuneError && wb <= 1) {
		return false
	}
	t := loadClasses()
	return classBoundary(t.of(a), t.of(b), b)
}

// classBoundary is pieceBoundary of the characters before and after the cut, of classes ca and cb (b the
// one after).
func classBoundary(ca, cb uint8, b rune) bool {
	if ca&clsSpace != 0 || cb&clsSpace != 0 {
		return false
	}
	if ca&clsNumber != cb&clsNumber {
		return true
	}
	// A mark is in o200k_base's letter-like classes without being a letter.
	return ca&clsLetter != 0 && b != '\'' && cb&(clsLetter|clsNumber|clsUpper|clsLower) == 0
}

// mapOffsets maps ascending offsets in sanitize(s) to offsets in s, in place. An offset inside a U+FFFD
// that replaced an ill-formed subsequence maps to the subsequence's end.
func mapOffsets(s string, offs []int) {
	i, c, k := 0, 0, 0 // position in s, in the clean text, in offs
	for k < len(offs) {
		for k < len(offs) && offs[k] <= c {
			offs[k] = i - (c - offs[k])
			k++
		}
		if i >= len(s) {
			break
		}
		if n := validPrefix(s[i:]); n > 0 {
			// Offsets within this valid run map one to one.
			for k < len(offs) && offs[k] <= c+n {
				offs[k] = i + (offs[k] - c)
				k++
			}
			i += n
			c += n
			continue
		}
		m := maximalSubpart(s[i:])
		c += utf8.RuneLen(utf8.RuneError)
		i += m
		for k < len(offs) && offs[k] <= c {
			offs[k] = i
			k++
		}
	}
}

// walkTokens calls f with the start of the piece and the end of each token of clean (valid UTF-8), in
// order, until f returns false.
func (e *Encoding) walkTokens(clean string, f func(pieceStart, end int) bool) {
	v := e.vocab
	s := v.getScratch(len(clean))
	defer v.putScratch(s)
	for i := 0; i < len(clean); {
		j := e.split(v.classes, clean, i)
		for _, b := range v.merge(clean[i:j], s)[1:] {
			if !f(i, i+int(b)) {
				return
			}
		}
		i = j
	}
}

// truncateSlack is how many token boundaries past the budget Truncate considers: a prefix can encode to
// fewer tokens than the text had up to that point.
const truncateSlack = 16

// sanitize returns s with each maximal ill-formed UTF-8 subsequence replaced by U+FFFD; s itself when valid.
func sanitize(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		if n := validPrefix(s[i:]); n > 0 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteString(string(utf8.RuneError))
		i += maximalSubpart(s[i:])
	}
	return b.String()
}

// originalOffset maps a byte offset in sanitize(s) back to an offset in s.
func originalOffset(s string, cleanOff int) int {
	offs := []int{cleanOff}
	mapOffsets(s, offs)
	return offs[0]
}

// validPrefix returns the length of the longest valid UTF-8 prefix of s.
func validPrefix(s string) int {
	i := 0
	for i < len(s) {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			break
		}
		i += w
	}
	return i
}

// maximalSubpart returns the length of the maximal subpart of an ill-formed sequence at the start of s: the
// longest prefix of a well-formed sequence (at least one byte), per Unicode §3.9 and the WHATWG decoder.
func maximalSubpart(s string) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		b := s[n]
		if b < lo || b > hi {
			break
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}

// countDelta returns Count(b) - Count(a), merging only the pieces where the two differ: the pieces they
// start with and end with alike count the same in both. It counts in s, which must hold caches.
func (e *Encoding) countDelta(a, b string, s *scratch) int {
	a, b = sanitize(a), sanitize(b)
	v := e.vocab
	i, j := 0, 0 // past the pieces a and b start with alike
	for i < len(a) && j < len(b) {
		ia, jb := e.split(v.classes, a, i), e.split(v.classes, b, j)
		if a[i:ia] != b[j:jb] {
			break
		}
		i, j = ia, jb
	}
	var ea, eb [32]int32 // the ends of the pieces left
	pa, okA := e.pieceEnds(a, i, ea[:0])
	pb, okB := e.pieceEnds(b, j, eb[:0])
	if okA && okB { // drop the pieces they end with alike
		for len(pa) > 0 && len(pb) > 0 {
			na, nb := len(pa), len(pb)
			sa, sb := i, j // where the last pieces start
			if na > 1 {
				sa = int(pa[na-2])
			}
			if nb > 1 {
				sb = int(pb[nb-2])
			}
			if a[sa:pa[na-1]] != b[sb:pb[nb-1]] {
				break
			}
			pa, pb = pa[:na-1], pb[:nb-1]
		}
		n := 0
		for k, end := range pb {
			start := j
			if k > 0 {
				start = int(pb[k-1])
			}
			n += v.countPiece(b[start:end], s)
		}
		for k, end := range pa {
			start := i
			if k > 0 {
				start = int(pa[k-1])
			}
			n -= v.countPiece(a[start:end], s)
		}
		return n
	}
	n := 0
	for k := j; k < len(b); {
		end := e.split(v.classes, b, k)
		n += v.countPiece(b[k:end], s)
		k = end
	}
	for k := i; k < len(a); {
		end := e.split(v.classes, a, k)
		n -= v.countPiece(a[k:end], s)
		k = end
	}
	return n
}

// pieceEnds appends to ends the ends of text's pieces from i, and reports false if they do not fit in
// its capacity.
func (e *Encoding) pieceEnds(text string, i int, ends []int32) ([]int32, bool) {
	for i < len(text) {
		if len(ends) == cap(ends) {
			return ends, false
		}
		i = e.split(e.vocab.classes, text, i)
		ends = append(ends, int32(i))
	}
	return ends, true
}

// runCut reports whether both encodings' pre-tokenizers end a piece at p whatever text surrounds the
// characters it looks at: those on either side of p, and for whitespace at p the character after it. It
// is true
//
//   - where pieceBoundary is;
//   - after a letter or digit, before whitespace: no piece that holds a letter or digit at its end goes
//     on into whitespace (a letter piece ends in a letter, a mark or a contraction, a digit piece in a
//     digit; a punctuation piece holds neither), and no piece that holds whitespace starts with one;
//   - before whitespace other than CR and LF that is followed by a character that is not whitespace: a
//     piece before it that holds whitespace ends before it (\s*[\r\n]+ ends in CR or LF, \s+(?!\S) stops
//     before the whitespace that a non-space follows, a punctuation piece's tail is CR, LF or '/'), and
//     it cannot end a piece that starts earlier (a prefix of a letter piece is followed by a letter).
//
// The characters it looks at must all be in text; else it is false.
func runCut(text string, p int) bool {
	if p <= 0 || p >= len(text) {
		return false
	}
	a, wa := utf8.DecodeLastRuneInString(text[:p])
	b, wb := utf8.DecodeRuneInString(text[p:])
	if (a == utf8.RuneError && wa <= 1) || (b == utf8.RuneError && wb <= 1) {
		return false
	}
	t := loadClasses()
	ca, cb := t.of(a), t.of(b)
	if cb&clsSpace == 0 {
		return classBoundary(ca, cb, b)
	}
	if ca&(clsLetter|clsNumber) != 0 {
		return true
	}
	if cb&clsNewline != 0 || p+wb >= len(text) {
		return false
	}
	c, wc := utf8.DecodeRuneInString(text[p+wb:])
	return !(c == utf8.RuneError && wc <= 1) && t.of(c)&clsSpace == 0
}
