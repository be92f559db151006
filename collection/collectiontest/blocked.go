package collectiontest

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// patience is how long the suite waits for what only a hang delays: minutes, so that no load makes a
// correct store fail.
const patience = 2 * time.Minute

// goroutineID returns the id of the calling goroutine, as runtime.Stack names it.
func goroutineID() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	// "goroutine 42 [running]:"
	f := bytes.Fields(buf)
	if len(f) < 2 {
		return -1
	}
	id, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return -1
	}
	return id
}

// untilBlocked waits until goroutine id is blocked (on a channel, a select, a condition or the network)
// with fn in its stack, and returns true; or returns false as soon as returned is ready, the goroutine having
// got past the call. It fails the test if neither happens within patience. That a goroutine is blocked
// in a store's Changes says it waits there for a change, for the stores that wait in-process; for a store
// whose server does the waiting it says only that the request has been sent, so a test that uses this
// must be right in either order.
func untilBlocked(t *testing.T, id int, fn string, returned <-chan struct{}) bool {
	t.Helper()
	for deadline := time.Now().Add(patience); ; {
		if blockedIn(id, fn) {
			return true
		}
		select {
		case <-returned:
			return false
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutine %d was not seen blocked in %s within %v", id, fn, patience)
		}
	}
}

// blockedIn reports whether goroutine id is blocked with fn in its stack.
func blockedIn(id int, fn string) bool {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	head := []byte("goroutine " + strconv.Itoa(id) + " [")
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		rest, ok := bytes.CutPrefix(g, head)
		if !ok {
			continue
		}
		state, _, _ := bytes.Cut(rest, []byte("]"))
		for _, waiting := range []string{"select", "chan receive", "IO wait", "sync.Cond.Wait"} {
			if bytes.HasPrefix(state, []byte(waiting)) {
				return bytes.Contains(rest, []byte(fn))
			}
		}
		return false
	}
	return false
}
