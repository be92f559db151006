//go:build cgo

package code

/*
#include <pthread.h>
#include <time.h>

// loom_thread_clock sets *cid to the CPU-time clock of the calling thread; 0 on success.
static int loom_thread_clock(clockid_t *cid) {
#if defined(__linux__) || defined(__FreeBSD__)
	return pthread_getcpuclockid(pthread_self(), cid);
#else
	return -1;
#endif
}

// loom_clock_ns reads the clock cid in nanoseconds; -1 if it cannot.
static long long loom_clock_ns(clockid_t cid) {
	struct timespec ts;
	if (clock_gettime(cid, &ts) != 0) {
		return -1;
	}
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
*/
import "C"

import (
	"context"
	"errors"
	"time"
)

// errParseBudget is the cause of a parse's context when the parse spent its time bound.
var errParseBudget = errors.New("chunker: the parse spent its time bound")

// parseBoundTick is how often the watch of a parse reads the parsing thread's CPU clock.
const parseBoundTick = 5 * time.Millisecond

// ParseWallFactor bounds a parse in wall-clock time too, at this many times its CPU-time bound, for a
// thread the machine starves of CPU (and where no thread CPU clock can be read, the wall-clock bound is the
// CPU-time bound itself).
const ParseWallFactor = 20

// boundParse returns a context derived from ctx that is cancelled, with cause errParseBudget, once the
// calling thread has spent budget of CPU time from now, or ParseWallFactor times budget has passed. The
// caller must be locked to its thread (runtime.LockOSThread) and call stop when the parse is over.
//
// The bound is the parsing thread's own CPU time, not the wall clock, so that whether a text falls back to
// plain-text chunking depends on the text, not on how loaded the machine is.
func boundParse(ctx context.Context, budget time.Duration) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	var cid C.clockid_t
	wall := budget
	cpuStart := int64(-1)
	if C.loom_thread_clock(&cid) == 0 {
		cpuStart = int64(C.loom_clock_ns(cid))
	}
	if cpuStart >= 0 {
		wall = ParseWallFactor * budget
	}
	done := make(chan struct{})
	go func() {
		deadline := time.NewTimer(wall)
		defer deadline.Stop()
		tick := time.NewTicker(parseBoundTick)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-deadline.C:
				cancel(errParseBudget)
				return
			case <-tick.C:
				if cpuStart < 0 {
					continue
				}
				if now := int64(C.loom_clock_ns(cid)); now >= 0 && time.Duration(now-cpuStart) >= budget {
					cancel(errParseBudget)
					return
				}
			}
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}
