package tokenizer

// The pre-tokenizers split text into pieces exactly as tiktoken's regular expressions do (leftmost-first
// alternation, greedy quantifiers with backtracking, fancy-regex semantics), without a regex engine and in
// one pass: each function returns the end of the piece that starts at s[i]. s must be valid UTF-8 and
// i < len(s). Every piece is non-empty, so the loop over pieces always advances.

// splitFunc returns the end of the pre-tokenizer piece of s that starts at i.
type splitFunc func(t *classTable, s string, i int) int

// splitCL100K implements cl100k_base's pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCL100K(t *classTable, s string, i int) int {
	c := s[i]
	if c == '\'' {
		if n := contraction(s, i+1); n > 0 {
			return i + 1 + n
		}
	}
	w, cls := t.at(s, i)
	switch {
	case cls&clsLetter != 0:
		return runOf(t, s, i+w, clsLetter)
	case cls&clsNumber != 0:
		return digits(t, s, i+w)
	}
	// [^\r\n\p{L}\p{N}] then \p{L}+.
	if cls&clsNewline == 0 && i+w < len(s) {
		if w2, cls2 := t.at(s, i+w); cls2&clsLetter != 0 {
			return runOf(t, s, i+w+w2, clsLetter)
		}
	}
	if end := punctuation(t, s, i, c, w, cls, false); end > 0 {
		return end
	}
	return whitespace(t, s, i)
}

// splitO200K implements o200k_base's pattern:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitO200K(t *classTable, s string, i int) int {
	c := s[i]
	w, cls := t.at(s, i)
	// The optional prefix [^\r\n\p{L}\p{N}] is tried first in each word alternative. Marks (\p{M}) can be
	// either the prefix or part of the word, so the four combinations go in the regex's order.
	prefix := cls&(clsLetter|clsNumber|clsNewline) == 0 && i+w < len(s)
	word := cls&(clsUpper|clsLower) != 0
	if prefix {
		if end := wordLowerTail(t, s, i+w); end > 0 {
			return end
		}
	}
	if word {
		if end := wordLowerTail(t, s, i); end > 0 {
			return end
		}
	}
	if prefix {
		if end := wordUpper(t, s, i+w); end > 0 {
			return end
		}
	}
	if word {
		if end := wordUpper(t, s, i); end > 0 {
			return end
		}
	}
	if cls&clsNumber != 0 {
		return digits(t, s, i+w)
	}
	if end := punctuation(t, s, i, c, w, cls, true); end > 0 {
		return end
	}
	return whitespace(t, s, i)
}

// wordLowerTail matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ and an optional
// contraction at s[j:], returning its end or 0. The greedy upper run backtracks to the last character that
// can also start the lower run.
func wordLowerTail(t *classTable, s string, j int) int {
	k := j
	lastLowerEnd := 0
	for k < len(s) {
		w, cls := t.at(s, k)
		if cls&clsUpper == 0 {
			break
		}
		k += w
		if cls&clsLower != 0 {
			lastLowerEnd = k
		}
	}
	end := 0
	if k < len(s) {
		if w, cls := t.at(s, k); cls&clsLower != 0 {
			end = runOf(t, s, k+w, clsLower)
		}
	}
	if end == 0 {
		if lastLowerEnd == 0 {
			return 0
		}
		end = lastLowerEnd
	}
	return end + contractionSuffix(s, end)
}

// wordUpper matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* and an optional contraction at
// s[j:], returning its end or 0.
func wordUpper(t *classTable, s string, j int) int {
	k := runOf(t, s, j, clsUpper)
	if k == j {
		return 0
	}
	k = runOf(t, s, k, clsLower)
	return k + contractionSuffix(s, k)
}

// punctuation matches " ?[^\s\p{L}\p{N}]+[\r\n]*" (with '/' in the tail for o200k_base) at s[i:], where the
// character there is c (first byte), of width w and classes cls. It returns the end or 0.
func punctuation(t *classTable, s string, i int, c byte, w int, cls uint8, slash bool) int {
	const notPunct = clsSpace | clsLetter | clsNumber
	j := i + w
	if cls&notPunct != 0 {
		if c != ' ' || j >= len(s) {
			return 0
		}
		w2, cls2 := t.at(s, j)
		if cls2&notPunct != 0 {
			return 0
		}
		j += w2
	}
	for j < len(s) {
		w, cls := t.at(s, j)
		if cls&notPunct != 0 {
			break
		}
		j += w
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || (slash && s[j] == '/')) {
		j++
	}
	return j
}

// whitespace matches \s*[\r\n]+|\s+(?!\S)|\s+ at s[i:], where s[i] starts a whitespace character.
func whitespace(t *classTable, s string, i int) int {
	j := i
	lastNewlineEnd := 0
	lastStart := i
	chars := 0
	for j < len(s) {
		w, cls := t.at(s, j)
		if cls&clsSpace == 0 {
			break
		}
		if cls&clsNewline != 0 {
			lastNewlineEnd = j + w
		}
		lastStart = j
		j += w
		chars++
	}
	switch {
	case lastNewlineEnd > 0: // \s*[\r\n]+ backtracks to the last newline of the run
		return lastNewlineEnd
	case j == len(s) || chars == 1: // \s+(?!\S) at the end of text, or \s+ of one character
		return j
	default: // \s+(?!\S) leaves the last space to prefix what follows
		return lastStart
	}
}

// runOf returns the end of the run of characters at s[j:] that have class bit.
func runOf(t *classTable, s string, j int, bit uint8) int {
	for j < len(s) {
		w, cls := t.at(s, j)
		if cls&bit == 0 {
			break
		}
		j += w
	}
	return j
}

// digits returns the end of \p{N}{1,3} whose first character ends at j.
func digits(t *classTable, s string, j int) int {
	for n := 1; n < 3 && j < len(s); n++ {
		w, cls := t.at(s, j)
		if cls&clsNumber == 0 {
			break
		}
		j += w
	}
	return j
}

// contractionSuffix returns the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[j:], or 0.
func contractionSuffix(s string, j int) int {
	if j < len(s) && s[j] == '\'' {
		if n := contraction(s, j+1); n > 0 {
			return 1 + n
		}
	}
	return 0
}

// contraction returns the length of (?i:s|t|re|ve|m|ll|d) at s[j:] (what follows an apostrophe), or 0.
// Case-insensitive matching uses Unicode simple case folding, so 'ſ' (U+017F) matches 's'.
func contraction(s string, j int) int {
	if j >= len(s) {
		return 0
	}
	switch s[j] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if j+1 < len(s) && s[j+1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if j+1 < len(s) && s[j+1]|0x20 == 'l' {
			return 2
		}
	}
	if s[j] == 0xC5 && j+1 < len(s) && s[j+1] == 0xBF { // ſ
		return 2
	}
	return 0
}
