package tokenizer

import (
	"sync"
	"unicode/utf8"
)

//go:generate sh -c "cd ../scripts/gen-tokenizer && npm ci --no-audit --no-fund && node gen.mjs && gofmt -w ../../tokenizer/encodings_gen.go ../../tokenizer/unicode_gen.go"

// Character classes of tiktoken's pre-tokenizer patterns, one bit each.
const (
	clsLetter  uint8 = 1 << iota // \p{L}
	clsNumber                    // \p{N}
	clsSpace                     // \s (White_Space)
	clsUpper                     // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k_base)
	clsLower                     // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k_base)
	clsNewline                   // \r or \n
)

// codeRange is an inclusive range of code points.
type codeRange struct{ lo, hi rune }

// classTable maps a code point to its class bits in two levels: the high bits pick a block of 256 entries,
// blocks with equal contents are shared.
type classTable struct {
	ascii  [128]uint8
	index  [(utf8.MaxRune + 1) >> 8]uint16
	blocks []uint8
}

var (
	classesOnce sync.Once
	classes     *classTable
)

func loadClasses() *classTable {
	classesOnce.Do(func() { classes = buildClasses() })
	return classes
}

func buildClasses() *classTable {
	flat := make([]uint8, utf8.MaxRune+1)
	set := func(ranges []codeRange, bit uint8) {
		for _, r := range ranges {
			for c := r.lo; c <= r.hi; c++ {
				flat[c] |= bit
			}
		}
	}
	set(letterRanges, clsLetter)
	set(numberRanges, clsNumber)
	set(spaceRanges, clsSpace)
	set(upperishRanges, clsUpper)
	set(lowerishRanges, clsLower)
	flat['\r'] |= clsNewline
	flat['\n'] |= clsNewline

	t := &classTable{}
	copy(t.ascii[:], flat[:128])
	seen := make(map[string]uint16)
	for b := range t.index {
		block := flat[b<<8 : (b+1)<<8]
		idx, ok := seen[string(block)]
		if !ok {
			idx = uint16(len(t.blocks) >> 8)
			t.blocks = append(t.blocks, block...)
			seen[string(block)] = idx
		}
		t.index[b] = idx
	}
	return t
}

// of returns the classes of r, which must be a valid code point.
func (t *classTable) of(r rune) uint8 {
	return t.blocks[int(t.index[r>>8])<<8|int(r&0xff)]
}

// at decodes the character at s[i] (s is valid UTF-8, i < len(s)) and returns its width and classes.
func (t *classTable) at(s string, i int) (width int, cls uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return 1, t.ascii[c]
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return w, t.of(r)
}
