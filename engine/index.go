package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/retriever"
)

// WithIndexMemory caps the memory of the search indexes the engine holds, in bytes, by their estimate
// (retriever.Index.MemoryBytes): past it, indexes no search is using are evicted, least recently used
// first, and built again from the store on their next use. The index used last is kept whatever its size.
// 0, the default, means no cap: every index built stays loaded until its collection is deleted or the
// engine closed. A negative cap is an error wrapping ErrInvalidRequest.
func WithIndexMemory(bytes int64) Option {
	return func(e *Engine) error {
		if bytes < 0 {
			return fmt.Errorf("%w: index memory must not be negative", ErrInvalidRequest)
		}
		e.indexMemory = bytes
		return nil
	}
}

// WarmIndexes builds the search indexes of the collections refs name (each by its tenant and its id or
// name), one after another, so that their first retrievals need not wait for a build: a server calls it
// at start for the collections it is told to. Without it an index is built on its collection's first
// retrieval. Warming more than WithIndexMemory holds keeps the last ones warmed. It returns the errors of
// the collections it could not build (collection.ErrNotFound for one that does not exist), ErrClosed after
// Close, and ctx's error when ctx is done.
func (e *Engine) WarmIndexes(ctx context.Context, refs ...collection.Ref) error {
	cs, err := e.collections()
	if err != nil {
		return err
	}
	var errs []error
	for _, ref := range refs {
		tenant := cmp.Or(ref.Tenant, loom.DefaultTenant)
		c, err := cs.GetCollection(ctx, tenant, ref.ID)
		if err == nil {
			var li *liveIndex
			if li, err = e.ix.acquire(ctx, indexKey{tenant, c.ID}); err == nil {
				e.ix.release(li)
			}
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrClosed):
			return err
		case err != nil:
			errs = append(errs, fmt.Errorf("warm the index of %s/%s: %w", tenant, ref.ID, err))
		}
	}
	return errors.Join(errs...)
}

// IndexStats returns what the engine's search indexes hold and have done: how many are loaded, their
// estimated memory and its cap, the builds and the evictions so far.
func (e *Engine) IndexStats() IndexStats { return e.ix.stats() }

// search searches the collection's index, building it on first use.
func (e *Engine) search(ctx context.Context, tenant, collID string, q retriever.Query) ([]retriever.Result, error) {
	return e.ix.search(ctx, indexKey{tenant, collID}, q)
}

// indexPut puts a document's chunks into the collection's index, if it is loaded.
func (e *Engine) indexPut(tenant, collID, docID string, chunks []collection.Chunk) {
	e.ix.put(indexKey{tenant, collID}, docID, chunks)
}

// indexDelete removes a document from the collection's index, if it is loaded.
func (e *Engine) indexDelete(tenant, collID, docID string) {
	e.ix.put(indexKey{tenant, collID}, docID, nil)
}

// dropIndex forgets a collection's index.
func (e *Engine) dropIndex(tenant, collID string) {
	e.ix.drop(indexKey{tenant, collID})
}

// Close stops the engine's background work (the change feed's follower, index builds under way, the
// background compactions, the recorder of assemblies, which first writes the records queued) and waits
// for it; builds and retrievals asked for after it fail with ErrClosed.
// It does not close the store.
func (e *Engine) Close() error {
	e.closed()
	if e.bg != nil {
		e.bg.Close()
	}
	e.caches.wait() // each write is bounded by its own timeout; none starts once closing is done
	if e.rec != nil {
		e.rec.close()
	}
	return e.ix.Close(context.Background())
}
