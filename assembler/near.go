package assembler

import (
	"math/bits"
	"sync"
	"unicode"
	"unicode/utf8"
)

// nearIndex finds near-duplicate texts: their word 3-shingles, hashed, overlap by a Jaccard similarity
// of at least a threshold. Each text is indexed by its few smallest shingle hashes (a bottom-k sketch);
// texts that similar share most of them, so only texts that share one are compared, exactly.
//
// It allocates little: the shingles of all texts live in one arena, the sketch index is an open-addressing
// table of lists, and a text is compared with the others through a hash set of its shingles, built once,
// without sorting.
type nearIndex struct {
	sets  [][]uint64 // each text's distinct shingle hashes, slices of arena
	arena []uint64
	buf   []uint64 // the shingles of the text being added, repeats included

	// The text being added, as a set: an open-addressing table of its hashes (0 marks a free slot, so the
	// hash 0 is kept apart in zero).
	set  []uint64
	zero bool

	// The sketch index: slots hold a sketch hash and the head of a list of the texts with it (1-based
	// indexes into entries; 0 marks a free slot).
	keys    []uint64
	heads   []int32
	filled  int
	entries []nearEntry

	seen  []uint32 // per text: the query that last compared it
	query uint32
}

type nearEntry struct{ text, next int32 }

const sketchSize = 8

func newNearIndex() *nearIndex { return &nearIndex{} }

// dedup finds the duplicates among the texts that an assembly keeps: exact ones by a hash of the text,
// near ones by a nearIndex.
type dedup struct {
	exact map[uint64]bool
	near  *nearIndex
}

// dedups keeps emptied dedups for later assemblies, their tables and arena sized already.
var dedups = sync.Pool{New: func() any { return &dedup{exact: map[uint64]bool{}, near: newNearIndex()} }}

// maxPooledShingles is the most shingles an index may hold and still go back to the pool: one that grew
// for an unusual request is left to the collector.
const maxPooledShingles = 1 << 16

// getDedup returns an empty dedup, from the pool if it has one.
func getDedup() *dedup { return dedups.Get().(*dedup) }

// putDedup empties d and gives it back to the pool; d must not be used after.
func putDedup(d *dedup) {
	x := d.near
	if cap(x.arena) > maxPooledShingles || cap(x.buf) > maxPooledShingles || len(d.exact) > maxPooledShingles {
		return
	}
	clear(d.exact)
	x.sets, x.arena, x.seen, x.entries = x.sets[:0], x.arena[:0], x.seen[:0], x.entries[:0]
	clear(x.keys)
	clear(x.heads)
	x.filled, x.query = 0, 0
	dedups.Put(d)
}

// addUnlessNear reports whether text is a near-duplicate of a text added before; if not, it adds it.
func (x *nearIndex) addUnlessNear(text string, threshold float64) bool {
	x.buf = appendShingles(x.buf[:0], text)
	if x.arena == nil { // room for a few dozen texts like this one, grown by doubling past that
		x.arena = make([]uint64, 0, 32*len(x.buf))
		x.sets, x.seen, x.entries = make([][]uint64, 0, 32), make([]uint32, 0, 32), make([]nearEntry, 0, 32*sketchSize)
		x.keys, x.heads = make([]uint64, 2*32*sketchSize), make([]int32, 2*32*sketchSize)
	}

	// The distinct hashes, into the arena (taken back if text is a near-duplicate), and the sketch.
	size := 1 << bits.Len(uint(2*len(x.buf)))
	if cap(x.set) < size {
		x.set = make([]uint64, size)
	}
	x.set = x.set[:size]
	clear(x.set)
	x.zero = false
	start := len(x.arena)
	var sketch [sketchSize]uint64
	k := 0
	for _, h := range x.buf {
		if !x.insert(h) {
			continue
		}
		x.arena = append(x.arena, h)
		// The sketch: the smallest distinct hashes, in order.
		if k == sketchSize && h >= sketch[k-1] {
			continue
		}
		i := min(k, sketchSize-1)
		for i > 0 && sketch[i-1] > h {
			sketch[i] = sketch[i-1]
			i--
		}
		sketch[i] = h
		k = min(k+1, sketchSize)
	}
	distinct := x.arena[start:len(x.arena):len(x.arena)]

	// Compare with each text that shares a sketch hash, once.
	x.query++
	for _, h := range sketch[:k] {
		for e := x.head(h); e != 0; e = x.entries[e-1].next {
			other := x.entries[e-1].text
			if x.seen[other] == x.query {
				continue
			}
			x.seen[other] = x.query
			if x.similar(distinct, x.sets[other], threshold) {
				x.arena = x.arena[:start]
				return true
			}
		}
	}

	id := int32(len(x.sets))
	x.sets = append(x.sets, distinct)
	x.seen = append(x.seen, 0)
	for _, h := range sketch[:k] {
		x.link(h, id)
	}
	return false
}

// insert adds h to the set of the text being added, and reports whether it was not in it yet.
func (x *nearIndex) insert(h uint64) bool {
	if h == 0 {
		added := !x.zero
		x.zero = true
		return added
	}
	mask := uint64(len(x.set) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch x.set[i] {
		case h:
			return false
		case 0:
			x.set[i] = h
			return true
		}
	}
}

// has reports whether h is in the set of the text being added.
func (x *nearIndex) has(h uint64) bool {
	if h == 0 {
		return x.zero
	}
	mask := uint64(len(x.set) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch x.set[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// similar reports whether the Jaccard similarity of the text being added (its distinct hashes a, also in
// x.set) and the distinct hashes b is at least threshold. It stops as soon as b has missed too many of
// a's hashes for that.
func (x *nearIndex) similar(a, b []uint64, threshold float64) bool {
	n := len(a) + len(b)
	jaccard := func(inter int) float64 { return float64(inter) / float64(n-inter) } // n > inter: a is not empty
	inter := 0
	for i, h := range b {
		if x.has(h) {
			inter++
		} else if best := inter + len(b) - i - 1; jaccard(best) < threshold {
			return false // it only grows with the intersection, which cannot reach best
		}
	}
	return jaccard(inter) >= threshold
}

// head returns the first entry of the texts whose sketch holds h (1-based), or 0.
func (x *nearIndex) head(h uint64) int32 {
	if len(x.keys) == 0 {
		return 0
	}
	mask := uint64(len(x.keys) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch {
		case x.heads[i] == 0:
			return 0
		case x.keys[i] == h:
			return x.heads[i]
		}
	}
}

// link adds text to the list of the texts whose sketch holds h.
func (x *nearIndex) link(h uint64, text int32) {
	if 2*(x.filled+1) > len(x.keys) {
		x.grow()
	}
	mask := uint64(len(x.keys) - 1)
	i := h & mask
	for x.heads[i] != 0 && x.keys[i] != h {
		i = (i + 1) & mask
	}
	if x.heads[i] == 0 {
		x.keys[i] = h
		x.filled++
	}
	x.entries = append(x.entries, nearEntry{text: text, next: x.heads[i]})
	x.heads[i] = int32(len(x.entries))
}

// grow doubles the sketch table.
func (x *nearIndex) grow() {
	keys, heads := x.keys, x.heads
	size := max(2*len(keys), 64)
	x.keys, x.heads = make([]uint64, size), make([]int32, size)
	mask := uint64(size - 1)
	for j, head := range heads {
		if head == 0 {
			continue
		}
		i := keys[j] & mask
		for x.heads[i] != 0 {
			i = (i + 1) & mask
		}
		x.keys[i], x.heads[i] = keys[j], head
	}
}

// asciiWord maps an ASCII letter or digit to its lower case, anything else to 0.
var asciiWord = func() (t [128]byte) {
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c
	}
	for c := byte('a'); c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = c, c
	}
	return t
}()

// appendShingles appends the hashes of the word 3-shingles of text (of the whole text when it has fewer
// than three words) to dst, words being lowercased runs of letters and digits.
func appendShingles(dst []uint64, text string) []uint64 {
	const basis, prime = 14695981039346656037, 1099511628211
	var w0, w1 uint64 // the two words before the current one
	n := 0
	w := uint64(basis)
	inWord := false
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf {
			i++
			if lc := asciiWord[c]; lc != 0 {
				w = (w ^ uint64(lc)) * prime
				inWord = true
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(text[i:])
			i += size
			if unicode.IsLetter(r) || unicode.IsNumber(r) {
				w = (w ^ uint64(unicode.ToLower(r))) * prime
				inWord = true
				continue
			}
		}
		if inWord { // a word ends: shift it in
			if n++; n >= 3 {
				dst = append(dst, mix3(w0, w1, w))
			}
			w0, w1, w, inWord = w1, w, basis, false
		}
	}
	if inWord {
		if n++; n >= 3 {
			dst = append(dst, mix3(w0, w1, w))
		}
		w0, w1, w = w1, w, basis
	}
	if n < 3 {
		dst = append(dst, mix3(w0, w1, w))
	}
	return dst
}

func mix3(w0, w1, w2 uint64) uint64 {
	h := w0*0x9E3779B97F4A7C15 ^ w1*0xC2B2AE3D27D4EB4F ^ w2*0x165667B19E3779F9
	h ^= h >> 31
	return h * 0x94D049BB133111EB
}
