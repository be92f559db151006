package retriever

import (
	"math"
	"math/rand"
	"slices"
	"sync"
)

// graph is a Hierarchical Navigable Small World graph (Malkov and Yashunin, arXiv:1603.09320) over the
// index's normalized vectors, keyed by slot, with the distance 1 - dot product. Nodes are never removed:
// the index marks dead slots and rebuilds the graph when it compacts.
//
// Neighbours are chosen by the paper's heuristic (algorithm 4) both for a new node and when an old node has
// too many, without filling up with the discarded candidates, as hnswlib does: on 20k chunks of Lexical
// vectors, pruning an overfull node by dropping its farthest neighbour instead cost 1.5 points of recall@10.
//
// It is written here rather than taken from github.com/coder/hnsw: the one release the module proxy serves
// (v0.6.1) stops searching as soon as a step fails to beat the best result so far and keeps only k
// candidates, which measured recall@10 of about 0.1 against exact search on 10k vectors (fixed upstream
// after that release), and its Delete can leave a graph that panics on the next search.
type graph struct {
	m, m0 int     // neighbours kept per node on upper layers, and on layer 0
	efc   int     // candidates gathered when inserting
	ml    float64 // level multiplier, 1/ln(m)
	rng   *rand.Rand

	// The vectors, as the index's pages; whoever inserts sets it to pages holding the new slot's row.
	pages [][]float32
	dims  int

	links    [][][]uint32 // by slot, by layer: neighbours; nil for slots not in the graph
	entry    uint32
	maxLevel int
	size     int
	bytes    int64 // the memory links holds, counted as insert and connect allocate it

	// Scratch space of insert, which never runs concurrently with anything.
	w, sel, prune []cand

	statePool sync.Pool // of *searchState
}

func newGraph(m, efc, dims int) *graph {
	return &graph{
		m: m, m0: 2 * m, efc: efc, ml: 1 / math.Log(float64(m)),
		rng: rand.New(rand.NewSource(1)), dims: dims, maxLevel: -1,
	}
}

// vec returns the vector of a slot.
func (g *graph) vec(slot uint32) []float32 {
	off := int(slot%pageRows) * g.dims
	return g.pages[slot/pageRows][off : off+g.dims : off+g.dims]
}

// cand is a node and its distance to the target.
type cand struct {
	dist float32
	id   uint32
}

// query is a normalized vector to search for. Short texts embedded by Lexical have a few dozen non-zero
// components out of hundreds: such a query keeps them aside, and its dot products cost that many
// multiplications.
type query struct {
	dense []float32
	idx   []int32 // the non-zero components, when they are few enough; else nil
	val   []float32
}

// newQuery returns the query of a normalized vector.
func newQuery(v []float32) query {
	q := query{dense: v}
	nnz := 0
	for _, x := range v {
		if x != 0 {
			nnz++
		}
	}
	if 4*nnz > len(v) {
		return q
	}
	q.idx, q.val = make([]int32, 0, nnz), make([]float32, 0, nnz)
	for i, x := range v {
		if x != 0 {
			q.idx = append(q.idx, int32(i))
			q.val = append(q.val, x)
		}
	}
	return q
}

// dot returns the dot product of the query with v, a vector of the same length.
func (q *query) dot(v []float32) float32 {
	if q.idx == nil {
		return dot(q.dense, v)
	}
	var s0, s1 float32
	idx, val := q.idx, q.val[:len(q.idx)]
	i := 0
	for ; i+2 <= len(idx); i += 2 {
		s0 += val[i] * v[idx[i]]
		s1 += val[i+1] * v[idx[i+1]]
	}
	if i < len(idx) {
		s0 += val[i] * v[idx[i]]
	}
	return s0 + s1
}

// searchState is the scratch space of one layer search: the visited marks, by generation so that they are
// cleared in O(1), and the two heaps.
type searchState struct {
	gen   uint32
	marks []uint32
	next  candHeap // to expand, closest on top
	res   candHeap // found, farthest on top
}

func (g *graph) getState() *searchState {
	st, _ := g.statePool.Get().(*searchState)
	if st == nil {
		st = &searchState{res: candHeap{max: true}}
	}
	if len(st.marks) < len(g.links) {
		st.marks = make([]uint32, len(g.links)+len(g.links)/4)
		st.gen = 0
	}
	st.gen++
	if st.gen == 0 {
		clear(st.marks)
		st.gen = 1
	}
	st.next.h, st.res.h = st.next.h[:0], st.res.h[:0]
	return st
}

// insert adds slot, whose vector must be in g.pages, to the graph. It must not run concurrently with
// anything.
func (g *graph) insert(slot uint32) {
	had := cap(g.links)
	for int(slot) >= len(g.links) {
		g.links = append(g.links, nil)
	}
	g.bytes += int64(cap(g.links)-had) * sliceHeader
	level := int(-math.Log(1-g.rng.Float64()) * g.ml)
	g.links[slot] = make([][]uint32, level+1)
	g.bytes += int64(level+1) * sliceHeader
	g.size++
	if g.maxLevel < 0 {
		g.entry, g.maxLevel = slot, level
		return
	}
	q := query{dense: g.vec(slot)}
	ep := cand{dist: 1 - q.dot(g.vec(g.entry)), id: g.entry}
	for l := g.maxLevel; l > level; l-- {
		ep = g.greedy(&q, ep, l)
	}
	w := append(g.w[:0], ep)
	for l := min(level, g.maxLevel); l >= 0; l-- {
		w = g.searchLayer(&q, w, g.efc, l, w[:0])
		maxN := g.m
		if l == 0 {
			maxN = g.m0
		}
		g.sel = g.selectNeighbors(w, g.m, g.sel[:0])
		ids := make([]uint32, len(g.sel), maxN)
		g.bytes += int64(maxN) * 4
		for i, c := range g.sel {
			ids[i] = c.id
		}
		g.links[slot][l] = ids
		for _, id := range ids {
			g.connect(id, slot, l, maxN)
		}
	}
	g.w = w
	if level > g.maxLevel {
		g.entry, g.maxLevel = slot, level
	}
}

// connect adds an edge from a to b on layer l; when a then has more than maxN neighbours, they are chosen
// again by the heuristic.
func (g *graph) connect(a, b uint32, l, maxN int) {
	had := cap(g.links[a][l])
	nb := append(g.links[a][l], b)
	g.links[a][l] = nb
	g.bytes += int64(cap(nb)-had) * 4
	if len(nb) <= maxN {
		return
	}
	va := g.vec(a)
	cs := g.prune[:0]
	for _, id := range nb {
		cs = append(cs, cand{dist: 1 - dot(va, g.vec(id)), id: id})
	}
	slices.SortFunc(cs, cmpCand)
	g.sel = g.selectNeighbors(cs, maxN, g.sel[:0])
	nb = nb[:0]
	for _, c := range g.sel {
		nb = append(nb, c.id)
	}
	g.links[a][l] = nb
	g.prune = cs
}

// selectNeighbors appends to kept up to m of the candidates (sorted closest first) by the paper's
// heuristic: a candidate is kept if it is closer to the target than to every one kept so far, so that the
// edges spread in different directions.
func (g *graph) selectNeighbors(cs []cand, m int, kept []cand) []cand {
	for _, c := range cs {
		if len(kept) == m {
			break
		}
		vc := g.vec(c.id)
		good := true
		for _, k := range kept {
			if 1-dot(vc, g.vec(k.id)) < c.dist {
				good = false
				break
			}
		}
		if good {
			kept = append(kept, c)
		}
	}
	return kept
}

func cmpCand(a, b cand) int {
	if a.dist != b.dist {
		if a.dist < b.dist {
			return -1
		}
		return 1
	}
	if a.id < b.id {
		return -1
	}
	if a.id > b.id {
		return 1
	}
	return 0
}

// greedy walks layer l from ep to the node closest to q.
func (g *graph) greedy(q *query, ep cand, l int) cand {
	for changed := true; changed; {
		changed = false
		for _, id := range g.links[ep.id][l] {
			if d := 1 - q.dot(g.vec(id)); d < ep.dist {
				ep, changed = cand{dist: d, id: id}, true
			}
		}
	}
	return ep
}

// searchLayer appends to out the ef nodes of layer l closest to q that a beam search from eps finds,
// closest first. out may share eps's memory.
func (g *graph) searchLayer(q *query, eps []cand, ef, l int, out []cand) []cand {
	st := g.getState()
	defer g.statePool.Put(st)
	next, res := &st.next, &st.res
	for _, e := range eps {
		st.marks[e.id] = st.gen
		next.push(e)
		res.push(e)
		if len(res.h) > ef {
			res.pop()
		}
	}
	for len(next.h) > 0 {
		c := next.pop()
		if len(res.h) >= ef && c.dist > res.h[0].dist {
			break
		}
		for _, id := range g.links[c.id][l] {
			if st.marks[id] == st.gen {
				continue
			}
			st.marks[id] = st.gen
			d := 1 - q.dot(g.vec(id))
			if len(res.h) < ef || d < res.h[0].dist {
				next.push(cand{dist: d, id: id})
				res.push(cand{dist: d, id: id})
				if len(res.h) > ef {
					res.pop()
				}
			}
		}
	}
	out = append(out, res.h...)
	slices.SortFunc(out, cmpCand)
	return out
}

// search returns up to ef nodes closest to q, closest first. It is safe for concurrent use with itself.
func (g *graph) search(q *query, ef int) []cand {
	if g.maxLevel < 0 {
		return nil
	}
	ep := cand{dist: 1 - q.dot(g.vec(g.entry)), id: g.entry}
	for l := g.maxLevel; l > 0; l-- {
		ep = g.greedy(q, ep, l)
	}
	return g.searchLayer(q, []cand{ep}, ef, 0, make([]cand, 0, ef))
}

// candHeap is a binary heap of candidates: closest on top, or farthest if max.
type candHeap struct {
	max bool
	h   []cand
}

func (h *candHeap) less(i, j int) bool {
	if h.max {
		return h.h[i].dist > h.h[j].dist
	}
	return h.h[i].dist < h.h[j].dist
}

func (h *candHeap) push(c cand) {
	h.h = append(h.h, c)
	for i := len(h.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.h[i], h.h[p] = h.h[p], h.h[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	top := h.h[0]
	last := len(h.h) - 1
	h.h[0] = h.h[last]
	h.h = h.h[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h.h) {
			break
		}
		m := l
		if r := l + 1; r < len(h.h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.h[i], h.h[m] = h.h[m], h.h[i]
		i = m
	}
	return top
}
