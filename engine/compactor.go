package engine

import (
	"context"
	"sync"

	"github.com/context-loom/loom"
)

// compactQueue is how many sessions may wait for a background compaction; past it, a session's turn is
// skipped, and its next append asks again.
const compactQueue = 1024

// compactor runs the background compactions of an engine: one worker, a queue of sessions, each session
// in it at most once. Close cancels the one under way and waits for it.
type compactor struct {
	e      *Engine
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending map[compactKey]bool
	queue   chan compactJob
	closed  bool
}

type compactKey struct{ tenant, session string }

type compactJob struct {
	tenant string
	req    CompactRequest
}

func newCompactor(e *Engine) *compactor {
	ctx, cancel := context.WithCancel(context.Background())
	c := &compactor{e: e, ctx: ctx, cancel: cancel, pending: map[compactKey]bool{}, queue: make(chan compactJob, compactQueue)}
	c.wg.Go(c.run)
	return c
}

// schedule queues a compaction of the session unless one is queued already or the queue is full; it
// never blocks.
func (c *compactor) schedule(tenant string, req CompactRequest) {
	k := compactKey{tenant, req.Session}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.pending[k] {
		return
	}
	select {
	case c.queue <- compactJob{tenant, req}:
		c.pending[k] = true
	default:
	}
}

func (c *compactor) run() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case job := <-c.queue:
			c.mu.Lock()
			delete(c.pending, compactKey{job.tenant, job.req.Session})
			c.mu.Unlock()
			// The outcome is counted (WithCompactionObserver) and a failure kept in the session's summary
			// record, which its state shows: there is no caller to return it to.
			_, _ = c.e.Compact(loom.WithTenant(c.ctx, job.tenant), job.req)
		}
	}
}

// Close stops the worker, cancelling a compaction under way (its claim expires), and waits for it.
func (c *compactor) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// ScheduleCompaction asks for a compaction of the session in the background, by the agent's policy, and
// returns at once: Record does so after each turn, and the server after each append. It does nothing on
// an engine without a summarizer, or after Close.
func (e *Engine) ScheduleCompaction(ctx context.Context, req CompactRequest) {
	if e.bg == nil || req.Session == "" {
		return
	}
	req.Force = false
	e.bg.schedule(loom.Tenant(ctx), req)
}
