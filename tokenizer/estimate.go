package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// EstimateKey names the rule of [Estimate] where its counts are cached, as an encoding's name names its
// counts: a store caches the estimate of each message and knowledge item it writes under it (beside the
// counts under o200k_base and cl100k_base), and an assembly whose counts are estimated takes a count found
// under it as Estimate's. It is "estimate/" and the version of the rule, which changes whenever Estimate
// counts any text otherwise, so that a count cached under an earlier rule is never found under this one's
// key, and the text is counted again. (testdata/estimate_rule.txt pins the rule of each version.)
const EstimateKey = "estimate/1"

// Estimator is a [Counter] whose Count is [Estimate]: an approximation, for models whose tokenizer is not
// public (Anthropic Claude, Google Gemini, Meta Llama, Mistral). [Model.Counter] returns it for them. The
// zero value is ready to use.
type Estimator struct{}

// Count returns Estimate(text), an approximate count.
func (Estimator) Count(text string) int { return Estimate(text) }

// CountUpTo implements [UpToCounter]: Estimate(text), but it stops reading once the estimate exceeds
// limit (a negative limit means none), and then returns a count greater than limit.
func (Estimator) CountUpTo(text string, limit int) (n int, within bool) {
	n = estimate(text, limit)
	return n, limit < 0 || n <= limit
}

// SplitsAt implements [Splitter]: the estimate of text is that of text[:p] plus that of text[p:] where the
// runs it prices part there (the characters on either side of p are of different runs, or a lower-case
// letter is followed by an upper-case one) and each side costs at least a token whatever else it holds
// (the characters at the join are neither free nor plain spaces, whose runs may cost nothing: a line
// break's run costs one). It looks only at the two characters around p.
func (Estimator) SplitsAt(text string, p int) bool {
	if p <= 0 || p >= len(text) {
		return true
	}
	return estimateSplits(text[:p], text[p:])
}

// estimateSplits is Estimator.SplitsAt of a+b at len(a), for a and b not empty, without joining them.
func estimateSplits(a, b string) bool {
	r1, w1 := utf8.DecodeLastRuneInString(a)
	r2, w2 := utf8.DecodeRuneInString(b)
	if r1 == utf8.RuneError && w1 <= 1 || r2 == utf8.RuneError && w2 <= 1 {
		return false // invalid UTF-8, or p inside a character
	}
	p1, p2 := charProps(r1), charProps(r2)
	k1, k2 := p1.kind(), p2.kind()
	for _, c := range [2]props{p1, p2} {
		if k := c.kind(); k == runFree || k == runSpace && c&propBreak == 0 {
			return false
		}
	}
	return k1 != k2 || k1 == runNone || k1 == runWord && p1&propLower != 0 && p2&propUpper != 0
}

// charProps returns the props of any character.
func charProps(r rune) props {
	if r < utf8.RuneSelf {
		return asciiProps[r]
	}
	return runeProps(r)
}

// Estimate returns an APPROXIMATE number of tokens in text, for models whose tokenizer is not public. It is
// no model's exact count: use an exact [*Encoding] whenever the model has one (see [ForModel] and
// [Model.Exact]).
//
// The estimate is 0 for "" and at least 1 for any other text, and never more than len(text). It reads text
// once, allocating nothing, and splits it the way byte-pair tokenizers split text before merging, into runs
// of letters, digits, punctuation and whitespace, then prices each run:
//
//   - A word costs 1 token per 6 ASCII letters, per 2 accented Latin letters (é, ß, ą) or Thai, Lao,
//     Khmer or Myanmar characters, and per 3 letters or combining marks of other scripts (Cyrillic, Greek,
//     Arabic, Hebrew, Devanagari...), the sum rounded up; so most short words cost 1. The space before a
//     word is free. An upper-case letter after a lower-case one starts a new word ("Response", "Writer").
//   - A run of digits costs 1 token per 3 digits, rounded up.
//   - A run of punctuation marks and ASCII symbols costs 1 token per 2 characters, rounded up.
//   - A run of whitespace costs 1 token if it holds a line break and 1 more if it holds two or more other
//     whitespace characters (indentation); a single space is free.
//   - Each Han ideograph, kana or Hangul syllable costs 1 token.
//   - Each emoji pictograph, skin-tone modifier or regional indicator (half a flag) costs 2 tokens, and
//     the zero-width joiner 1, so a family or flag sequence costs the sum of its parts; variation selectors
//     are free. Every other symbol, control or format character, and every byte of invalid UTF-8, costs 1
//     token.
//
// The weights are calibrated against exact o200k_base (GPT-4o) counts of English prose, Go source, Chinese,
// Japanese, Korean and Cyrillic-script text (testdata/corpus), on which the estimate is 1.15 to 1.22 times
// the exact count. It errs on the high side on purpose: a budget is safer over-counted, and the tokenizers
// it stands in for are mostly less efficient than o200k_base. On short texts it is rougher: a lone emoji
// may be estimated at twice its o200k_base count, a sentence of Polish or Turkish at three quarters of it.
//
// Estimates of the parts of a text bound the estimate of the whole: for all strings a and b,
// Estimate(a+b) <= Estimate(a)+Estimate(b)+1. And text only grows the estimate: Estimate(a) <= Estimate(a+b)
// whenever a is valid UTF-8 (a prefix cut inside a character is priced byte by byte, and may cost more).
func Estimate(text string) int { return estimate(text, -1) }

// estimate is Estimate, but it stops once the estimate exceeds limit (a negative limit means none): the
// count of the runs closed so far only grows.
func estimate(text string, limit int) int {
	var (
		n     int     // tokens of closed runs and of characters outside runs
		kind  runKind // the open run
		size  int     // the open run's size: units of a word, else characters (not counting line breaks)
		brk   bool    // the open whitespace run holds a line break
		lower bool    // the open word's last cased letter is lower-case
	)
	for i := 0; i < len(text); {
		var p props
		if c := text[i]; c < utf8.RuneSelf {
			i++
			p = asciiProps[c]
			if p == asciiLower && kind == runWord { // most bytes of prose and code
				j := i
				for j < len(text) && text[j]-'a' < 26 {
					j++
				}
				size += (j - i + 1) * asciiWeight
				i, lower = j, true
				continue
			}
			if c == ' ' && kind != runSpace && i < len(text) && text[i]-'a' < 26 {
				// A single space before a lower-case word, as between most words of prose: it closes the
				// open run, and costs nothing as a run of its own, which the word's first letter closes.
				n += runCost(kind, size, brk)
				if limit >= 0 && n > limit {
					return n
				}
				j := i + 1
				for j < len(text) && text[j]-'a' < 26 {
					j++
				}
				kind, size, brk, lower = runWord, (j-i)*asciiWeight, false, true
				i = j
				continue
			}
		} else {
			r, width := utf8.DecodeRuneInString(text[i:])
			i += width
			p = runeProps(r) // an invalid byte decodes as U+FFFD, a symbol
		}
		k := p.kind()
		if k == runFree {
			continue
		}
		if k != kind || (p&propUpper != 0 && lower) {
			n += runCost(kind, size, brk)
			kind, size, brk, lower = k, 0, false, false
			if limit >= 0 && n > limit {
				return n
			}
		}
		if k == runNone {
			n += p.weight()
			continue
		}
		size += p.weight()
		brk = brk || p&propBreak != 0
		if p&propUpper != 0 {
			lower = false
		} else if p&propLower != 0 {
			lower = true
		}
	}
	n += runCost(kind, size, brk)
	if n == 0 && text != "" {
		n = 1
	}
	return n
}

// Weights of the estimate, calibrated in estimate_test.go. A word's letters are weighed in units, and the
// word costs its weight divided by unitsPerToken, rounded up.
const (
	unitsPerToken = 24
	asciiWeight   = 4  // an ASCII letter: 6 to a token
	wideWeight    = 12 // an accented Latin letter, or a Thai, Lao, Khmer or Myanmar character: 2 to a token
	otherWeight   = 8  // any other letter or combining mark: 3 to a token
	digitsPer     = 3  // digits to a token
	punctPer      = 2  // punctuation marks to a token
	emojiTokens   = 2  // tokens of an emoji pictograph, skin-tone modifier or regional indicator
)

// runKind is a kind of run of characters that tokenizers keep together.
type runKind uint8

const (
	runNone   runKind = iota // no run: a character priced on its own
	runWord                  // letters and combining marks
	runDigits                // decimal digits
	runPunct                 // punctuation marks and ASCII symbols
	runSpace                 // whitespace
	runFree                  // a character that costs nothing and leaves the open run open
)

// runCost returns the tokens of a run of kind k: size is a word's weight in units or the number of other
// characters (line breaks not counted), brk whether a whitespace run holds a line break.
func runCost(k runKind, size int, brk bool) int {
	switch k {
	case runWord:
		return (size + unitsPerToken - 1) / unitsPerToken
	case runDigits:
		return (size + digitsPer - 1) / digitsPer
	case runPunct:
		return (size + punctPer - 1) / punctPer
	case runSpace:
		n := 0
		if brk {
			n++
		}
		if size >= 2 {
			n++
		}
		return n
	}
	return 0
}

// props is what the estimate needs to know of a character: its run kind (bits 0-2), its weight in the run
// or its cost outside runs (bits 3-7), and flags.
type props uint16

const (
	propUpper props = 1 << (8 + iota) // an upper-case letter
	propLower                         // a lower-case letter
	propBreak                         // a line break
)

func mkProps(k runKind, weight int) props { return props(k) | props(weight)<<3 }

func (p props) kind() runKind { return runKind(p & 7) }
func (p props) weight() int   { return int(p>>3) & 31 }

var (
	asciiLower = mkProps(runWord, asciiWeight) | propLower
	asciiProps = func() (t [utf8.RuneSelf]props) {
		for c := range utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z':
				t[c] = asciiLower
			case 'A' <= c && c <= 'Z':
				t[c] = mkProps(runWord, asciiWeight) | propUpper
			case '0' <= c && c <= '9':
				t[c] = mkProps(runDigits, 1)
			case c == ' ' || c == '\t':
				t[c] = mkProps(runSpace, 1)
			case c == '\n' || c == '\r' || c == '\v' || c == '\f':
				t[c] = mkProps(runSpace, 0) | propBreak
			case '!' <= c && c <= '~':
				t[c] = mkProps(runPunct, 1)
			default: // control characters
				t[c] = mkProps(runNone, 1)
			}
		}
		return t
	}()
)

// runeProps returns the props of a non-ASCII character; the cheap tests of the commonest scripts come first.
func runeProps(r rune) props {
	switch {
	case 0x0400 <= r && r <= 0x042f: // basic Cyrillic capitals
		return mkProps(runWord, otherWeight) | propUpper
	case 0x0430 <= r && r <= 0x045f: // basic Cyrillic small letters
		return mkProps(runWord, otherWeight) | propLower
	case isIdeographic(r):
		return mkProps(runNone, 1)
	case isEmoji(r):
		return mkProps(runNone, emojiTokens)
	case isVariationSelector(r):
		return mkProps(runFree, 0)
	case unicode.IsLetter(r) || unicode.IsMark(r):
		p := mkProps(runWord, letterWeight(r))
		if unicode.IsUpper(r) {
			p |= propUpper
		} else if unicode.IsLower(r) {
			p |= propLower
		}
		return p
	case unicode.IsDigit(r):
		return mkProps(runDigits, 1)
	case r == 0x85 || r == 0x2028 || r == 0x2029:
		return mkProps(runSpace, 0) | propBreak
	case unicode.IsSpace(r):
		return mkProps(runSpace, 1)
	case unicode.IsPunct(r):
		return mkProps(runPunct, 1)
	}
	return mkProps(runNone, 1) // symbols, controls, format characters such as the zero-width joiner, U+FFFD
}

// letterWeight returns the weight in units of a non-ASCII letter or combining mark that is not ideographic.
func letterWeight(r rune) int {
	switch {
	case r < 0x0300: // Latin-1 letters, Latin Extended-A and -B, IPA, modifier letters
		return wideWeight
	case r < 0x0e00: // combining marks, Greek, Cyrillic, Armenian, Hebrew, Arabic... the Indic scripts
		return otherWeight
	case unicode.In(r, unicode.Latin, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar):
		return wideWeight
	}
	return otherWeight
}

// isIdeographic reports whether r is a Han ideograph, a kana or a Hangul syllable or letter: characters that
// cost about a token each.
func isIdeographic(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case 0x4e00 <= r && r <= 0x9fff, 0xac00 <= r && r <= 0xd7a3, 0x3041 <= r && r <= 0x3096,
		0x30a1 <= r && r <= 0x30fa, r <= 0x11ff: // the common blocks, and Hangul Jamo
		return true
	case r < 0x2e80:
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// isEmoji reports whether r is an emoji pictograph, skin-tone modifier or regional indicator, by block:
// Miscellaneous Symbols, Dingbats, and the supplementary blocks from Mahjong Tiles to Symbols and
// Pictographs Extended-A.
func isEmoji(r rune) bool {
	return (0x2600 <= r && r <= 0x27bf) || (0x1f000 <= r && r <= 0x1faff)
}

// isVariationSelector reports whether r is a variation selector, such as U+FE0F (emoji presentation).
func isVariationSelector(r rune) bool {
	return (0xfe00 <= r && r <= 0xfe0f) || (0xe0100 <= r && r <= 0xe01ef)
}
