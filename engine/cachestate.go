package engine

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
)

// The results of a session's cache state write (CacheStateStats).
const (
	CacheStateWritten = "written" // stored
	CacheStateFailed  = "failed"  // the store refused it or could not be reached
	CacheStateDropped = "dropped" // not tried: too many writes were under way
	CacheStateSkipped = "skipped" // the session had no stored messages (yet, or any more)
)

// maxCacheWrites bounds the cache state writes under way at once: past it, a write is dropped (and
// counted), never waited for.
const maxCacheWrites = 64

type cacheKey struct{ tenant, session string }

// cacheStates writes the sessions' cache states (assembler.CacheState) behind the assemblies that made
// them: an assembly hands its state over and returns, so that a slow or failing store neither slows
// nor fails it. The state not yet written is kept, so that the next assembly on this engine compares
// with it rather than with the store's older one; a session's writes are one after another, the newest
// last.
type cacheStates struct {
	mu       sync.Mutex
	pending  map[cacheKey][]byte // the newest state of a session, not written yet
	inflight map[cacheKey]bool   // a goroutine is writing the session's states
	counts   map[string]uint64
	idle     *sync.Cond // broadcast when a session's writer ends; on mu
}

// wait waits until no writer is under way. Writers that start after it returns are not waited for.
func (c *cacheStates) wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.inflight) > 0 {
		c.cond().Wait()
	}
}

func (c *cacheStates) cond() *sync.Cond {
	if c.idle == nil {
		c.idle = sync.NewCond(&c.mu)
	}
	return c.idle
}

// previous returns the state an assembly of k compares with: the one not written yet, else the store's
// (stored, from the snapshot), decoded; the zero state (a first assembly) when there is none or it does
// not decode.
func (c *cacheStates) previous(k cacheKey, stored []byte) *assembler.CacheState {
	c.mu.Lock()
	if b, ok := c.pending[k]; ok {
		stored = b
	}
	c.mu.Unlock()
	prev := &assembler.CacheState{}
	if len(stored) > 0 && json.Unmarshal(stored, prev) != nil {
		prev = &assembler.CacheState{}
	}
	return prev
}

func (c *cacheStates) count(result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.countLocked(result)
}

func (c *cacheStates) countLocked(result string) {
	if c.counts == nil {
		c.counts = map[string]uint64{}
	}
	c.counts[result]++
}

// put hands the session's new state to a writer, starting one unless one is writing the session already.
func (e *Engine) putCacheState(k cacheKey, st *assembler.CacheState) {
	b, err := json.Marshal(st)
	c := &e.caches
	if err != nil || len(b) > store.MaxCacheStateBytes {
		c.count(CacheStateFailed)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending, c.inflight = map[cacheKey][]byte{}, map[cacheKey]bool{}
	}
	if c.inflight[k] {
		c.pending[k] = b // the writer under way writes it next
		return
	}
	if len(c.inflight) >= maxCacheWrites || e.closing.Err() != nil {
		c.countLocked(CacheStateDropped)
		return
	}
	c.pending[k], c.inflight[k] = b, true
	go e.writeCacheStates(k)
}

// writeCacheStates writes the session's pending state, and again while a newer one came meanwhile.
func (e *Engine) writeCacheStates(k cacheKey) {
	c := &e.caches
	for {
		c.mu.Lock()
		b, ok := c.pending[k]
		if !ok {
			delete(c.inflight, k)
			c.cond().Broadcast()
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), max(e.sourceTimeout, time.Second))
		err := e.store.PutCacheState(ctx, k.tenant, k.session, b)
		cancel()
		c.mu.Lock()
		switch {
		case err == nil:
			c.countLocked(CacheStateWritten)
		case errors.Is(err, store.ErrNotFound):
			c.countLocked(CacheStateSkipped)
		default:
			c.countLocked(CacheStateFailed)
		}
		if nb := c.pending[k]; string(nb) == string(b) {
			delete(c.pending, k)
		}
		c.mu.Unlock()
	}
}

// CacheStateStats returns how many of the sessions' cache states (the hashes that an assembly's
// Result.Cache compares with, see assembler.CacheReport) the engine wrote behind its assemblies, by
// result: CacheStateWritten, CacheStateFailed, CacheStateDropped, CacheStateSkipped. A failed write
// fails no assembly; the session's next assembly on another server compares with the older state.
func (e *Engine) CacheStateStats() map[string]uint64 {
	e.caches.mu.Lock()
	defer e.caches.mu.Unlock()
	return maps.Clone(e.caches.counts)
}
