//go:build cgo

package code

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestBoundParse_CountsTheThreadsCPUTime: the bound of a parse is the parsing thread's CPU time, so a
// thread that waits (as a parse does on a loaded machine, when other processes have the cores) is not cut
// at the bound, and one that computes is.
//
// The wall-clock cap (ParseWallFactor budgets) cuts a thread the machine starves, rightly: a check that
// lands after it proves nothing either way, and the test tries again with a longer budget.
func TestBoundParse_CountsTheThreadsCPUTime(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no thread CPU clock on this system: the bound is wall-clock time there")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for budget := 40 * time.Millisecond; !boundOnce(t, budget); budget *= 2 {
		if budget >= 5*time.Second {
			t.Fatal("no check landed before the wall-clock cap: the machine is too slow to tell")
		}
		t.Logf("a check landed past the wall-clock cap with a budget of %v; trying a longer one", budget)
	}
}

// boundOnce checks the bound once with budget, and reports whether every check landed before the
// wall-clock cap (false: inconclusive, nothing was wrong).
func boundOnce(t *testing.T, budget time.Duration) bool {
	wall := ParseWallFactor * budget
	// Waiting three budgets of wall-clock time costs no CPU time: not cut. (The sleep is the waiting that
	// is tested; load can only make it longer.)
	start := time.Now()
	ctx, stop := boundParse(context.Background(), budget)
	time.Sleep(3 * budget)
	cut := ctx.Err() != nil
	stop()
	if time.Since(start) >= wall {
		return false
	}
	if cut {
		t.Fatalf("a thread that slept %v was cut at a CPU budget of %v: %v", 3*budget, budget, context.Cause(ctx))
	}

	// Computing is cut once the thread has spent the budget. (Its CPU time is read before the bound starts,
	// so that what it spent is no less than what the bound counted.)
	cpu0, _ := threadCPU()
	start = time.Now()
	ctx, stop = boundParse(context.Background(), budget)
	defer stop()
	for x := 0; ctx.Err() == nil; x++ {
		_ = x * x
	}
	spent, _ := threadCPU()
	if !errors.Is(context.Cause(ctx), errParseBudget) {
		t.Fatalf("cause %v, want errParseBudget", context.Cause(ctx))
	}
	if d := time.Duration(spent - cpu0); d < budget {
		if time.Since(start) >= wall {
			return false // the cap cut a starved thread
		}
		t.Fatalf("cut after %v of CPU time, before the budget of %v", d, budget)
	}
	return true
}

// TestBoundParse_CallersContext: the caller's cancellation ends the bound's context with the caller's
// cause, not the budget's.
func TestBoundParse_CallersContext(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := boundParse(parent, time.Hour)
	defer stop()
	cancel()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), errParseBudget) || !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("cause %v, err %v: want the caller's cancellation", context.Cause(ctx), ctx.Err())
	}
}
