package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/retriever"
)

// The engine keeps an in-memory search index per collection, built from the store at start (LoadIndexes)
// or on the first retrieval, and kept current by the writes of this engine and by following the store's
// change feed, which reports the writes of every other engine (other servers on the same Valkey, the CLI
// on the same SQLite file). A follower that falls further behind than the feed keeps
// (collection.ErrFeedTrimmed) rebuilds every loaded index rather than go on with a gap. So does a
// follower whose store may have lost acknowledged writes (collection.Epocher: a Valkey server restarted
// without persistence), and then no search is answered from the old indexes, which may hold what the
// store lost: a collection created again with the same id must not serve the chunks of the old one.

// indexKey names a collection's index.
type indexKey struct{ tenant, collection string }

// liveIndex is one collection's index while it is built and after.
type liveIndex struct {
	// swap makes replacing a document's chunks (a removal, then an addition) atomic to searches: they hold
	// it shared, replacements exclusively.
	swap  sync.RWMutex
	idx   *retriever.Index
	ready chan struct{} // closed when the build has ended
	err   error         // the build's error, set before ready is closed
	// pending are the documents changed while the index was being built, reloaded when it is done.
	pending map[string]bool
}

// indexes is the engine's set of indexes and the follower that keeps them current.
type indexes struct {
	mu sync.Mutex
	m  map[indexKey]*liveIndex
	// life ends at Close, and with it the follower and the builds under way; no build or follower starts
	// after it.
	life    context.Context
	end     context.CancelFunc
	done    chan struct{} // closed when the follower has stopped; nil until it is started
	resyncs int           // how often the follower lost its place in the feed and rebuilt every index
}

// LoadIndexes builds the search index of every collection in the store, of every tenant, one after
// another, and starts following the change feed, so that retrievals need not wait for a build (a server
// calls it at start). It returns how many indexes are loaded and the errors of the collections it could
// not load, which are built on their first retrieval as without it. Without collections in the store it
// does nothing.
func (e *Engine) LoadIndexes(ctx context.Context) (int, error) {
	if e.colls == nil {
		return 0, nil
	}
	refs, err := e.colls.AllCollections(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the collections: %w", err)
	}
	var errs []error
	n := 0
	for _, r := range refs {
		if _, err := e.index(ctx, r.Tenant, r.ID); err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			if errors.Is(err, ErrClosed) {
				return n, err
			}
			if !errors.Is(err, collection.ErrNotFound) { // deleted since it was listed
				errs = append(errs, err)
			}
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// search searches the collection's index, building it on first use.
func (e *Engine) search(ctx context.Context, tenant, collID string, q retriever.Query) ([]retriever.Result, error) {
	li, err := e.index(ctx, tenant, collID)
	if err != nil {
		return nil, err
	}
	li.swap.RLock()
	defer li.swap.RUnlock()
	return li.idx.Search(ctx, q)
}

// replace replaces a document's chunks in an index (none: removes the document).
func (li *liveIndex) replace(docID string, chunks []collection.Chunk) {
	li.swap.Lock()
	defer li.swap.Unlock()
	li.idx.RemoveDocument(docID)
	if len(chunks) > 0 {
		_ = li.idx.Add(chunks...)
	}
}

// index returns the collection's index, building it (and starting the follower) on first use.
func (e *Engine) index(ctx context.Context, tenant, collID string) (*liveIndex, error) {
	k := indexKey{tenant, collID}
	e.ix.mu.Lock()
	if e.ix.life.Err() != nil {
		e.ix.mu.Unlock()
		return nil, ErrClosed
	}
	li := e.ix.m[k]
	build := li == nil
	if build {
		if e.ix.done == nil {
			// The feed's position is taken before the first scan, so that no change falls between them, and
			// the store's epoch before the position.
			pos, err := e.feedPos(ctx)
			if err != nil {
				e.ix.mu.Unlock()
				return nil, err
			}
			e.startFollower(pos)
		}
		li = &liveIndex{idx: retriever.NewIndex(e.indexOpts), ready: make(chan struct{}), pending: map[string]bool{}}
		e.ix.m[k] = li
	}
	e.ix.mu.Unlock()
	if build {
		// The build is not tied to this caller's context (other callers wait for it too), but Close ends it.
		err := e.fill(e.ix.life, k, li.idx)
		e.ix.mu.Lock()
		if err != nil {
			li.err = err
			if e.ix.m[k] == li {
				delete(e.ix.m, k) // the next retrieval tries again
			}
		}
		pending := li.pending
		li.pending = nil
		close(li.ready)
		e.ix.mu.Unlock()
		for doc := range pending {
			e.reload(ctx, k, li, doc)
		}
	}
	select {
	case <-li.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if li.err != nil {
		return nil, li.err
	}
	return li, nil
}

// fill adds every chunk of the collection to idx.
func (e *Engine) fill(ctx context.Context, k indexKey, idx *retriever.Index) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := e.colls.ScanChunks(ctx, k.tenant, k.collection, func(c collection.Chunk) error { return idx.Add(c) }); err != nil {
		return fmt.Errorf("build the index of collection %s: %w", k.collection, err)
	}
	return nil
}

// feedPos is where the follower is: the change it applied last, and the store's epoch ("" for a store
// that is no collection.Epocher) when it took that position.
type feedPos struct{ last, epoch string }

// feedPos returns the feed's position now: the store's epoch, then the newest change.
func (e *Engine) feedPos(ctx context.Context) (feedPos, error) {
	var pos feedPos
	if ep, ok := e.colls.(collection.Epocher); ok {
		var err error
		if pos.epoch, err = ep.Epoch(ctx); err != nil {
			return pos, fmt.Errorf("read the store's epoch: %w", err)
		}
	}
	last, err := e.colls.LastChange(ctx)
	if err != nil {
		return pos, fmt.Errorf("read the change feed: %w", err)
	}
	pos.last = last
	return pos, nil
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
func (e *Engine) resync(ctx context.Context, lost bool) (feedPos, error) {
	pos, err := e.feedPos(ctx)
	if err != nil {
		if lost { // nothing is answered from what the store lost; the follower's next try rebuilds
			e.ix.mu.Lock()
			clear(e.ix.m)
			e.ix.mu.Unlock()
		}
		return feedPos{}, err
	}
	e.ix.mu.Lock()
	old := maps.Clone(e.ix.m)
	if lost {
		clear(e.ix.m)
	}
	e.ix.mu.Unlock()
	for k, li := range old {
		if lost {
			// Built as on a first retrieval, which waits for it; a collection that is gone is not built.
			if _, err := e.index(ctx, k.tenant, k.collection); errors.Is(err, ErrClosed) {
				return feedPos{}, err
			}
		} else {
			idx := retriever.NewIndex(e.indexOpts)
			err := e.fill(ctx, k, idx)
			e.ix.mu.Lock()
			switch {
			case e.ix.m[k] != li: // dropped or replaced meanwhile
			case err != nil:
				delete(e.ix.m, k) // the next retrieval builds it again
			default:
				ready := make(chan struct{})
				close(ready)
				e.ix.m[k] = &liveIndex{idx: idx, ready: ready}
			}
			e.ix.mu.Unlock()
		}
		if ctx.Err() != nil {
			return feedPos{}, ctx.Err()
		}
	}
	e.ix.mu.Lock()
	e.ix.resyncs++
	e.ix.mu.Unlock()
	return pos, nil
}

// indexPut puts a document's chunks into the collection's index, if it is loaded.
func (e *Engine) indexPut(tenant, collID, docID string, chunks []collection.Chunk) {
	e.ix.mu.Lock()
	li := e.ix.m[indexKey{tenant, collID}]
	if li != nil && li.pending != nil { // building: the document is reloaded when the build is done
		li.pending[docID] = true
		li = nil
	}
	e.ix.mu.Unlock()
	if li != nil {
		li.replace(docID, chunks)
	}
}

// indexDelete removes a document from the collection's index, if it is loaded.
func (e *Engine) indexDelete(tenant, collID, docID string) {
	e.indexPut(tenant, collID, docID, nil)
}

// dropIndex forgets a collection's index.
func (e *Engine) dropIndex(tenant, collID string) {
	e.ix.mu.Lock()
	delete(e.ix.m, indexKey{tenant, collID})
	e.ix.mu.Unlock()
}

// reload replaces a document's chunks in an index with what the store holds now.
func (e *Engine) reload(ctx context.Context, k indexKey, li *liveIndex, docID string) {
	chunks, err := e.colls.DocumentChunks(context.WithoutCancel(ctx), k.tenant, k.collection, docID)
	if err != nil && !errors.Is(err, collection.ErrNotFound) {
		return // the next change of the document, or a rebuild, repairs it
	}
	li.replace(docID, chunks)
}

// startFollower starts the goroutine that applies the change feed to the loaded indexes; the caller holds
// e.ix.mu.
func (e *Engine) startFollower(from feedPos) {
	ctx := e.ix.life
	e.ix.done = make(chan struct{})
	go func() {
		defer close(e.ix.done)
		pos, pause := from, 50*time.Millisecond
		for ctx.Err() == nil {
			if err := e.follow(ctx, &pos); err != nil {
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
func (e *Engine) follow(ctx context.Context, pos *feedPos) error {
	if ep, ok := e.colls.(collection.Epocher); ok {
		epoch, err := ep.Epoch(ctx)
		if err != nil {
			return err
		}
		if epoch != pos.epoch {
			p, err := e.resync(ctx, true)
			if err == nil {
				*pos = p
			}
			return err
		}
	}
	changes, err := e.colls.Changes(ctx, pos.last, 1000, time.Second)
	if errors.Is(err, collection.ErrFeedTrimmed) {
		p, err := e.resync(ctx, false)
		if err == nil {
			*pos = p
		}
		return err
	}
	if err != nil {
		return err
	}
	for _, ch := range changes {
		e.apply(ctx, ch)
		pos.last = ch.Seq
	}
	return nil
}

// apply brings the loaded index a change concerns up to date.
func (e *Engine) apply(ctx context.Context, ch collection.Change) {
	k := indexKey{ch.Tenant, ch.CollectionID}
	e.ix.mu.Lock()
	li := e.ix.m[k]
	switch {
	case li == nil:
		e.ix.mu.Unlock()
		return
	case ch.Op == collection.OpDeleteCollection:
		delete(e.ix.m, k)
		e.ix.mu.Unlock()
		return
	case li.pending != nil:
		li.pending[ch.DocumentID] = true
		e.ix.mu.Unlock()
		return
	}
	e.ix.mu.Unlock()
	e.reload(ctx, k, li, ch.DocumentID)
}

// Close stops the engine's background work (the change feed's follower, index builds under way); builds
// and retrievals asked for after it fail with ErrClosed. It does not close the store.
func (e *Engine) Close() error {
	e.ix.mu.Lock()
	e.ix.end()
	done := e.ix.done
	e.ix.mu.Unlock()
	if done != nil {
		<-done
	}
	return nil
}
