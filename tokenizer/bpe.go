package tokenizer

import (
	"math"
	"sync"
)

// The merge loop is tiktoken's: start from single bytes, repeatedly merge the adjacent pair whose
// concatenation has the lowest rank (the leftmost on ties) until no pair is in the vocabulary. Short pieces
// (nearly all of them) use tiktoken's own quadratic scan over a small array; long pieces (runs of one
// letter, long whitespace) use a heap over a linked list, which makes the same choices in O(n log n).

const (
	noRank = math.MaxUint32
	// heapMergeMin is the piece length from which the heap version is used.
	heapMergeMin = 128
)

// part is a boundary of the piece being merged: the start of a token and the rank of the pair that starts here.
type part struct {
	start int32
	rank  uint32
}

// mergeSmall merges piece p (len(p) >= 2) and returns the boundaries in parts (the last is len(p)).
func (v *vocab) mergeSmall(p string, parts []part) []part {
	parts = parts[:0]
	for k := 0; k <= len(p); k++ {
		parts = append(parts, part{int32(k), noRank})
	}
	for k := 0; k+2 < len(parts); k++ {
		parts[k].rank = v.rank(p[parts[k].start:parts[k+2].start])
	}
	for {
		minRank, at := uint32(noRank), -1
		for k := 0; k+1 < len(parts); k++ {
			if parts[k].rank < minRank {
				minRank, at = parts[k].rank, k
			}
		}
		if at < 0 {
			return parts
		}
		// Merge parts[at] and parts[at+1]: drop boundary at+1, then re-rank the pairs that changed.
		parts = append(parts[:at+1], parts[at+2:]...)
		parts[at].rank = v.pairRank(p, parts, at)
		if at > 0 {
			parts[at-1].rank = v.pairRank(p, parts, at-1)
		}
	}
}

// pairRank returns the rank of the pair of tokens that starts at parts[k].
func (v *vocab) pairRank(p string, parts []part, k int) uint32 {
	if k+2 >= len(parts) {
		return noRank
	}
	return v.rank(p[parts[k].start:parts[k+2].start])
}

// rank returns the rank of token bytes b, or noRank.
func (v *vocab) rank(b string) uint32 {
	if r, ok := v.ranks[b]; ok {
		return r
	}
	return noRank
}

// heapState holds the scratch space of mergeLarge; pooled so that counting allocates nothing in steady state.
type heapState struct {
	next, prev []int32  // linked list of token starts, by byte position; -1 ends it
	rank       []uint32 // rank of the pair that starts at a position (noRank: none, or not a token start)
	heap       []uint64 // rank<<32 | position, a binary min-heap: lowest rank first, then leftmost
}

var heapPool = sync.Pool{New: func() any { return new(heapState) }}

// mergeLarge merges piece p with a heap and appends the token boundaries (the starts, then len(p)) to parts.
func (v *vocab) mergeLarge(p string, parts []part) []part {
	n := len(p)
	h := heapPool.Get().(*heapState)
	defer heapPool.Put(h)
	h.next = grow(h.next, n)
	h.prev = grow(h.prev, n)
	h.rank = growRank(h.rank, n)
	h.heap = h.heap[:0]
	for k := range n {
		h.next[k] = int32(k + 1)
		h.prev[k] = int32(k - 1)
	}
	h.next[n-1] = -1
	pairEnd := func(k int32) int32 { // end of the pair that starts at k, or -1
		nx := h.next[k]
		if nx < 0 {
			return -1
		}
		if nn := h.next[nx]; nn >= 0 {
			return nn
		}
		return int32(n)
	}
	setRank := func(k int32) {
		r := uint32(noRank)
		if e := pairEnd(k); e >= 0 {
			r = v.rank(p[k:e])
		}
		h.rank[k] = r
		if r != noRank {
			h.push(uint64(r)<<32 | uint64(k))
		}
	}
	for k := range int32(n) {
		setRank(k)
	}
	for len(h.heap) > 0 {
		top := h.pop()
		k, r := int32(top&0xffffffff), uint32(top>>32)
		if h.rank[k] != r { // stale: k was merged away or re-ranked
			continue
		}
		// Merge the token at k with the next one.
		nx := h.next[k]
		nn := h.next[nx]
		h.next[k] = nn
		if nn >= 0 {
			h.prev[nn] = k
		}
		h.rank[nx] = noRank
		setRank(k)
		if pv := h.prev[k]; pv >= 0 {
			setRank(pv)
		}
	}
	for k := int32(0); k >= 0; k = h.next[k] {
		parts = append(parts, part{start: k})
	}
	return append(parts, part{start: int32(n)})
}

func (h *heapState) push(x uint64) {
	h.heap = append(h.heap, x)
	i := len(h.heap) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if h.heap[parent] <= h.heap[i] {
			break
		}
		h.heap[parent], h.heap[i] = h.heap[i], h.heap[parent]
		i = parent
	}
}

func (h *heapState) pop() uint64 {
	top := h.heap[0]
	last := len(h.heap) - 1
	h.heap[0] = h.heap[last]
	h.heap = h.heap[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && h.heap[r] < h.heap[l] {
			m = r
		}
		if h.heap[i] <= h.heap[m] {
			break
		}
		h.heap[i], h.heap[m] = h.heap[m], h.heap[i]
		i = m
	}
	return top
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func growRank(s []uint32, n int) []uint32 {
	if cap(s) < n {
		return make([]uint32, n)
	}
	return s[:n]
}
