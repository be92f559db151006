package embed

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/context-loom/loom/internal/stopword"
)

// Dimensions accepted by [NewLexical].
const (
	// DefaultLexicalDimensions is the dimension of [Default] and of [NewLexical](0).
	DefaultLexicalDimensions = 384
	// MinLexicalDimensions is the smallest dimension NewLexical accepts: below it, hash collisions make
	// unrelated texts look alike.
	MinLexicalDimensions = 16
	// MaxLexicalDimensions is the largest dimension NewLexical accepts: beyond it, vectors grow without
	// separating texts any better.
	MaxLexicalDimensions = 8192
)

// Lexical is the offline embedder: a deterministic function of the text, with no model, no network and no
// state. It is lexical, not semantic: texts that share words or parts of words (character 3-grams, so
// "embedding" is near "embeddings" and "embedded") are close; synonyms, paraphrases and translations are
// not. Use it where a model server is not available, for tests, and as a baseline.
//
// The features of a text are:
//
//   - its words, lowercased: maximal runs of letters, digits and combining marks, except that each Han
//     ideograph and each Hiragana or Katakana character is a word of its own (Chinese and Japanese are
//     written without spaces); full-width ASCII forms count as their ASCII letters and digits; English
//     stopwords (the keyword analyzer's, retriever.IsStopword) are left out, with all their features;
//   - the pairs of adjacent Chinese and Japanese characters;
//   - the character 3-grams of each word of two or more characters, with its start and end marked, so that
//     "word" gives "^wo", "wor", "ord", "rd$".
//
// Everything else (spaces, punctuation, symbols, invalid UTF-8) only separates words. Each distinct feature
// is hashed (the hashing trick) to one dimension and a sign, weighted by its kind and by 1+ln of its count in
// the text (sublinear term frequency), and the vector is scaled to unit length. A text without any word,
// such as "" or "  ...  ", gives the zero vector, whose [Cosine] with anything is 0.
//
// These features, named "lexical2-<dimensions>", replace those of the first version ([NewLexicalV1],
// "lexical-<dimensions>"), which also had the pairs of all consecutive words and kept the stopwords.
// Hashed into a few hundred dimensions, a chunk's many features collide: the stopwords, the commonest
// words of all, and the word pairs, more features than the words themselves, added mostly noise. On Loom's
// evaluation set (package eval, 86 questions over the Go specification, the Go memory model and Loom's
// README, 384 dimensions) vector search finds the answer in the top 5 for 0.488 of the questions with the
// first version's features, and for 0.767 with these (MRR@5 0.312, 0.512).
//
// The output depends only on the text and the dimension: it is the same in every process and, but for
// floating-point rounding in the last bit, on every platform, so vectors can be stored and compared later.
// A Lexical is immutable and safe for concurrent use.
type Lexical struct {
	dims int
	name string
	v1   bool // the first version's features
}

var defaultLexical = &Lexical{dims: DefaultLexicalDimensions, name: lexicalName(DefaultLexicalDimensions, false)}

// Default returns the offline default embedder: the [Lexical] embedder of [DefaultLexicalDimensions]
// dimensions. It is shared and safe for concurrent use.
func Default() *Lexical { return defaultLexical }

// NewLexical returns a [Lexical] embedder of dims dimensions; 0 means [DefaultLexicalDimensions]. It returns an
// error wrapping [ErrInvalidConfig] for dimensions outside [[MinLexicalDimensions], [MaxLexicalDimensions]].
func NewLexical(dims int) (*Lexical, error) {
	if dims == 0 {
		return defaultLexical, nil
	}
	if dims < MinLexicalDimensions || dims > MaxLexicalDimensions {
		return nil, fmt.Errorf("%w: lexical dimensions %d outside [%d, %d]",
			ErrInvalidConfig, dims, MinLexicalDimensions, MaxLexicalDimensions)
	}
	return &Lexical{dims: dims, name: lexicalName(dims, false)}, nil
}

// NewLexicalV1 returns a [Lexical] embedder of dims dimensions (0 means [DefaultLexicalDimensions]) with the
// features of the first version: those of NewLexical, and besides the pairs of all consecutive words and
// the stopwords. Its name is "lexical-<dims>". It is there for the collections whose vectors it made: their
// vectors stay comparable with its own. It returns the errors of NewLexical.
func NewLexicalV1(dims int) (*Lexical, error) {
	dims = cmp.Or(dims, DefaultLexicalDimensions)
	if _, err := NewLexical(dims); err != nil {
		return nil, err
	}
	return &Lexical{dims: dims, name: lexicalName(dims, true), v1: true}, nil
}

func lexicalName(dims int, v1 bool) string {
	if v1 {
		return "lexical-" + strconv.Itoa(dims)
	}
	return "lexical2-" + strconv.Itoa(dims)
}

// Dimensions returns the length of the vectors.
func (l *Lexical) Dimensions() int { return l.dims }

// FusionWeight returns [LexicalFusionWeight] ([LexicalV1FusionWeight] for [NewLexicalV1]'s): the lexical
// vectors are worth little beside the keywords.
func (l *Lexical) FusionWeight() float64 {
	if l.v1 {
		return LexicalV1FusionWeight
	}
	return LexicalFusionWeight
}

// Name returns "lexical2-" followed by the dimension, such as "lexical2-384" ("lexical-384" for
// [NewLexicalV1]'s). A change of the features comes with a new name, so that stored vectors are never
// compared with incompatible ones.
func (l *Lexical) Name() string { return l.name }

// Embed returns the vector of each text (see [Lexical]). The vectors have unit length, or are all zeros for
// texts without words. Embed fails only when ctx is done, which it checks between texts: the error wraps ctx's
// error.
func (l *Lexical) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	if len(texts) == 0 {
		return out, nil
	}
	slab := make([]float32, len(texts)*l.dims)
	s := getScratch(l.dims)
	defer putScratch(s)
	for i, text := range texts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		v := slab[i*l.dims : (i+1)*l.dims : (i+1)*l.dims]
		s.vector(text, v, l.v1)
		out[i] = v
	}
	return out, nil
}

// Feature kinds, stored in the low bits of a feature's key, and their weights. Words count most; the many
// 3-grams of a word together weigh about as much as the word itself once the vector is normalized. (The
// first version weighs 3-grams 0.35, the second 0.5; on the evaluation set, 0.2 to 0.7 rank alike within
// the noise.)
const (
	kindWord = iota
	kindPair
	kindGram
)

var (
	kindWeight   = [3]float64{kindWord: 1, kindPair: 0.7, kindGram: 0.5}
	kindWeightV1 = [3]float64{kindWord: 1, kindPair: 0.7, kindGram: 0.35}
	kindSeed     = [3]uint64{kindWord: 0x9e3779b97f4a7c15, kindPair: 0xc2b2ae3d27d4eb4f, kindGram: 0x165667b19e3779f9}
)

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211

	// Markers of a word's start and end in its 3-grams: values no rune has.
	markStart = 0xFFFFFFFF
	markEnd   = 0xFFFFFFFE

	kindBits = 2
	kindMask = 1<<kindBits - 1
	signBit  = 1 << kindBits

	// Sizes of the table of features: it starts at twice the text's length in bytes, a power of two within
	// these bounds, and doubles when half full. A scratch whose table grew beyond maxSlots (on a huge text) is
	// not kept.
	minSlots = 1 << 8
	maxSlots = 1 << 14
)

// fnv adds one rune to a 64-bit FNV-1a hash taken over runes rather than bytes.
func fnv(h uint64, r uint32) uint64 { return (h ^ uint64(r)) * fnvPrime }

// mix is the 64-bit finalizer of MurmurHash3: every output bit depends on every input bit.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// featureKey returns the key of a feature of the given kind and hash: mixed bits with the kind in the low
// bits, the sign in the next one and the dimension chosen by the high 32 bits.
func featureKey(kind int, h uint64) uint64 { return mix(h^kindSeed[kind])&^kindMask | uint64(kind) }

// slot is an entry of the scratch's open-addressing table of features. Key 0 marks an empty slot: the one
// word in 2^62 whose key is 0 is not counted.
type slot struct {
	key uint64
	n   uint64 // occurrences
}

// scratch is the per-call state of the lexical embedder, pooled so that a call allocates only its output.
type scratch struct {
	slots []slot // power-of-two size, at most half full; empty between calls, up to its capacity
	used  []int  // indexes of the occupied slots, in insertion order
	// Per dimension: the sum of its features (all zeros between calls), and the epoch of the last call that
	// touched it.
	acc     []float64
	stamp   []uint32
	epoch   uint32
	touched []uint32 // the dimensions touched by this call
	grams   []uint64 // the keys of the 3-grams of the word being read
}

var scratchPool = sync.Pool{New: func() any { return &scratch{slots: make([]slot, minSlots)} }}

func getScratch(dims int) *scratch {
	s := scratchPool.Get().(*scratch)
	if cap(s.acc) < dims {
		s.acc = make([]float64, dims)
		s.stamp = make([]uint32, dims)
	}
	s.acc, s.stamp = s.acc[:dims], s.stamp[:dims]
	return s
}

func putScratch(s *scratch) {
	if cap(s.slots) <= maxSlots {
		scratchPool.Put(s)
	}
}

// add counts one occurrence of a feature.
func (s *scratch) add(key uint64) {
	if key == 0 {
		return
	}
	mask := len(s.slots) - 1
	for i := int(key>>kindBits) & mask; ; i = (i + 1) & mask {
		e := &s.slots[i]
		if e.key == key {
			e.n++
			return
		}
		if e.key == 0 {
			e.key, e.n = key, 1
			s.used = append(s.used, i)
			if 2*len(s.used) > len(s.slots) {
				s.grow()
			}
			return
		}
	}
}

// grow doubles the table.
func (s *scratch) grow() {
	old := s.slots
	s.slots = make([]slot, 2*len(old))
	mask := len(s.slots) - 1
	for k, j := range s.used {
		e := old[j]
		i := int(e.key>>kindBits) & mask
		for s.slots[i].key != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = e
		s.used[k] = i
	}
}

// word is the state of the word being read.
type word struct {
	h      uint64 // fnv of its runes
	n      int    // its length in runes
	p2, p1 uint32 // the two runes before the next one, markStart before the start
}

// stopHashes are the fnv hashes of the English stopwords, as word.h computes them; none is longer than
// maxStopRunes runes.
var stopHashes, maxStopRunes = func() (map[uint64]bool, int) {
	m, longest := map[uint64]bool{}, 0
	for _, w := range stopword.English {
		h := uint64(fnvOffset)
		for _, r := range w {
			h = fnv(h, uint32(r))
		}
		m[h] = true
		longest = max(longest, utf8.RuneCountInString(w))
	}
	return m, longest
}()

// vector writes the embedding of text to v, which has len(s.acc) elements, all zeros, with the features of
// the first version if v1.
func (s *scratch) vector(text string, v []float32, v1 bool) {
	n := minSlots
	for n < 2*len(text) && n < maxSlots {
		n *= 2
	}
	if cap(s.slots) >= n {
		s.slots = s.slots[:n] // all empty
	} else {
		s.slots = make([]slot, n)
	}
	var (
		w        word
		prev     uint64 // hash of the previous word
		havePrev bool   // there is a previous word to pair with
	)
	endWord := func(ideo bool) {
		if !v1 && w.n <= maxStopRunes && stopHashes[w.h] {
			// A stopword: no feature at all, and nothing to pair with.
			s.grams, w.n, havePrev = s.grams[:0], 0, false
			return
		}
		for _, g := range s.grams {
			s.add(g)
		}
		s.grams = s.grams[:0]
		if w.n >= 2 {
			s.add(featureKey(kindGram, fnv(fnv(fnv(fnvOffset, w.p2), w.p1), markEnd)))
		}
		s.add(featureKey(kindWord, w.h))
		if havePrev {
			s.add(featureKey(kindPair, mix(prev)^w.h))
		}
		// The first version pairs every two consecutive words; this one only adjacent ideographs.
		prev, havePrev = w.h, v1 || ideo
		w.n = 0
	}
	for i := 0; i < len(text); {
		r, size, class := next(text[i:])
		i += size
		if class == separator {
			if w.n > 0 {
				endWord(false)
			}
			if !v1 {
				havePrev = false
			}
			continue
		}
		alone := class == ideograph
		if alone && w.n > 0 {
			endWord(false)
			if !v1 {
				havePrev = false
			}
		}
		if w.n == 0 {
			w = word{h: fnvOffset, p1: markStart}
		}
		if w.n >= 1 {
			s.grams = append(s.grams, featureKey(kindGram, fnv(fnv(fnv(fnvOffset, w.p2), w.p1), uint32(r))))
		}
		w.h = fnv(w.h, uint32(r))
		w.n++
		w.p2, w.p1 = w.p1, uint32(r)
		if alone {
			endWord(true)
		}
	}
	if w.n > 0 {
		endWord(false)
	}
	weights := &kindWeight
	if v1 {
		weights = &kindWeightV1
	}
	s.flush(v, weights)
}

// flush adds the counted features into v, which must be all zeros, normalizes it and empties the table. It
// visits only the dimensions the features touched, so short texts do not pay for long vectors.
func (s *scratch) flush(v []float32, kindWeight *[3]float64) {
	s.epoch++
	if s.epoch == 0 { // wrapped: stamps from 2^32 calls ago could match
		clear(s.stamp[:cap(s.stamp)])
		s.epoch = 1
	}
	acc, stamp, dims := s.acc, s.stamp, uint64(len(s.acc))
	touched := s.touched[:0]
	for _, j := range s.used {
		e := &s.slots[j]
		x := kindWeight[e.key&kindMask] * tf(e.n)
		if e.key&signBit != 0 {
			x = -x
		}
		d := uint32((e.key >> 32) * dims >> 32)
		if stamp[d] != s.epoch {
			stamp[d] = s.epoch
			touched = append(touched, d)
		}
		acc[d] += x
		*e = slot{}
	}
	s.used = s.used[:0]
	var norm float64
	for _, d := range touched {
		norm += acc[d] * acc[d]
	}
	inv := 0.0
	if norm > 0 {
		inv = 1 / math.Sqrt(norm)
	}
	for _, d := range touched {
		v[d] = float32(acc[d] * inv)
		acc[d] = 0
	}
	s.touched = touched
}

// tf is the sublinear term frequency of a feature seen n times: 1 + ln n.
func tf(n uint64) float64 {
	if n < uint64(len(tfTable)) {
		return tfTable[n]
	}
	return 1 + math.Log(float64(n))
}

var tfTable = func() (t [64]float64) {
	for n := 1; n < len(t); n++ {
		t[n] = 1 + math.Log(float64(n))
	}
	return t
}()

// Classes of characters.
const (
	separator = iota // not part of words
	letter           // part of a word (letters, digits, marks)
	ideograph        // a word by itself
)

// next returns the first character of text (non-empty), lowercased, with its length in bytes and its class.
func next(text string) (r rune, size, class int) {
	if c := text[0]; c < utf8.RuneSelf {
		if f := asciiFold[c]; f != 0 {
			return rune(f), 1, letter
		}
		return 0, 1, separator
	}
	r, size = utf8.DecodeRuneInString(text)
	if commonIdeograph(r) {
		return r, size, ideograph
	}
	switch r = foldRune(r); {
	case r < utf8.RuneSelf: // a full-width form, or the Kelvin sign
		if f := asciiFold[r]; f != 0 {
			return rune(f), size, letter
		}
		return 0, size, separator
	case !isWordRune(r): // including utf8.RuneError for invalid UTF-8
		return 0, size, separator
	case isIdeograph(r):
		return r, size, ideograph
	}
	return r, size, letter
}

// asciiFold maps an ASCII byte to its lowercase form if it is a letter or digit, else to 0.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c
	}
	for c := byte('a'); c <= 'z'; c++ {
		t[c] = c
		t[c-'a'+'A'] = c
	}
	return t
}()

// foldRune lowercases r and maps the full-width forms of ASCII to ASCII.
func foldRune(r rune) rune {
	if r >= 0xFF01 && r <= 0xFF5E {
		return r - 0xFEE0
	}
	return unicode.ToLower(r)
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) }

// commonIdeograph reports whether r is in the blocks of CJK Unified Ideographs, Hiragana letters or Katakana
// letters: a fast path of isIdeograph (these are letters without case).
func commonIdeograph(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF || r >= 0x3041 && r <= 0x3096 || r >= 0x30A1 && r <= 0x30FA
}

// isIdeograph reports whether r is a Han ideograph or a Hiragana or Katakana character.
func isIdeograph(r rune) bool {
	return r >= 0x2E80 && // the first of the Han, Hiragana and Katakana characters
		(unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r))
}
