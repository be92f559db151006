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
func TestBoundParse_CountsTheThreadsCPUTime(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no thread CPU clock on this system: the bound is wall-clock time there")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const budget = 40 * time.Millisecond

	// Waiting three budgets of wall-clock time costs no CPU time: not cut (the wall-clock cap is 20 budgets).
	ctx, stop := boundParse(context.Background(), budget)
	time.Sleep(3 * budget)
	cut := ctx.Err() != nil
	stop()
	if cut {
		t.Errorf("a thread that slept %v was cut at a CPU budget of %v: %v", 3*budget, budget, context.Cause(ctx))
	}

	// Computing is cut once the thread has spent the budget.
	ctx, stop = boundParse(context.Background(), budget)
	defer stop()
	start, _ := threadCPU()
	for x := 0; ctx.Err() == nil; x++ {
		_ = x * x
	}
	spent, _ := threadCPU()
	if !errors.Is(context.Cause(ctx), errParseBudget) {
		t.Fatalf("cause %v, want errParseBudget", context.Cause(ctx))
	}
	if d := time.Duration(spent - start); d < budget {
		t.Errorf("cut after %v of CPU time, before the budget of %v", d, budget)
	}
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
