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
	"sync/atomic"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
)

// Defaults of [IndexOptions].
const (
	// DefaultHNSWThreshold is the number of vectors beyond which vector search goes through an HNSW graph.
	DefaultHNSWThreshold = 20000
	// DefaultM is the number of neighbours each node of the HNSW graph keeps.
	DefaultM = 16
	// DefaultEfSearch is the number of nodes an HNSW search gathers at the bottom layer, at least.
	DefaultEfSearch = 150
	// DefaultEfConstruction is the number of candidates an insertion into the HNSW graph gathers.
	DefaultEfConstruction = 128
)

// buildCatchUp is the most vectors added during a background graph build that are inserted into the new
// graph under the write lock; while more are waiting, the build goes on outside it.
const buildCatchUp = 256

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// IndexOptions configure an [Index]. The zero value means the defaults.
type IndexOptions struct {
	// HNSWThreshold: vector search uses an approximate HNSW graph once the index holds more than this many
	// vectors, and exact (brute-force) search below. 0 means DefaultHNSWThreshold; a negative value means
	// exact search always.
	HNSWThreshold int
	// M is the number of neighbours per node of the HNSW graph; 0 or less means DefaultM.
	M int
	// EfSearch is the least number of nodes an HNSW search collects before the best are taken (more is
	// slower and finds more of the true nearest neighbours); 0 or less means DefaultEfSearch.
	EfSearch int
	// EfConstruction is the number of candidates an insertion into the HNSW graph gathers (more builds
	// slower and makes a graph that searches find more in); 0 or less means DefaultEfConstruction.
	EfConstruction int
}

// Index is an in-memory search index of one collection's chunks: BM25 over their text and cosine similarity
// over their vectors. It is safe for concurrent use: searches run in parallel, and Add and RemoveDocument
// wait for them.
//
// Removed and replaced chunks are only marked dead at first; when they are more than a fifth of the slots,
// the write that crosses that line compacts the index.
//
// The HNSW graph is built in the background, by a goroutine that the write that crosses HNSWThreshold (or
// compacts the index) starts and that ends with the build: searches and writes go on meanwhile, vector
// search being exact until the graph is ready. Once it is, each added vector is inserted into the graph
// by the write that adds it. [Index.WaitGraph] waits for a build; [Index.Close] stops it.
type Index struct {
	opts IndexOptions

	mu      sync.RWMutex
	entries []entry // by slot; slots are never reused until a compaction renumbers them
	// fps holds each slot's fingerprint, for MMR's duplicates: beside the entries, not in them, so that
	// BM25, which reads an entry per posting, reads no more memory for them.
	fps  []fingerprint
	ids  map[string]uint32 // live chunk ID -> slot
	docs map[string][]uint32
	// docMeta holds the metadata of each document, shared by the entries of its chunks (an entry keeps
	// only its chunk's own keys), so that a document's metadata is held once, not once a chunk.
	docMeta map[string]map[string]string
	live    int // live entries
	dead    int // dead entries
	liveVec int // live entries with a vector

	// BM25 statistics over live entries.
	terms    map[string]*term
	totalLen int

	// byID holds the slots below len(byID) in chunk ID order (a dead slot before the slot that replaced it,
	// which has the same ID), and ord[slot] is the position of slot in byID: searches break ties of score
	// by comparing ords, two integers, instead of the chunks' IDs, two strings far apart in memory. The
	// slots added since have no ord yet, and ties between them and others compare IDs; a write that leaves
	// more than a sixteenth of the slots without one merges them in (see order).
	byID []uint32
	ord  []uint32

	// heap is the memory held by the entries' strings and metadata, the terms and their postings and the
	// documents' slots and metadata, as the writes allocated it (see MemoryBytes).
	heap int64

	// Vectors, normalized, in pages of pageRows rows that never move (the HNSW graph keeps slices of them).
	dims  int
	pages [][]float32

	graph  *graph      // nil while vector search is exact
	build  *graphBuild // the build in progress, or nil
	closed bool        // no more builds start
	// epoch counts the compactions, which renumber the slots: a build that began before the last one
	// starts again. It is written under mu, read by the build without it.
	epoch   atomic.Uint64
	stopped atomic.Bool // closed, for the build to read without mu

	buildGate chan struct{} // tests: when not nil, builds wait for it to be closed before they begin
}

// graphBuild is a background build of the HNSW graph.
type graphBuild struct {
	done chan struct{} // closed when the goroutine has ended
}

type entry struct {
	chunk  loom.Chunk // its Metadata holds the chunk's own keys only: those doc does not hold alike
	doc    map[string]string
	length int // number of terms
	live   bool
	hasVec bool // the chunk has a non-zero vector
}

type term struct {
	postings []posting // in increasing slot order; may hold dead slots
	df       int       // live entries holding the term
}

type posting struct {
	slot uint32
	tf   uint32
}

const pageRows = 1024

// NewIndex returns an empty index.
func NewIndex(opts IndexOptions) *Index {
	if opts.HNSWThreshold == 0 {
		opts.HNSWThreshold = DefaultHNSWThreshold
	}
	if opts.M <= 0 {
		opts.M = DefaultM
	}
	if opts.EfSearch <= 0 {
		opts.EfSearch = DefaultEfSearch
	}
	if opts.EfConstruction <= 0 {
		opts.EfConstruction = DefaultEfConstruction
	}
	return &Index{
		opts:    opts,
		ids:     make(map[string]uint32),
		docs:    make(map[string][]uint32),
		docMeta: make(map[string]map[string]string),
		terms:   make(map[string]*term),
	}
}

// Len returns the number of chunks in the index.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Add adds chunks to the index, each replacing the chunk of the same ID if there is one (a later chunk of
// the same ID in one call replaces an earlier one). Vectors are copied and normalized; a chunk may have no
// vector (it is then found by keywords only), and an all-zero vector counts as none. A chunk's metadata is
// its DocumentMetadata under its Metadata, as collection.Chunk says (filters and results see the whole);
// the maps are copied, and the document's is kept once for all the chunks of the document that share it.
//
// Add returns an error wrapping ErrInvalidChunk for a chunk without an ID or with a NaN or infinite vector
// component, and ErrDimensions for a vector whose length differs from the others'; it then adds none of the
// chunks.
func (ix *Index) Add(chunks ...collection.Chunk) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	dims := ix.dims
	for i, c := range chunks {
		if c.ID == "" {
			return fmt.Errorf("%w: chunk %d of %d has no ID", ErrInvalidChunk, i, len(chunks))
		}
		if len(c.Vector) == 0 {
			continue
		}
		if dims == 0 {
			dims = len(c.Vector)
		}
		if len(c.Vector) != dims {
			return fmt.Errorf("%w: chunk %q has %d dimensions, want %d", ErrDimensions, c.ID, len(c.Vector), dims)
		}
		for _, x := range c.Vector {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%w: chunk %q has a vector holding %v", ErrInvalidChunk, c.ID, x)
			}
		}
	}
	ix.dims = dims
	var buf []string
	for _, c := range chunks {
		buf = ix.add(c, buf[:0])
	}
	ix.maintain()
	return nil
}

// add adds one validated chunk; buf is scratch space for its terms.
func (ix *Index) add(c collection.Chunk, buf []string) []string {
	if old, ok := ix.ids[c.ID]; ok {
		ix.kill(old, buf)
	}
	slot := uint32(len(ix.entries))
	e := entry{chunk: c.Chunk, live: true}
	e.doc = ix.documentMetadata(c.DocumentID, c.DocumentMetadata)
	e.chunk.Metadata = maps.Clone(collection.OwnMetadata(e.doc, c.Metadata))
	ix.heap += entryBytes(&e)

	buf = AppendTerms(buf[:0], c.Content)
	e.length = len(buf)
	ix.fps = append(ix.fps, fingerprintOf(buf))
	counts := make(map[string]uint32, len(buf))
	for _, w := range buf {
		counts[w]++
	}
	for w, n := range counts {
		t := ix.terms[w]
		if t == nil {
			t = &term{}
			ix.terms[string([]byte(w))] = t // a copy, not a slice of the chunk's content
			ix.heap += int64(len(w)) + termSize
		}
		had := cap(t.postings)
		t.postings = append(t.postings, posting{slot: slot, tf: n})
		ix.heap += int64(cap(t.postings)-had) * postingSize
		t.df++
	}
	ix.totalLen += e.length

	row := ix.row(slot)
	if len(c.Vector) > 0 {
		copy(row, c.Vector)
		embed.Normalize(row)
		for _, x := range row {
			if x != 0 {
				e.hasVec = true
				break
			}
		}
	}
	ix.entries = append(ix.entries, e)
	ix.ids[c.ID] = slot
	slots := ix.docs[c.DocumentID]
	had := cap(slots)
	ix.docs[c.DocumentID] = append(slots, slot)
	ix.heap += int64(cap(ix.docs[c.DocumentID])-had) * 4
	ix.live++
	if e.hasVec {
		ix.liveVec++
		if ix.graph != nil {
			ix.graph.pages = ix.pages
			ix.graph.insert(slot)
		}
	}
	return buf
}

// documentMetadata returns the index's copy of the metadata m of the document docID: the one it holds
// already if that has the same entries, else a new copy (nil for none).
func (ix *Index) documentMetadata(docID string, m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	if have, ok := ix.docMeta[docID]; ok && maps.Equal(have, m) {
		return have
	}
	have := maps.Clone(m)
	// What the heap counts of documents' metadata is the copies this map holds (an entry may still hold an
	// older one until it is replaced or compacted away).
	ix.heap += metadataBytes(have) - metadataBytes(ix.docMeta[docID])
	ix.docMeta[docID] = have
	return have
}

// row returns the vector row of slot, growing the pages to hold it; nil while the index has no dimensions.
func (ix *Index) row(slot uint32) []float32 {
	if ix.dims == 0 {
		return nil
	}
	p := int(slot / pageRows)
	for p >= len(ix.pages) {
		ix.pages = append(ix.pages, make([]float32, pageRows*ix.dims))
	}
	off := int(slot%pageRows) * ix.dims
	return ix.pages[p][off : off+ix.dims : off+ix.dims]
}

// vec returns the vector of a slot that has one.
func (ix *Index) vec(slot uint32) []float32 {
	off := int(slot%pageRows) * ix.dims
	return ix.pages[slot/pageRows][off : off+ix.dims : off+ix.dims]
}

// kill marks a live slot dead and takes it out of the statistics; buf is scratch space.
func (ix *Index) kill(slot uint32, buf []string) []string {
	e := &ix.entries[slot]
	if !e.live {
		return buf
	}
	e.live = false
	ix.live--
	ix.dead++
	if e.hasVec {
		ix.liveVec--
	}
	ix.totalLen -= e.length
	buf = AppendTerms(buf[:0], e.chunk.Content)
	seen := make(map[string]bool, len(buf))
	for _, w := range buf {
		if !seen[w] {
			seen[w] = true
			ix.terms[w].df--
		}
	}
	if ix.ids[e.chunk.ID] == slot {
		delete(ix.ids, e.chunk.ID)
	}
	return buf
}

// RemoveDocument removes the chunks of the document docID and returns how many there were.
func (ix *Index) RemoveDocument(docID string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	var buf []string
	for _, slot := range ix.docs[docID] {
		if ix.entries[slot].live && ix.entries[slot].chunk.DocumentID == docID {
			buf = ix.kill(slot, buf)
			n++
		}
	}
	ix.heap -= int64(cap(ix.docs[docID]))*4 + metadataBytes(ix.docMeta[docID])
	delete(ix.docs, docID)
	delete(ix.docMeta, docID)
	ix.maintain()
	return n
}

// maintain compacts the index when dead slots are more than a fifth of all, and starts building the HNSW
// graph when the index has grown past the threshold (or lost its graph to a compaction).
func (ix *Index) maintain() {
	if ix.dead > 0 && 5*ix.dead > len(ix.entries) {
		ix.compact()
	}
	if n := len(ix.entries) - len(ix.ord); n > 0 && 16*n > len(ix.entries) {
		ix.order()
	}
	if ix.graph == nil && ix.build == nil && !ix.closed && ix.wantGraph() {
		b := &graphBuild{done: make(chan struct{})}
		ix.build = b
		go ix.runBuild(b)
	}
}

// order gives an ord to the slots that have none, the fresh ones: it sorts them by chunk ID and merges them
// into byID from the back, which costs f log f comparisons of IDs for f fresh slots and at most one more for
// each slot whose ID comes after the first fresh one's. As maintain orders only when more than a sixteenth
// of the slots are fresh, an index built a chunk at a time spends a few tens of comparisons a chunk on it.
func (ix *Index) order() {
	n, have := len(ix.entries), len(ix.byID)
	fresh := make([]uint32, 0, n-have)
	for s := have; s < n; s++ {
		fresh = append(fresh, uint32(s))
	}
	slices.SortFunc(fresh, func(a, b uint32) int {
		return cmp.Or(strings.Compare(ix.entries[a].chunk.ID, ix.entries[b].chunk.ID), cmp.Compare(a, b))
	})
	// Merge from the back, into byID grown in place; an old slot goes before a fresh one of the same ID.
	byID := slices.Grow(ix.byID, len(fresh))[:n]
	i, j, k := have-1, len(fresh)-1, n-1
	for ; j >= 0; k-- {
		if i >= 0 && ix.entries[fresh[j]].chunk.ID < ix.entries[byID[i]].chunk.ID {
			byID[k] = byID[i]
			i--
		} else {
			byID[k] = fresh[j]
			j--
		}
	}
	// The positions up to k kept their slots.
	ix.byID, ix.ord = byID, slices.Grow(ix.ord, n-len(ix.ord))[:n]
	for pos := k + 1; pos < n; pos++ {
		ix.ord[byID[pos]] = uint32(pos)
	}
}

// wantGraph reports whether vector search should go through the HNSW graph.
func (ix *Index) wantGraph() bool {
	return ix.opts.HNSWThreshold >= 0 && ix.liveVec > ix.opts.HNSWThreshold
}

// compact drops the dead slots, renumbering the live ones in their order, and rebuilds the graph.
func (ix *Index) compact() {
	remap := make([]uint32, len(ix.entries))
	entries := make([]entry, 0, ix.live)
	fps := make([]fingerprint, 0, ix.live)
	oldPages := ix.pages
	ix.pages = nil
	oldDims := ix.dims
	for old := range ix.entries {
		e := ix.entries[old]
		if !e.live {
			remap[old] = math.MaxUint32
			continue
		}
		slot := uint32(len(entries))
		remap[old] = slot
		entries = append(entries, e)
		fps = append(fps, ix.fps[old])
		if e.hasVec {
			off := (old % pageRows) * oldDims
			copy(ix.row(slot), oldPages[old/pageRows][off:off+oldDims])
		}
	}
	ix.entries, ix.fps = entries, fps
	ix.dead = 0
	// The slots that had an ord keep their order, under their new numbers (which come before the others').
	byID := ix.byID[:0]
	for _, s := range ix.byID {
		if s := remap[s]; s != math.MaxUint32 {
			byID = append(byID, s)
		}
	}
	ix.byID, ix.ord = byID, ix.ord[:len(byID)]
	for pos, s := range byID {
		ix.ord[s] = uint32(pos)
	}
	for w, t := range ix.terms {
		if t.df == 0 {
			delete(ix.terms, w)
			continue
		}
		ps := t.postings[:0]
		for _, p := range t.postings {
			if s := remap[p.slot]; s != math.MaxUint32 {
				ps = append(ps, posting{slot: s, tf: p.tf})
			}
		}
		t.postings = ps
	}
	clear(ix.ids)
	clear(ix.docs)
	for i, e := range ix.entries {
		ix.ids[e.chunk.ID] = uint32(i)
		ix.docs[e.chunk.DocumentID] = append(ix.docs[e.chunk.DocumentID], uint32(i))
	}
	for doc := range ix.docMeta {
		if _, ok := ix.docs[doc]; !ok {
			delete(ix.docMeta, doc)
		}
	}
	ix.graph = nil
	ix.epoch.Add(1)
	ix.recount()
}

// runBuild builds the HNSW graph of the live vectors and hands it to the index; it is the goroutine of b.
//
// It takes the slots of the live vectors under the read lock and inserts them into a graph of its own
// without any lock: the rows of the vectors never change once written, and a compaction writes new pages.
// Then it takes the vectors added meanwhile, and so on until few are left; those it inserts under the write
// lock, and swaps the graph in. A compaction makes it start again; Close makes it stop.
func (ix *Index) runBuild(b *graphBuild) {
	defer close(b.done)
	if ix.buildGate != nil {
		<-ix.buildGate
	}
	var (
		g     *graph
		epoch uint64
		done  int // the slots below are in g, or were not live vectors when taken
		slots []uint32
	)
	for {
		ix.mu.RLock()
		if g == nil || ix.epoch.Load() != epoch {
			g, epoch, done = newGraph(ix.opts.M, ix.opts.EfConstruction, ix.dims), ix.epoch.Load(), 0
		}
		more := len(ix.entries)-done > buildCatchUp && !ix.closed
		if more {
			slots = ix.vectorSlots(done, slots[:0])
			done = len(ix.entries)
			g.pages = ix.pages
		}
		ix.mu.RUnlock()
		if !more {
			ix.mu.Lock()
			if ix.closed {
				ix.build = nil
				ix.mu.Unlock()
				return
			}
			if ix.epoch.Load() == epoch {
				g.pages = ix.pages
				for _, s := range ix.vectorSlots(done, slots[:0]) {
					g.insert(s)
				}
				ix.graph, ix.build = g, nil
				ix.mu.Unlock()
				return
			}
			ix.mu.Unlock()
			continue
		}
		for _, s := range slots {
			if ix.epoch.Load() != epoch || ix.stopped.Load() {
				break
			}
			g.insert(s)
		}
	}
}

// vectorSlots appends to dst the slots from first on that are live and have a vector.
func (ix *Index) vectorSlots(first int, dst []uint32) []uint32 {
	for i := first; i < len(ix.entries); i++ {
		if e := &ix.entries[i]; e.live && e.hasVec {
			dst = append(dst, uint32(i))
		}
	}
	return dst
}

// WaitGraph waits until no HNSW graph build is in progress: until the index searches through its graph, if
// it has more vectors than IndexOptions.HNSWThreshold and is not closed. It returns ctx's error if ctx is
// done first.
func (ix *Index) WaitGraph(ctx context.Context) error {
	for {
		ix.mu.RLock()
		b := ix.build
		ix.mu.RUnlock()
		if b == nil {
			return nil
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return fmt.Errorf("retriever: %w", ctx.Err())
		}
	}
}

// GraphBuilding reports whether an HNSW graph build is in progress: [Index.MemoryBytes] counts the graph
// once it is built, and [Index.WaitGraph] waits for that.
func (ix *Index) GraphBuilding() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.build != nil
}

// Close stops a graph build in progress and waits for it to end, returning ctx's error if ctx is done
// first. The index stays usable, but builds no graph any more: vector search is exact unless the graph was
// ready before Close.
func (ix *Index) Close(ctx context.Context) error {
	ix.mu.Lock()
	ix.closed = true
	ix.stopped.Store(true)
	ix.mu.Unlock()
	return ix.WaitGraph(ctx)
}

// dot returns the dot product of two vectors of the same length.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
