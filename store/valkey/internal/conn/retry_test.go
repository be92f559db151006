package conn

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// TestRetryDelay: a refused dial is retried dialRetries times, after 1, 2 and 4 ms (valkey-go counts
// attempts from 1), then given up; other network errors back off within a second.
func TestRetryDelay(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	var none valkeygo.Completed
	for attempt, want := range map[int]time.Duration{1: time.Millisecond, 2: 2 * time.Millisecond, 3: 4 * time.Millisecond, 4: -1, 9: -1} {
		if got := retryDelay(attempt, none, refused); got != want {
			t.Errorf("dial refused, attempt %d: %v, want %v", attempt, got, want)
		}
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, attempt := range []int{1, 5, 30} {
		if got := retryDelay(attempt, none, reset); got <= 0 || got > time.Second {
			t.Errorf("read error, attempt %d: %v, want within (0, 1s]", attempt, got)
		}
	}
}
