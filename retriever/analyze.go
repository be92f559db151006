package retriever

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/context-loom/loom/internal/stopword"
	"golang.org/x/text/unicode/norm"
)

// MaxTermRunes is the length beyond which a word is not a term: such runs (hashes, base64, minified code)
// are never typed in a query and would only grow the dictionary.
const MaxTermRunes = 64

// Analyze returns the search terms of text, in order and with repeats: the terms an [Index] keeps of a
// chunk's content, and those it looks up for a query's text. It is the one keyword analyzer of Loom: every
// store's collections are ranked by indexes that use it, so a keyword query finds the same chunks whatever
// the store. See [AppendTerms] for the rules.
func Analyze(text string) []string { return AppendTerms(nil, text) }

// AppendTerms appends the search terms of text to dst and returns it. Text is first brought to Unicode
// normalization form NFKC, so that a composed "é" and an "e" followed by a combining accent, full-width
// "ＡＢＣ" and "ABC", half-width "ｶﾀｶﾅ" and "カタカナ" are the same. The terms are then:
//
//   - words: maximal runs of letters, digits and combining marks, lowercased, with the accents of Latin
//     letters removed (every letter Unicode decomposes into a Latin letter and accents: "Café" and "cafe"
//     are both "cafe", "naïve" is "naive", "Ångström" is "angstrom"; "ß", "æ", "ø" and the letters of other
//     scripts keep theirs), except English stopwords ([IsStopword]) and words longer than [MaxTermRunes]
//     runes;
//   - for Chinese and Japanese (Han, Hiragana, Katakana), which are written without spaces, each character
//     and each pair of consecutive characters, so that "首都" finds "東京は日本の首都です".
//
// Everything else (spaces, punctuation, symbols, invalid UTF-8) only separates terms. There is no stemming:
// "index" does not match "indexes". No term is empty.
func AppendTerms(dst []string, text string) []string {
	n := len(dst)
	if dst, ok := appendTerms(dst, text, true); ok {
		return dst
	}
	// Invalid UTF-8 becomes U+FFFD (a separator, as the invalid bytes are; NFKC wants UTF-8), then NFKC.
	text = norm.NFKC.String(strings.ToValidUTF8(text, "\uFFFD"))
	dst, _ = appendTerms(dst[:n], text, false)
	return dst
}

// appendTerms appends the terms of text, which must be valid UTF-8 in NFKC unless check is set. With check,
// it reports false (what it appended is then garbage) as soon as it meets a rune that may make text invalid
// or other than NFKC and whose normal form may have other terms: the same decoding pass checks and
// analyzes, and a text that NFKC would change only in its separators (the full-width punctuation of
// Chinese and Japanese, say) is analyzed as it is.
func appendTerms(dst []string, text string, check bool) ([]string, bool) {
	start := -1   // start of the current word, or -1
	prevCJK := -1 // start of the previous rune if it was a CJK character, or -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := text[start:end]
		start = -1
		if utf8.RuneCountInString(w) > MaxTermRunes {
			return
		}
		w = fold(w)
		if IsStopword(w) {
			return
		}
		dst = append(dst, w)
	}
	for i, r := range text {
		if check && r >= utf8.RuneSelf {
			switch nfkcClass(r) {
			case nfkcOther:
				return dst, false
			case nfkcSeparator:
				flush(i)
				prevCJK = -1
				continue
			}
		}
		switch {
		case isCJK(r):
			flush(i)
			end := i + utf8.RuneLen(r)
			dst = append(dst, text[i:end])
			if prevCJK >= 0 {
				dst = append(dst, text[prevCJK:end])
			}
			prevCJK = i
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mark, r):
			if start < 0 {
				start = i
			}
			prevCJK = -1
		default:
			flush(i)
			prevCJK = -1
		}
	}
	flush(len(text))
	return dst, true
}

// What NFKC may do to a rune, for appendTerms' check.
const (
	// nfkcStarter: nothing, wherever the rune is. It is NFKC on its own (a precomposed "é" is), and it
	// neither combines with the rune before it nor is reordered with it: a valid text of such runes (and
	// ASCII) is NFKC.
	nfkcStarter = iota
	// nfkcSeparator: the rune decomposes, but into separators only (no letter, digit, mark or CJK
	// character), and it combines with no rune before it: next to runes that combine with none before
	// them either (ASCII and the runes of these two classes), the text's terms are the same whether it is
	// normalized or not.
	nfkcSeparator
	// nfkcOther: anything else, including U+FFFD, which invalid UTF-8 decodes as.
	nfkcOther
)

// nfkcClass returns what NFKC may do to r: nfkcStarter, nfkcSeparator or nfkcOther.
func nfkcClass(r rune) int {
	if r < 0x10000 {
		t := nfkcClasses()
		return int(t[r>>2]>>(2*(r&3))) & 3
	}
	return classifyNFKC(r)
}

// nfkcClasses holds classifyNFKC of every rune below U+10000, two bits each, made on first use.
var nfkcClasses = sync.OnceValue(func() *[1 << 14]uint8 {
	var t [1 << 14]uint8
	for r := rune(0); r < 0x10000; r++ {
		t[r>>2] |= uint8(classifyNFKC(r)) << (2 * (r & 3))
	}
	return &t
})

// classifyNFKC is nfkcClass from the Unicode tables.
func classifyNFKC(r rune) int {
	if r == utf8.RuneError || !utf8.ValidRune(r) {
		return nfkcOther
	}
	var buf [utf8.UTFMax]byte
	p := norm.NFKC.Properties(buf[:utf8.EncodeRune(buf[:], r)])
	// (Its decomposition may end in a mark, as a precomposed "é" does: no rune after it that passes the
	// check is reordered with or composed onto it.)
	if p.CCC() != 0 || p.LeadCCC() != 0 || !p.BoundaryBefore() {
		return nfkcOther
	}
	if p.Decomposition() == nil {
		return nfkcStarter
	}
	nf := norm.NFKC.String(string(r))
	if nf == string(r) {
		return nfkcStarter // precomposed
	}
	for _, d := range nf {
		if isCJK(d) || unicode.IsLetter(d) || unicode.IsDigit(d) || unicode.Is(unicode.Mark, d) {
			return nfkcOther
		}
	}
	return nfkcSeparator
}

// fold returns the word w (NFKC) lowercased, with the accents of its Latin letters removed: w itself when
// that changes nothing.
func fold(w string) string {
	i := 0
	for ; i < len(w); i++ {
		if c := w[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			break
		}
	}
	if i == len(w) {
		return w
	}
	// Find the first rune that changes; all before it are kept as they are.
	latin := i > 0 && 'a' <= w[i-1] && w[i-1] <= 'z' // the last rune kept is a Latin letter, whose marks go
	for j, r := range w[i:] {
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				return foldFrom(w, i+j, latin)
			}
			latin = 'a' <= r && r <= 'z'
			continue
		}
		if unicode.ToLower(r) != r || latin && unicode.Is(unicode.Mn, r) || latinBase(r) != r {
			return foldFrom(w, i+j, latin)
		}
		latin = isLatin(r)
	}
	return w
}

// foldFrom folds w from byte i on, the bytes before it being folded already; latin says whether the rune
// before i is a Latin letter.
func foldFrom(w string, i int, latin bool) string {
	var b strings.Builder
	b.Grow(len(w))
	b.WriteString(w[:i])
	for _, r := range w[i:] {
		r = unicode.ToLower(r)
		switch {
		case r < utf8.RuneSelf:
			latin = 'a' <= r && r <= 'z'
		case latin && unicode.Is(unicode.Mn, r):
			continue
		default:
			r = latinBase(r)
			latin = isLatin(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// The Latin letters that decompose into a Latin letter and accents all lie in two blocks once text is NFKC
// (TestLatinBase checks): Latin-1 Supplement to Latin Extended-B, and Latin Extended Additional.
const (
	latinLowEnd   = 0x250
	latinAddStart = 0x1E00
	latinAddEnd   = 0x1F00
)

// latinBases maps each rune of the two blocks to its base letter (itself if it has none), from Unicode's
// canonical decompositions, computed once.
var latinBases = func() (t [latinLowEnd + latinAddEnd - latinAddStart]rune) {
	for i := range t {
		r := rune(i)
		if i >= latinLowEnd {
			r = rune(i - latinLowEnd + latinAddStart)
		}
		t[i] = decomposedBase(r)
	}
	return t
}()

// latinBase returns the Latin letter r decomposes into with accents ('e' for 'é', 'a' for 'ǻ'), or r itself
// when it does not decompose so.
func latinBase(r rune) rune {
	switch {
	case r < latinLowEnd:
		return latinBases[r]
	case latinAddStart <= r && r < latinAddEnd:
		return latinBases[r-latinAddStart+latinLowEnd]
	}
	return r
}

// decomposedBase is latinBase computed from the Unicode tables.
func decomposedBase(r rune) rune {
	if !isLatin(r) {
		return r
	}
	var buf [utf8.UTFMax]byte
	d := norm.NFD.Properties(buf[:utf8.EncodeRune(buf[:], r)]).Decomposition()
	if len(d) == 0 {
		return r
	}
	base, n := utf8.DecodeRune(d)
	if !isLatin(base) {
		return r
	}
	for _, m := range string(d[n:]) {
		if !unicode.Is(unicode.Mn, m) {
			return r
		}
	}
	return base
}

// isLatin reports whether r is a letter of the Latin script.
func isLatin(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	case 0x370 <= r && r < 0x1D00, 0x3000 <= r && r < 0xA720, 0xAC00 <= r && r < 0xFB00:
		return false // Greek to Hangul Jamo; CJK; Hangul (TestIsLatin checks)
	}
	return unicode.Is(unicode.Latin, r)
}

// isCJK reports whether r is written without spaces between words: a Han ideograph, Hiragana or Katakana.
// (Hangul is written with spaces, so Korean words are words.)
func isCJK(r rune) bool {
	if r < 0x2E80 {
		return false
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r)
}

// IsStopword reports whether w, a lowercase word, is one of the English words too common to say anything
// about a text (Lucene's classic English stop set), which [AppendTerms] leaves out.
func IsStopword(w string) bool { return stopword.IsEnglish(w) }
