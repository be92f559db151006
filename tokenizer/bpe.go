package tokenizer

import "math"

// The merge loop is tiktoken's: start from single bytes, repeatedly merge the adjacent pair whose
// concatenation has the lowest rank (the leftmost on ties) until no pair is in the vocabulary. Short pieces
// (nearly all of them) use tiktoken's own quadratic scan over a small array; long pieces (runs of one
// letter, long whitespace) use a heap over a linked list, which makes the same choices in O(n log n).

const (
	noRank = math.MaxUint32
	// heapMergeMin is the piece length from which the heap version is used.
	heapMergeMin = 48
)

// scratch is the per-call working memory of the encoder, pooled so that counting allocates nothing in steady
// state. Calls on long texts also borrow a set of caches (see caches).
type scratch struct {
	bounds    []int32  // token boundaries of the piece being merged
	pairRanks []uint32 // mergeSmall's ranks of adjacent pairs
	heap      heapState
	caches    *caches // nil for short texts
}

// caches map short pieces to their tokens and short byte strings to their ranks. What they hold depends on
// nothing but the vocabulary, so entries stay valid for its life and one set serves call after call: real
// text repeats its words, and a hit saves the whole merge loop. A set is about 1.2 MB, so sets are kept in a
// free list bounded by GOMAXPROCS that, unlike a sync.Pool, the garbage collector does not empty.
type caches struct {
	pieces [pieceCacheSize]pieceCacheEntry
	ranks  [rankCacheSize]rankCacheEntry
}

const (
	// cachedTextMin is the text length from which a call borrows caches; shorter texts gain little from them.
	cachedTextMin = 32

	pieceCacheBits   = 13
	pieceCacheSize   = 1 << pieceCacheBits
	pieceCacheMaxLen = 32 // longest piece cached: the key is packed into the entry (see packKey32)
	pieceCacheMaxIDs = 4  // most tokens a cached piece may have

	rankCacheBits   = 15
	rankCacheSize   = 1 << rankCacheBits
	rankCacheMaxLen = 16 // longest key cached (see packKey)
)

type pieceCacheEntry struct {
	key   [4]uint64
	n     uint32 // piece length; 0: empty
	count uint32
	ids   [pieceCacheMaxIDs]uint32
}

type rankCacheEntry struct {
	a, b uint64 // packKey's words
	n    uint32 // key length; 0: empty
	rank uint32
}

// getScratch returns working memory for encoding a text of textLen bytes; putScratch gives it back.
func (v *vocab) getScratch(textLen int) *scratch {
	s, ok := v.scratchPool.Get().(*scratch)
	if !ok {
		s = &scratch{bounds: make([]int32, 0, 64), pairRanks: make([]uint32, 0, 64)}
	}
	if textLen >= cachedTextMin {
		select {
		case s.caches = <-v.freeCaches:
		default:
			s.caches = new(caches)
		}
	}
	return s
}

func (v *vocab) putScratch(s *scratch) {
	if s.caches != nil {
		select {
		case v.freeCaches <- s.caches:
		default:
		}
		s.caches = nil
	}
	v.scratchPool.Put(s)
}

// countPiece returns the number of tokens of piece p.
func (v *vocab) countPiece(p string, s *scratch) int {
	if len(p) == 1 {
		return 1
	}
	if s.caches == nil || len(p) > pieceCacheMaxLen {
		return len(v.merge(p, s)) - 1
	}
	return int(v.cached(p, s).count)
}

// appendPiece appends the token ids of piece p to ids.
func (v *vocab) appendPiece(ids []int, p string, s *scratch) []int {
	if s.caches != nil && len(p) <= pieceCacheMaxLen {
		if e := v.cached(p, s); e.count <= pieceCacheMaxIDs {
			for _, id := range e.ids[:e.count] {
				ids = append(ids, int(id))
			}
			return ids
		}
	}
	bounds := v.merge(p, s)
	for k := 0; k+1 < len(bounds); k++ {
		ids = append(ids, int(v.ranks.get(p[bounds[k]:bounds[k+1]])))
	}
	return ids
}

// cached returns the cache entry of piece p (1 <= len(p) <= pieceCacheMaxLen), filling it on a miss. Its
// ids are valid when count <= pieceCacheMaxIDs.
func (v *vocab) cached(p string, s *scratch) *pieceCacheEntry {
	key := packKey32(p)
	n := uint32(len(p))
	e := &s.caches.pieces[slot(key[0]^key[2], key[1]^key[3], n)>>(64-pieceCacheBits)]
	if e.n == n && e.key == key {
		return e
	}
	*e = pieceCacheEntry{key: key, n: n}
	bounds := v.merge(p, s)
	e.count = uint32(len(bounds) - 1)
	if e.count <= pieceCacheMaxIDs {
		for k := range int(e.count) {
			e.ids[k] = v.ranks.get(p[bounds[k]:bounds[k+1]])
		}
	}
	return e
}

// merge runs the merge loop on piece p and returns the token boundaries (the starts, then len(p)), in
// s.bounds.
func (v *vocab) merge(p string, s *scratch) []int32 {
	if len(p) <= v.maxLen && v.ranks.get(p) != noRank { // a whole piece that is a token is not merged
		s.bounds = append(s.bounds[:0], 0, int32(len(p)))
		return s.bounds
	}
	if len(p) >= heapMergeMin {
		s.bounds = v.mergeLarge(p, s, s.bounds[:0])
	} else {
		s.bounds = v.mergeSmall(p, s, s.bounds[:0])
	}
	return s.bounds
}

// mergeSmall merges piece p (len(p) >= 1) with tiktoken's scan and appends the token boundaries (the starts,
// then len(p)) to bounds.
func (v *vocab) mergeSmall(p string, s *scratch, bounds []int32) []int32 {
	bounds = bounds[:0]
	ranks := s.pairRanks[:0]
	for k := 0; k <= len(p); k++ {
		bounds = append(bounds, int32(k))
	}
	for k := 0; k+1 < len(p); k++ {
		ranks = append(ranks, s.rank(v, p[k:k+2]))
	}
	// ranks[k] is the rank of the pair of tokens starting at bounds[k]; there is one pair fewer than tokens.
	for len(ranks) > 0 {
		minRank, at := uint32(noRank), -1
		for k, r := range ranks {
			if r < minRank {
				minRank, at = r, k
			}
		}
		if at < 0 {
			break
		}
		// Merge the tokens at bounds[at] and bounds[at+1]: drop boundary at+1, re-rank the pairs that changed.
		bounds = append(bounds[:at+1], bounds[at+2:]...)
		ranks = append(ranks[:at], ranks[at+1:]...)
		if at < len(ranks) {
			ranks[at] = s.rank(v, p[bounds[at]:bounds[at+2]])
		}
		if at > 0 {
			ranks[at-1] = s.rank(v, p[bounds[at-1]:bounds[at+1]])
		}
	}
	s.pairRanks = ranks
	return bounds
}

// rank returns the rank of token bytes b, or noRank.
func (s *scratch) rank(v *vocab, b string) uint32 {
	if s.caches == nil || len(b) <= 4 || len(b) > rankCacheMaxLen {
		return v.ranks.get(b)
	}
	ka, kb := packKey(b)
	n := uint32(len(b))
	e := &s.caches.ranks[slot(ka, kb, n)>>(64-rankCacheBits)]
	if e.a != ka || e.b != kb || e.n != n {
		e.a, e.b, e.n, e.rank = ka, kb, n, v.ranks.get(b)
	}
	return e.rank
}

// heapState holds the working memory of mergeLarge.
type heapState struct {
	next, prev []int32  // linked list of token starts, by byte position; -1 ends it
	rank       []uint32 // rank of the pair that starts at a position (noRank: none, or not a token start)
	heap       []uint64 // rank<<32 | position, a binary min-heap: lowest rank first, then leftmost
}

// mergeLarge merges piece p with a heap and appends the token boundaries (the starts, then len(p)) to bounds.
func (v *vocab) mergeLarge(p string, s *scratch, bounds []int32) []int32 {
	n := len(p)
	h := &s.heap
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
			r = s.rank(v, p[k:e])
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
		bounds = append(bounds, k)
	}
	return append(bounds, int32(n))
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
