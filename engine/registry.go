package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/retriever"
)

// The registry holds an in-memory search index per collection, built from the store on the collection's
// first use (by one build that every caller asking meanwhile shares) and kept current by the writes of
// its engine and by following the store's change feed, which reports the writes of every other engine
// (other servers on the same Valkey, the CLI on the same SQLite file). A follower that falls further
// behind than the feed keeps (collection.ErrFeedTrimmed) rebuilds every loaded index rather than go on
// with a gap. So does a follower whose store may have lost acknowledged writes (collection.Epocher: a
// Valkey server restarted without persistence), and then no search is answered from the old indexes,
// which may hold what the store lost: a collection created again with the same id must not serve the
// chunks of the old one.
//
// Under a memory cap, indexes nobody is using are evicted, least recently used first, while the loaded
// ones take more than the cap by their estimate (retriever.Index.MemoryBytes); an evicted index is built
// again on its next use. An index in use (a search, a caller waiting for its build) is never evicted, nor
// the one used last, so that an index larger than the cap by itself serves its queries without a build
// each.

// indexKey names a collection's index.
type indexKey struct{ tenant, collection string }

// liveIndex is one collection's index while it is built and after.
type liveIndex struct {
	key indexKey
	// swap makes replacing a document's chunks (a removal, then an addition) atomic to searches: they hold
	// it shared, replacements exclusively.
	swap sync.RWMutex
	// write orders the writes to the index: a reload (a read of the store, then a replacement) and this
	// engine's own replacements, each made after its write to the store. A reload that read the store
	// before such a write is replaced by it, not the other way round: an engine sees its own writes at
	// once, whatever its follower is reloading.
	write sync.Mutex
	idx   *retriever.Index
	ready chan struct{} // closed when the build has ended
	err   error         // the build's error, set before ready is closed

	// Under the registry's mu:
	// pending are the documents changed while the index was being built, reloaded when it is done; nil
	// once it is built.
	pending  map[string]bool
	refs     int    // its users: searches, and callers waiting for its build
	used     uint64 // the registry's clock at its last use
	mem      int64  // its MemoryBytes when last counted; 0 until it is built
	watching bool   // a goroutine waits for its graph build, to count it
}

// registry is an engine's set of live indexes and the follower that keeps them current. It owns the
// goroutines of the builds, of the follower and of the indexes' own graph builds; Close cancels them and
// waits for them.
type registry struct {
	colls collection.Store
	opts  retriever.IndexOptions
	limit int64 // the memory cap, in bytes; 0: none

	mu    sync.Mutex
	m     map[indexKey]*liveIndex
	mem   int64  // the sum of the mem of the built indexes in m
	clock uint64 // counts the uses of indexes
	// life ends at Close, and with it the follower and the builds under way; no build or follower starts
	// after it.
	life      context.Context
	end       context.CancelFunc
	closed    bool
	closing   []*retriever.Index // the indexes loaded at Close, whose graph builds Close waits for
	wg        sync.WaitGroup     // the builds, the follower, the retired indexes' Close
	following bool               // the follower is started
	resyncs   int                // how often the follower lost its place in the feed and rebuilt every index
	builds    uint64             // builds started
	failures  uint64             // builds failed
	evictions uint64             // indexes evicted for the cap
}

// newRegistry returns an empty registry over colls, whose indexes have opts and take at most limit bytes
// (0: no limit) when idle.
func newRegistry(colls collection.Store, opts retriever.IndexOptions, limit int64) *registry {
	r := &registry{colls: colls, opts: opts, limit: limit, m: map[indexKey]*liveIndex{}}
	r.life, r.end = context.WithCancel(context.Background())
	return r
}

// IndexStats describe an engine's search indexes (see Engine.IndexStats).
type IndexStats struct {
	// Loaded is how many collections' indexes are built and held; Building, how many are being built.
	Loaded, Building int
	// MemoryBytes is the estimated memory of the loaded indexes (retriever.Index.MemoryBytes), and
	// MemoryLimit the cap WithIndexMemory set (0: none).
	MemoryBytes, MemoryLimit int64
	// Builds counts the index builds started (first uses, uses after an eviction, rebuilds after the
	// change feed was lost), BuildFailures those that failed, Evictions the indexes evicted for the cap.
	Builds, BuildFailures, Evictions uint64
}

// stats returns the registry's figures now.
func (r *registry) stats() IndexStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := IndexStats{MemoryBytes: r.mem, MemoryLimit: r.limit, Builds: r.builds, BuildFailures: r.failures, Evictions: r.evictions}
	for _, li := range r.m {
		if li.pending == nil {
			s.Loaded++
		} else {
			s.Building++
		}
	}
	return s
}

// search searches the collection's index, building it on first use.
func (r *registry) search(ctx context.Context, k indexKey, q retriever.Query) ([]retriever.Result, error) {
	li, err := r.acquire(ctx, k)
	if err != nil {
		return nil, err
	}
	defer r.release(li)
	li.swap.RLock()
	defer li.swap.RUnlock()
	return li.idx.Search(ctx, q)
}

// acquire returns the collection's index, built, and holds it for the caller until release: it is not
// evicted meanwhile. The first caller of a collection whose index is not loaded starts its build (and the
// follower, the first time); callers asking while it is built wait for the same build, each until its own
// ctx is done. A build that failed is forgotten: the next caller starts another.
func (r *registry) acquire(ctx context.Context, k indexKey) (*liveIndex, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	li := r.m[k]
	if li == nil {
		if !r.following {
			// The feed's position is taken before the first scan, so that no change falls between them, and
			// the store's epoch before the position.
			pos, err := r.feedPos(ctx)
			if err != nil {
				r.mu.Unlock()
				return nil, err
			}
			r.startFollower(pos)
		}
		li = &liveIndex{key: k, idx: retriever.NewIndex(r.opts), ready: make(chan struct{}), pending: map[string]bool{}}
		r.m[k] = li
		r.builds++
		r.wg.Add(1)
		go r.build(li)
	}
	li.refs++
	r.clock++
	li.used = r.clock
	r.mu.Unlock()
	select {
	case <-li.ready:
	case <-ctx.Done():
		r.release(li)
		return nil, ctx.Err()
	}
	if li.err != nil {
		r.release(li)
		return nil, li.err
	}
	return li, nil
}

// release ends a use of li that acquire began, and evicts what the cap requires.
func (r *registry) release(li *liveIndex) {
	r.mu.Lock()
	defer r.mu.Unlock()
	li.refs--
	if li.refs == 0 {
		r.enforce()
	}
}

// build fills li's index from the store, in a goroutine of its own that Close ends: not tied to the
// context of the caller who asked for it, since others may be waiting for it too.
func (r *registry) build(li *liveIndex) {
	defer r.wg.Done()
	err := r.fill(r.life, li.key, li.idx)
	if err != nil && r.life.Err() != nil {
		err = ErrClosed
	}
	mem, building := li.idx.MemoryBytes(), li.idx.GraphBuilding()
	r.mu.Lock()
	pending := li.pending
	li.pending = nil
	if err != nil {
		li.err = err
		r.failures++
		if r.m[li.key] == li {
			delete(r.m, li.key) // the next retrieval tries again
		}
		close(li.ready)
		r.mu.Unlock()
		_ = li.idx.Close(context.Background()) // a graph build the scan started
		return
	}
	// Counted before anyone can use it: no write reaches it while pending is set.
	r.counted(li, mem, building)
	close(li.ready)
	r.mu.Unlock()
	for doc := range pending {
		r.reload(li, doc)
	}
}

// fill adds every chunk of the collection to idx.
func (r *registry) fill(ctx context.Context, k indexKey, idx *retriever.Index) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := r.colls.ScanChunks(ctx, k.tenant, k.collection, func(c collection.Chunk) error { return idx.Add(c) }); err != nil {
		return fmt.Errorf("build the index of collection %s: %w", k.collection, err)
	}
	return nil
}

// count counts li's memory again, if it is loaded, and evicts what the cap requires.
func (r *registry) count(li *liveIndex) {
	// No replacement runs while the count is taken and stored: the last count stored is that of the
	// index as the last replacement left it.
	li.swap.RLock()
	defer li.swap.RUnlock()
	mem, building := li.idx.MemoryBytes(), li.idx.GraphBuilding()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counted(li, mem, building)
}

// counted stores li's memory, mem, if li is loaded, and evicts what the cap requires; the caller holds
// r.mu. While the index builds its HNSW graph (building), a goroutine waits for the graph and counts the
// index again.
func (r *registry) counted(li *liveIndex, mem int64, building bool) {
	if r.m[li.key] != li || li.pending != nil {
		return
	}
	r.mem += mem - li.mem
	li.mem = mem
	if building && !li.watching && !r.closed {
		li.watching = true
		r.wg.Go(func() {
			err := li.idx.WaitGraph(r.life)
			r.mu.Lock()
			li.watching = false
			r.mu.Unlock()
			if err == nil {
				r.count(li)
			}
		})
	}
	r.enforce()
}

// enforce evicts idle indexes, least recently used first, while the loaded ones take more than the cap;
// the caller holds r.mu. An index in use is kept, and so is the one used last.
func (r *registry) enforce() {
	if r.limit <= 0 || r.mem <= r.limit {
		return
	}
	var last *liveIndex
	idle := make([]*liveIndex, 0, len(r.m))
	for _, li := range r.m {
		if li.pending != nil {
			continue
		}
		if last == nil || li.used > last.used {
			last = li
		}
		if li.refs == 0 {
			idle = append(idle, li)
		}
	}
	slices.SortFunc(idle, func(a, b *liveIndex) int { return cmp.Compare(a.used, b.used) })
	for _, li := range idle {
		if r.mem <= r.limit {
			return
		}
		if li == last {
			continue
		}
		r.evictions++
		r.remove(li)
	}
}

// remove takes li out of the registry and stops its index's graph build; the caller holds r.mu. Searches
// that hold li finish on it.
func (r *registry) remove(li *liveIndex) {
	delete(r.m, li.key)
	r.mem -= li.mem
	li.mem = 0
	r.retire(li.idx)
}

// retire stops the graph build of an index that left the registry, in a goroutine of the registry's;
// the caller holds r.mu. After Close, Close does it.
func (r *registry) retire(idx *retriever.Index) {
	if r.closed {
		return
	}
	r.wg.Go(func() { _ = idx.Close(context.Background()) })
}

// drop forgets a collection's index.
func (r *registry) drop(k indexKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if li := r.m[k]; li != nil {
		r.remove(li)
	}
}

// put puts a document's chunks (none: removes the document) into the collection's index, if it is loaded.
func (r *registry) put(k indexKey, docID string, chunks []collection.Chunk) {
	r.mu.Lock()
	li := r.m[k]
	if li != nil && li.pending != nil { // building: the document is reloaded when the build is done
		li.pending[docID] = true
		li = nil
	}
	r.mu.Unlock()
	if li != nil {
		li.write.Lock()
		defer li.write.Unlock()
		r.replace(li, docID, chunks)
	}
}

// replace replaces a document's chunks in li's index (none: removes the document).
func (r *registry) replace(li *liveIndex, docID string, chunks []collection.Chunk) {
	li.swap.Lock()
	li.idx.RemoveDocument(docID)
	if len(chunks) > 0 {
		_ = li.idx.Add(chunks...)
	}
	li.swap.Unlock()
	r.count(li)
}

// reload replaces a document's chunks in li's index with what the store holds now.
func (r *registry) reload(li *liveIndex, docID string) {
	li.write.Lock()
	defer li.write.Unlock()
	ctx, cancel := context.WithTimeout(r.life, reloadTimeout)
	defer cancel()
	k := li.key
	chunks, err := r.colls.DocumentChunks(ctx, k.tenant, k.collection, docID)
	if err != nil && !errors.Is(err, collection.ErrNotFound) {
		return // the next change of the document, or a rebuild, repairs it
	}
	r.replace(li, docID, chunks)
}

// reloadTimeout bounds a reload's read of the store, which the engine's own writes to the index wait for.
const reloadTimeout = 30 * time.Second

// feedPos is where the follower is: the change it applied last, and the store's epoch ("" for a store
// that is no collection.Epocher) when it took that position.
type feedPos struct{ last, epoch string }

// feedPos returns the feed's position now: the store's epoch, then the newest change.
func (r *registry) feedPos(ctx context.Context) (feedPos, error) {
	var pos feedPos
	if ep, ok := r.colls.(collection.Epocher); ok {
		var err error
		if pos.epoch, err = ep.Epoch(ctx); err != nil {
			return pos, fmt.Errorf("read the store's epoch: %w", err)
		}
	}
	last, err := r.colls.LastChange(ctx)
	if err != nil {
		return pos, fmt.Errorf("read the change feed: %w", err)
	}
	pos.last = last
	return pos, nil
}

// startFollower starts the goroutine that applies the change feed to the loaded indexes; the caller holds
// r.mu.
func (r *registry) startFollower(from feedPos) {
	r.following = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx := r.life
		pos, pause := from, 50*time.Millisecond
		for ctx.Err() == nil {
			if err := r.follow(ctx, &pos); err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
				pause = min(2*pause, followBackoff)
				continue
			}
			pause = 50 * time.Millisecond
		}
	}()
}

// follow takes one step of the follower from pos: it rebuilds every index if the store's epoch changed
// or the feed lost pos, else it applies the changes after pos (waiting up to a second for one).
func (r *registry) follow(ctx context.Context, pos *feedPos) error {
	if ep, ok := r.colls.(collection.Epocher); ok {
		epoch, err := ep.Epoch(ctx)
		if err != nil {
			return err
		}
		if epoch != pos.epoch {
			p, err := r.resync(ctx, true)
			if err == nil {
				*pos = p
			}
			return err
		}
	}
	changes, err := r.colls.Changes(ctx, pos.last, 0, time.Second) // 0: the store's default, collection.DefaultChangesLimit
	if errors.Is(err, collection.ErrFeedTrimmed) {
		p, err := r.resync(ctx, false)
		if err == nil {
			*pos = p
		}
		return err
	}
	if err != nil {
		return err
	}
	for _, ch := range changes {
		r.apply(ch)
		pos.last = ch.Seq
	}
	return nil
}

// apply brings the loaded index a change concerns up to date.
func (r *registry) apply(ch collection.Change) {
	k := indexKey{ch.Tenant, ch.CollectionID}
	r.mu.Lock()
	li := r.m[k]
	switch {
	case li == nil:
		r.mu.Unlock()
		return
	case ch.Op == collection.OpDeleteCollection:
		r.remove(li)
		r.mu.Unlock()
		return
	case li.pending != nil:
		li.pending[ch.DocumentID] = true
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.reload(li, ch.DocumentID)
}

// resync rebuilds every loaded index from the store and returns the feed's position to follow on from:
// taken before the scans, so that no change falls between. It is called when the follower fell so far
// behind that the feed no longer holds the changes it missed (lost false), or when the store's epoch
// changed (lost true). Changes are not applied meanwhile (the follower is busy here) and are applied to
// the new indexes afterwards.
//
// When the feed was trimmed, the old indexes miss some changes but hold nothing that is not in the store:
// searches use them until their new ones are built. When the store may have lost writes, the old indexes
// may serve chunks the store no longer has (of a collection since created again with the same id, say):
// they are dropped at once, and searches wait for the new ones.
func (r *registry) resync(ctx context.Context, lost bool) (feedPos, error) {
	dropAll := func() {
		for _, li := range r.m {
			r.remove(li)
		}
	}
	pos, err := r.feedPos(ctx)
	if err != nil {
		if lost { // nothing is answered from what the store lost; the follower's next try rebuilds
			r.mu.Lock()
			dropAll()
			r.mu.Unlock()
		}
		return feedPos{}, err
	}
	r.mu.Lock()
	// Rebuilt least recently used first, so that the cap evicts (and the registry's order of use keeps)
	// what it would have before.
	old := slices.SortedFunc(maps.Values(r.m), func(a, b *liveIndex) int { return cmp.Compare(a.used, b.used) })
	if lost {
		dropAll()
	}
	r.mu.Unlock()
	for _, li := range old {
		if lost {
			// Built as on a first retrieval, which waits for it; a collection that is gone is not built.
			nli, err := r.acquire(ctx, li.key)
			if errors.Is(err, ErrClosed) {
				return feedPos{}, err
			}
			if err == nil {
				r.release(nli)
			}
		} else if err := r.rebuild(ctx, li); err != nil {
			return feedPos{}, err
		}
		if ctx.Err() != nil {
			return feedPos{}, ctx.Err()
		}
	}
	r.mu.Lock()
	r.resyncs++
	r.mu.Unlock()
	return pos, nil
}

// rebuild builds li's index again from the store and puts the new one in its place, unless li was
// dropped meanwhile; searches use li until then. It returns ErrClosed after Close.
func (r *registry) rebuild(ctx context.Context, li *liveIndex) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.builds++
	r.mu.Unlock()
	idx := retriever.NewIndex(r.opts)
	err := r.fill(ctx, li.key, idx)
	mem, building := idx.MemoryBytes(), idx.GraphBuilding()
	r.mu.Lock()
	closed := r.closed
	if err != nil {
		r.failures++
	}
	switch {
	case closed: // Close waits for this goroutine but never saw this index: it is closed below
	case r.m[li.key] != li: // dropped or replaced meanwhile
		r.retire(idx)
	case err != nil:
		r.remove(li) // the next retrieval builds it again
		r.retire(idx)
	default:
		ready := make(chan struct{})
		close(ready)
		nli := &liveIndex{key: li.key, idx: idx, ready: ready, used: li.used}
		r.m[li.key] = nli
		r.mem -= li.mem
		r.retire(li.idx)
		r.counted(nli, mem, building)
	}
	r.mu.Unlock()
	if closed {
		_ = idx.Close(context.Background())
		return ErrClosed
	}
	return nil
}

// Close ends the follower and the builds under way, stops the graph builds of the loaded indexes, and
// waits for all of them, or returns ctx's error when ctx is done first (calling it again waits again).
// Builds and searches asked for after it fail with ErrClosed; searches under way finish.
func (r *registry) Close(ctx context.Context) error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		r.end()
		for _, li := range r.m {
			r.closing = append(r.closing, li.idx)
		}
		clear(r.m)
		r.mem = 0
	}
	closing := r.closing
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, idx := range closing {
		if err := idx.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}
