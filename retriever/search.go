package retriever

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/context-loom/loom"
)

// Defaults of [Query].
const (
	DefaultTopK          = 10
	DefaultMMRLambda     = 0.7
	DefaultMinCandidates = 50 // Candidates is max(DefaultMinCandidates, 5*TopK) by default
)

// DefaultFusionWeights are the weights of a query whose Weights are not set: the two rankings alike. The
// engine sets a query's weights from its collection, or else from the collection's embedder
// (embed.FusionWeight), which knows better.
var DefaultFusionWeights = loom.FusionWeights{Keyword: 1, Vector: 1}

// The pool MMR picks from: the mmrPoolFactor*TopK most relevant distinct candidates, at least mmrMinPool.
const (
	mmrPoolFactor = 4
	mmrMinPool    = 20
)

// FilterDocumentID is the [Query.Filter] key that matches a chunk's DocumentID rather than its Metadata.
const FilterDocumentID = "document_id"

// Query is what to search for and how. The zero values of its fields mean the documented defaults.
type Query struct {
	// Text is matched by keywords (BM25); Vector, the embedding of the same text by the collection's
	// embedder, by cosine similarity. A hybrid or MMR query uses whichever of the two it has.
	Text   string
	Vector []float32
	// TopK is the most results to return; 0 means DefaultTopK.
	TopK int
	// MinScore drops results less relevant than it, relevance being the same thing in every mode: a
	// result's score in the ranking of its mode divided by the best result's (Result.Relevance), from 0 to
	// 1 (a MinScore outside it is invalid). So 0.5 keeps the results at least half as good as the best in
	// keyword, vector, hybrid and mmr mode alike, and the best result is always kept. The ranking's score
	// is the BM25 score in keyword mode, the cosine similarity in vector mode, and the fused score in
	// hybrid and mmr mode (see loom.FusionWeights; an MMR result's Score is then lowered by its likeness to
	// the results before it, its relevance is not). Being relative, MinScore cannot tell a query that
	// matches nothing well from one that matches well: Result.Vector keeps the absolute cosine similarity
	// for that. 0 keeps all.
	MinScore float64
	// Mode is ModeHybrid (the default when ""), ModeKeyword, ModeVector or ModeMMR.
	Mode string
	// Weights weigh the keyword and the vector rankings in ModeHybrid and ModeMMR (see loom.FusionWeights
	// for the formula); the zero value means DefaultFusionWeights. Weights that are set must pass
	// loom.FusionWeights.Validate. A side whose weight is 0 is not searched.
	Weights loom.FusionWeights
	// Filter keeps only the chunks whose Metadata has every key with the given value; the key
	// FilterDocumentID ("document_id") matches the chunk's DocumentID. Filtered-out chunks are never ranked.
	Filter map[string]string
	// MMRLambda weighs relevance against diversity in ModeMMR, from 0 (most diverse) to 1 (most relevant);
	// 0 means DefaultMMRLambda.
	MMRLambda float64
	// Candidates is how many chunks each ranking (keyword, vector) contributes before fusion and MMR;
	// 0 means max(DefaultMinCandidates, 5*TopK).
	Candidates int
	// Exact makes vector search brute force even where the index has an HNSW graph.
	Exact bool
}

// hit is a chunk in one ranking, or in the fused one.
type hit struct {
	slot  uint32
	score float64
}

// Validate reports whether Search can run a query of q's settings: it returns an error wrapping
// ErrInvalidQuery, saying why, for an unknown Mode, a negative TopK or Candidates, a MinScore or MMRLambda
// outside [0, 1], or Weights that are set but invalid (loom.FusionWeights.Validate; the error wraps
// loom.ErrInvalidFusionWeights too). (Search checks q's vector besides, which is input, not a setting.)
func (q Query) Validate() error {
	switch {
	case q.Mode != "" && q.Mode != ModeHybrid && q.Mode != ModeKeyword && q.Mode != ModeVector && q.Mode != ModeMMR:
		return fmt.Errorf("%w: unknown mode %q (known: hybrid, keyword, vector, mmr)", ErrInvalidQuery, q.Mode)
	case q.TopK < 0:
		return fmt.Errorf("%w: negative TopK %d", ErrInvalidQuery, q.TopK)
	case q.Candidates < 0:
		return fmt.Errorf("%w: negative Candidates %d", ErrInvalidQuery, q.Candidates)
	case !(q.MinScore >= 0 && q.MinScore <= 1):
		return fmt.Errorf("%w: MinScore %v outside [0, 1]", ErrInvalidQuery, q.MinScore)
	case !(q.MMRLambda >= 0 && q.MMRLambda <= 1):
		return fmt.Errorf("%w: MMRLambda %v outside [0, 1]", ErrInvalidQuery, q.MMRLambda)
	}
	if !q.Weights.IsZero() {
		if err := q.Weights.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidQuery, err)
		}
	}
	return nil
}

// settings returns q's mode, TopK, Candidates, MMRLambda and weights, the defaults in place of zeros: the
// one place the defaults are applied.
func (q Query) settings() (mode string, topK, candidates int, lambda float64, w loom.FusionWeights) {
	mode = cmp.Or(q.Mode, ModeHybrid)
	topK = cmp.Or(q.TopK, DefaultTopK)
	candidates = max(cmp.Or(q.Candidates, max(DefaultMinCandidates, 5*topK)), topK)
	w = q.Weights
	if w.IsZero() {
		w = DefaultFusionWeights
	}
	return mode, topK, candidates, cmp.Or(q.MMRLambda, DefaultMMRLambda), w
}

// Search returns the chunks that best match q, best first, at most q.TopK of them, as copies that the caller
// owns. See [Query] for the modes and their scores. Chunks of equal scores rank by chunk ID, so the results
// depend on the chunks alone, never on the order they were added in: indexes of the same chunks give the
// same results, with the same scores, whatever store they were read from. (Only approximate vector
// search, through the HNSW graph of an index past IndexOptions.HNSWThreshold, may differ: the graph's
// neighbours depend on the order it was built in. Query.Exact searches exactly.)
//
// Hybrid search takes the Candidates best chunks of each ranking and orders them all by their fused score
// (see loom.FusionWeights), computed from both sides whichever ranking brought the chunk in; a side the
// query cannot have (no words, or no vector where the index has vectors) is left out of the mean, and chunks
// of fused score 0 are not returned. MMR search orders the same candidates, drops duplicates and
// near-duplicates of a more relevant candidate (the same words in the same order, or most of their 4-word
// runs in common), and picks from the 4*TopK most relevant of the rest (at least 20) by maximal marginal
// relevance.
//
// Search returns an error wrapping ErrInvalidQuery for settings [Query.Validate] refuses, a vector query
// without a vector or a query vector holding a NaN or an infinity;
// ErrDimensions for a query vector whose length is not the index's; and ctx's error if ctx is done.
func (ix *Index) Search(ctx context.Context, q Query) ([]Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("retriever: %w", err)
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	mode, topK, nCand, lambda, weights := q.settings()
	if mode == ModeVector && len(q.Vector) == 0 {
		return nil, fmt.Errorf("%w: vector mode needs a query vector", ErrInvalidQuery)
	}

	var qvec []float32
	if len(q.Vector) > 0 {
		qvec = make([]float32, len(q.Vector))
		var norm float64
		for _, x := range q.Vector {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("%w: query vector holds %v", ErrInvalidQuery, x)
			}
			norm += float64(x) * float64(x)
		}
		if norm > 0 {
			inv := 1 / math.Sqrt(norm)
			for i, x := range q.Vector {
				qvec[i] = float32(float64(x) * inv)
			}
		} else {
			qvec = nil // like nothing: a zero vector is similar to nothing
		}
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if len(q.Vector) > 0 && ix.dims != 0 && len(q.Vector) != ix.dims {
		return nil, fmt.Errorf("%w: query vector has %d dimensions, index has %d", ErrDimensions, len(q.Vector), ix.dims)
	}
	if ix.dims == 0 {
		qvec = nil // nothing to compare it with
	}
	s := searcher{ix: ix, filter: q.Filter, qvec: qvec}
	if qvec != nil {
		s.q = newQuery(qvec)
	}

	fused := mode == ModeHybrid || mode == ModeMMR
	var kw, vec []hit
	var err error
	if mode != ModeKeyword && qvec != nil && (!fused || weights.Vector > 0) {
		if vec, err = s.vector(ctx, nCand, q.Exact); err != nil {
			return nil, err
		}
	}
	var kwOf []float64 // BM25 scores of the vector candidates, in fused modes
	if mode != ModeVector && (!fused || weights.Keyword > 0) {
		if fused {
			s.scoreAlso = make([]uint32, len(vec))
			for i, h := range vec {
				s.scoreAlso[i] = h.slot
			}
			kwOf = make([]float64, len(vec))
			s.alsoScores = kwOf
		}
		if kw, err = s.bm25(ctx, q.Text, nCand); err != nil {
			return nil, err
		}
	}
	var kwTop float64
	if len(kw) > 0 {
		kwTop = kw[0].score
	}

	// ranked is the ranking, rel each ranked chunk's relevance (what MinScore is compared with).
	var ranked []hit
	var rel []float64
	kind := KindFused
	switch mode {
	case ModeKeyword:
		ranked, kind = kw, KindBM25
		rel = make([]float64, len(kw))
		for i, h := range kw {
			rel[i] = h.score / kwTop
		}
	case ModeVector:
		ranked, kind = vec, KindCosine
		rel = make([]float64, len(vec))
		for i, h := range vec {
			rel[i] = h.score
		}
	default:
		// The sides the query has: words, and a vector to compare with the index's.
		wk, wv := weights.Keyword, weights.Vector
		if s.words == 0 {
			wk = 0
		}
		if qvec == nil {
			wv = 0
		}
		ranked = s.fuse(kw, vec, kwOf, kwTop, wk, wv)
		rel = make([]float64, len(ranked))
		for i, h := range ranked {
			rel[i] = h.score
		}
	}
	details := make(map[uint32]*Result, len(kw)+len(vec))
	results := make([]Result, 0, len(ranked))
	for _, h := range ranked {
		results = append(results, Result{Score: h.score, Kind: kind})
		r := &results[len(results)-1]
		details[h.slot] = r
		if qvec != nil && ix.entries[h.slot].hasVec {
			r.Vector = float64(s.q.dot(ix.vec(h.slot)))
		}
	}
	for i, h := range kw {
		if r := details[h.slot]; r != nil {
			r.Keyword, r.KeywordRank = h.score, i+1
		}
	}
	for i, h := range vec {
		if r := details[h.slot]; r != nil {
			r.VectorRank = i + 1
			if kwOf != nil && r.KeywordRank == 0 {
				r.Keyword = kwOf[i]
			}
		}
	}

	// Each result's relevance is its score in the ranking relative to the best result's, whatever the
	// mode: that is what MinScore is compared with. (The keyword ranking's relevance already is; the
	// vector ranking's cosine and the fused score are not: a MinScore compared with them meant another
	// thing in each mode, and kept nothing in vector mode where a query's best cosine was under it.)
	var best float64
	for _, x := range rel {
		best = max(best, x)
	}
	for i := range results {
		if best > 0 {
			results[i].Relevance = max(rel[i], 0) / best
		}
	}
	// Keep the results as relevant as MinScore or more, attaching their chunks.
	slots := make([]uint32, 0, len(ranked))
	kept, keptRel := results[:0], rel[:0]
	for i, r := range results {
		if q.MinScore > 0 && r.Relevance < q.MinScore {
			continue
		}
		slots = append(slots, ranked[i].slot)
		kept, keptRel = append(kept, r), append(keptRel, rel[i])
	}
	results, rel = kept, keptRel

	if mode == ModeMMR {
		results, slots = s.mmr(results, slots, rel, lambda, topK)
	}
	if len(results) > topK {
		results, slots = results[:topK], slots[:topK]
	}
	for i := range results {
		results[i].Rank = i + 1
		results[i].Chunk = ix.entries[slots[i]].copyChunk()
	}
	return results, nil
}

// copyChunk returns a copy of the entry's chunk with its metadata as a whole, in a map of its own.
func (e *entry) copyChunk() *loom.Chunk {
	c := e.chunk
	c.Metadata = nil
	if n := len(e.doc) + len(e.chunk.Metadata); n > 0 {
		c.Metadata = make(map[string]string, n)
		maps.Copy(c.Metadata, e.doc)
		maps.Copy(c.Metadata, e.chunk.Metadata)
	}
	return &c
}

// searcher is the per-call state of a search, used under the index's read lock.
type searcher struct {
	ix     *Index
	filter map[string]string
	qvec   []float32 // normalized query vector, or nil
	q      query     // qvec's query, for its dot products
	// words is how many distinct terms the query text has, set by bm25.
	words int
	// scoreAlso are slots whose BM25 scores bm25 writes to alsoScores (0 for a chunk without the query's
	// words), whether or not they are among the best: the vector candidates of a fused search.
	scoreAlso  []uint32
	alsoScores []float64
}

// ok reports whether slot is live and passes the filter.
func (s *searcher) ok(slot uint32) bool {
	e := &s.ix.entries[slot]
	if !e.live {
		return false
	}
	if len(s.filter) == 0 {
		return true // (ranging over an empty map is not free)
	}
	for k, v := range s.filter {
		if k == FilterDocumentID {
			if e.chunk.DocumentID != v {
				return false
			}
			continue
		}
		got, ok := e.chunk.Metadata[k]
		if !ok {
			got, ok = e.doc[k]
		}
		if !ok || got != v {
			return false
		}
	}
	return true
}

// accPool holds score accumulators for BM25, one float64 per slot.
var accPool = sync.Pool{New: func() any { return new([]float64) }}

// bm25 returns the n best chunks for text by BM25, best first.
func (s *searcher) bm25(ctx context.Context, text string, n int) ([]hit, error) {
	ix := s.ix
	words := AppendTerms(nil, text)
	if len(words) == 0 || ix.live == 0 {
		return nil, nil
	}
	slices.Sort(words)
	words = slices.Compact(words) // each query term counts once
	s.words = len(words)

	accp := accPool.Get().(*[]float64)
	defer accPool.Put(accp)
	if cap(*accp) < len(ix.entries) {
		*accp = make([]float64, len(ix.entries))
	}
	acc := (*accp)[:len(ix.entries)]
	var touched []uint32
	defer func() {
		for _, slot := range touched {
			acc[slot] = 0
		}
	}()

	N := float64(ix.live)
	avgdl := float64(ix.totalLen) / N
	for _, w := range words {
		t := ix.terms[w]
		if t == nil || t.df == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("retriever: %w", err)
		}
		idf := math.Log(1 + (N-float64(t.df)+0.5)/(float64(t.df)+0.5))
		for _, p := range t.postings {
			e := &ix.entries[p.slot]
			if !e.live {
				continue
			}
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(e.length)/avgdl)
			if acc[p.slot] == 0 {
				touched = append(touched, p.slot)
			}
			acc[p.slot] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
	for i, slot := range s.scoreAlso {
		s.alsoScores[i] = acc[slot]
	}
	// The touched slots are live: without a filter, none is left out, and their entries (a cache miss
	// each) need not be read again.
	top := newTopK(n, ix)
	for _, slot := range touched {
		if len(s.filter) == 0 || s.ok(slot) {
			top.push(hit{slot: slot, score: acc[slot]})
		}
	}
	return top.sorted(), nil
}

// vector returns the n chunks most similar to the query vector, best first, leaving out those whose
// similarity is not positive.
func (s *searcher) vector(ctx context.Context, n int, exact bool) ([]hit, error) {
	ix := s.ix
	if !exact && ix.graph != nil && ix.wantGraph() {
		if hits, ok := s.approximate(n); ok {
			return hits, nil
		}
	}
	top := newTopK(n, ix)
	for slot := range ix.entries {
		if slot%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("retriever: %w", err)
			}
		}
		e := &ix.entries[slot]
		if !e.hasVec || !e.live {
			continue
		}
		d := float64(s.q.dot(ix.vec(uint32(slot))))
		if d <= 0 || (top.full() && !top.beats(hit{uint32(slot), d})) {
			continue
		}
		if len(s.filter) > 0 && !s.ok(uint32(slot)) {
			continue
		}
		top.push(hit{slot: uint32(slot), score: d})
	}
	return top.sorted(), nil
}

// approximate searches the HNSW graph, asking for more neighbours than needed to make up for dead and
// filtered-out chunks. It reports false when too few remain: the caller then searches exactly.
func (s *searcher) approximate(n int) ([]hit, bool) {
	ix := s.ix
	ask := max(n, ix.opts.EfSearch)
	if ix.dead > 0 {
		ask += ask / 4
	}
	if len(s.filter) > 0 {
		ask *= 4
	}
	top := newTopK(n, ix)
	dropped := false
	for _, c := range ix.graph.search(&s.q, ask) {
		if !s.ok(c.id) {
			dropped = true
			continue
		}
		if d := float64(s.q.dot(ix.vec(c.id))); d > 0 {
			top.push(hit{slot: c.id, score: d})
		}
	}
	if dropped && top.len() < n {
		return nil, false
	}
	return top.sorted(), true
}

// rrfK is the constant of reciprocal rank fusion (Fuse): a rank r counts 1/(rrfK+r).
const rrfK = 60

// fuse orders the candidates of the keyword and vector rankings (kw and vec, kwOf holding the BM25 score of
// each of vec) by their fused score: (wk*k + wv*v) / (wk + wv), k the chunk's BM25 score over kwTop and v
// its cosine similarity to the query, not below 0 (see loom.FusionWeights). Ties rank by chunk ID; chunks
// of fused score 0 are left out, and so is everything when both weights are 0.
func (s *searcher) fuse(kw, vec []hit, kwOf []float64, kwTop, wk, wv float64) []hit {
	if wk+wv <= 0 {
		return nil
	}
	out := make([]hit, 0, len(kw)+len(vec))
	fusedScore := func(bm25, cos float64) float64 {
		k := 0.0
		if kwTop > 0 {
			k = bm25 / kwTop
		}
		return (wk*k + wv*max(cos, 0)) / (wk + wv)
	}
	seen := make(map[uint32]struct{}, len(vec))
	for i, h := range vec {
		seen[h.slot] = struct{}{}
		bm := 0.0
		if kwOf != nil {
			bm = kwOf[i]
		}
		if f := fusedScore(bm, h.score); f > 0 {
			out = append(out, hit{slot: h.slot, score: f})
		}
	}
	for _, h := range kw {
		if _, ok := seen[h.slot]; ok {
			continue
		}
		cos := 0.0
		if s.qvec != nil && s.ix.entries[h.slot].hasVec {
			cos = float64(s.q.dot(s.ix.vec(h.slot)))
		}
		if f := fusedScore(h.score, cos); f > 0 {
			out = append(out, hit{slot: h.slot, score: f})
		}
	}
	entries := s.ix.entries
	slices.SortFunc(out, func(a, b hit) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(entries[a.slot].chunk.ID, entries[b.slot].chunk.ID)
	})
	return out
}

// rrf is the reciprocal rank fusion of rankings of items keyed by key: the keys best first, and their scores.
func rrf[T any, K comparable](lists [][]T, key func(T) K) ([]K, map[K]float64) {
	score := make(map[K]float64)
	var order []K
	for _, list := range lists {
		for rank, item := range list {
			k := key(item)
			if _, ok := score[k]; !ok {
				order = append(order, k)
			}
			score[k] += 1 / float64(rrfK+rank+1)
		}
	}
	slices.SortStableFunc(order, func(a, b K) int { return cmp.Compare(score[b], score[a]) })
	return order, score
}

// ScoredID is a chunk ID and a score, one item of a ranking.
type ScoredID struct {
	ID    string
	Score float64
}

// Fuse fuses rankings of chunk IDs (each best first) by reciprocal rank fusion: each ID scores the sum over
// the rankings it is in of 1/(60+rank), ranks from 1, whatever the input scores were. It returns the IDs
// best first; ties keep the order of first appearance. It suits rankings whose scores are not comparable,
// such as the results of two collections; a hybrid search fuses its own two rankings by score instead
// (see loom.FusionWeights), which weighs each side by its quality.
func Fuse(lists ...[]ScoredID) []ScoredID {
	order, score := rrf(lists, func(s ScoredID) string { return s.ID })
	out := make([]ScoredID, len(order))
	for i, id := range order {
		out[i] = ScoredID{ID: id, Score: score[id]}
	}
	return out
}

// mmr reorders results (ranked by relevance, rel, best first) by maximal marginal relevance, picking up to
// k. It first drops each result that duplicates a more relevant one (see fingerprint) and keeps the pool
// of the max(mmrMinPool, mmrPoolFactor*k) most relevant of the others; then each pick is the candidate of
// the pool with the best lambda*relevance - (1-lambda)*(its greatest cosine similarity to a chunk already
// picked), ties to the more relevant.
func (s *searcher) mmr(results []Result, slots []uint32, rel []float64, lambda float64, k int) ([]Result, []uint32) {
	ix := s.ix
	size := max(mmrMinPool, mmrPoolFactor*k)
	pool := make([]int, 0, min(size, len(results))) // indexes into results, most relevant first
	for i := 0; i < len(results) && len(pool) < size; i++ {
		fp := &ix.fps[slots[i]]
		if !slices.ContainsFunc(pool, func(j int) bool { return ix.fps[slots[j]].duplicates(fp) }) {
			pool = append(pool, i)
		}
	}
	maxSim := make([]float64, len(pool))
	picked := make([]bool, len(pool))
	outR := make([]Result, 0, min(k, len(pool)))
	outS := make([]uint32, 0, cap(outR))
	for len(outR) < k && len(outR) < len(pool) {
		best, bestScore := -1, math.Inf(-1)
		for p, i := range pool {
			if picked[p] {
				continue
			}
			if m := lambda*rel[i] - (1-lambda)*maxSim[p]; m > bestScore {
				best, bestScore = p, m
			}
		}
		picked[best] = true
		i := pool[best]
		r := results[i]
		r.Score, r.Kind = bestScore, KindMMR
		outR = append(outR, r)
		outS = append(outS, slots[i])
		if !ix.entries[slots[i]].hasVec {
			continue
		}
		v := ix.vec(slots[i])
		for p, j := range pool {
			if !picked[p] && ix.entries[slots[j]].hasVec {
				maxSim[p] = max(maxSim[p], float64(dot(v, ix.vec(slots[j]))))
			}
		}
	}
	return outR, outS
}

// topK keeps the n best hits seen: a min-heap on score, ties broken towards the lower chunk ID, so that
// the ranking does not depend on the order the chunks were added in (which is the order a store scans
// them, or the order they were ingested): every store's index of the same chunks ranks them alike.
type topK struct {
	n       int
	h       []hit
	entries []entry
	ord     []uint32 // the index's ords: see Index.byID
}

func newTopK(n int, ix *Index) *topK {
	return &topK{n: n, h: make([]hit, 0, min(n, 1024)), entries: ix.entries, ord: ix.ord}
}

func (t *topK) len() int   { return len(t.h) }
func (t *topK) full() bool { return len(t.h) >= t.n }

// worse reports whether a ranks below b.
func (t *topK) worse(a, b hit) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	if a.slot == b.slot {
		return false
	}
	if int(a.slot) < len(t.ord) && int(b.slot) < len(t.ord) {
		return t.ord[a.slot] > t.ord[b.slot]
	}
	return t.entries[a.slot].chunk.ID > t.entries[b.slot].chunk.ID
}

// beats reports whether h would enter a full heap.
func (t *topK) beats(h hit) bool { return t.worse(t.h[0], h) }

func (t *topK) push(h hit) {
	if t.n <= 0 {
		return
	}
	if len(t.h) < t.n {
		t.h = append(t.h, h)
		t.up(len(t.h) - 1)
		return
	}
	if !t.worse(t.h[0], h) {
		return
	}
	t.h[0] = h
	t.down(0)
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.worse(t.h[i], t.h[p]) {
			return
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *topK) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(t.h) {
			return
		}
		m := l
		if r := l + 1; r < len(t.h) && t.worse(t.h[r], t.h[l]) {
			m = r
		}
		if !t.worse(t.h[m], t.h[i]) {
			return
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

// sorted returns the hits best first, emptying the heap.
func (t *topK) sorted() []hit {
	out := t.h
	slices.SortFunc(out, func(a, b hit) int {
		if t.worse(a, b) {
			return 1
		}
		if t.worse(b, a) {
			return -1
		}
		return 0
	})
	t.h = nil
	return out
}
