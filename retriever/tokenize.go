package retriever

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTermRunes is the length beyond which a word is not indexed: such runs (hashes, base64, minified code)
// are never typed in a query and would only grow the dictionary.
const maxTermRunes = 64

// appendTerms appends the search terms of text to dst and returns it. The terms are:
//
//   - words: maximal runs of letters, digits and combining marks, lowercased, except English stopwords and
//     words longer than maxTermRunes runes;
//   - for Chinese and Japanese (Han, Hiragana, Katakana), which are written without spaces, each character
//     and each pair of consecutive characters.
//
// Everything else (spaces, punctuation, symbols, invalid UTF-8) only separates terms. There is no stemming:
// "index" does not match "indexes". Every term is a lowercased substring of text and none is empty.
func appendTerms(dst []string, text string) []string {
	start := -1   // start of the current word, or -1
	prevCJK := -1 // start of the previous rune if it was a CJK character, or -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := text[start:end]
		start = -1
		if utf8.RuneCountInString(w) > maxTermRunes {
			return
		}
		w = strings.ToLower(w)
		if isStopword(w) {
			return
		}
		dst = append(dst, w)
	}
	for i, r := range text {
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
	return dst
}

// isCJK reports whether r is written without spaces between words: a Han ideograph, Hiragana or Katakana.
// (Hangul is written with spaces, so Korean words are words.)
func isCJK(r rune) bool {
	if r < 0x2E80 {
		return false
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r)
}

// isStopword reports whether w is one of the English words too common to say anything about a text
// (Lucene's classic English stop set).
func isStopword(w string) bool {
	switch w {
	case "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
		"no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
		"this", "to", "was", "will", "with":
		return true
	}
	return false
}
