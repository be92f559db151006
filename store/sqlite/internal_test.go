package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/context-loom/loom/store"
)

func TestPing_UnavailableWhenTheFileCannotBeQueried(t *testing.T) {
	t.Parallel()
	s, err := openBackend(t.Context(), Options{Path: filepath.Join(t.TempDir(), "loom.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = s.rdb.Close() // the read pool fails, the store is not closed
	err = s.Ping(t.Context())
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) {
		t.Fatalf("Ping: %v, want ErrUnavailable", err)
	}
}

// codedErr is an error with an SQLite result code, as the driver's are.
type codedErr int

func (e codedErr) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e codedErr) Code() int     { return int(e) }

func TestRetryBusy(t *testing.T) {
	t.Parallel()
	const busySnapshot = 5 | 2<<8 // SQLITE_BUSY_SNAPSHOT: an extended code of SQLITE_BUSY
	calls := 0
	err := retryBusy(t.Context(), time.Now().Add(10*time.Second), func() error {
		if calls++; calls < 4 {
			return fmt.Errorf("wrapped: %w", codedErr(busySnapshot))
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("busy three times, then done: %v after %d calls", err, calls)
	}

	calls = 0
	other := fmt.Errorf("wrapped: %w", codedErr(19)) // SQLITE_CONSTRAINT
	if err := retryBusy(t.Context(), time.Now().Add(10*time.Second), func() error { calls++; return other }); err != other || calls != 1 {
		t.Fatalf("another error is not retried: %v after %d calls", err, calls)
	}

	// Always busy: retried until the deadline, and given up then, not never. (How many calls fit before it
	// is the machine's business; that BUSY is retried is shown above.)
	calls = 0
	start := time.Now()
	until := start.Add(200 * time.Millisecond)
	err = retryBusy(t.Context(), until, func() error { calls++; return codedErr(5) })
	if returned := time.Now(); !isBusy(err) || returned.Before(until) || returned.Sub(start) > 2*time.Minute {
		t.Fatalf("always busy: %v after %d calls and %v, want BUSY once the 200ms had passed", err, calls, returned.Sub(start))
	}

	ctx, cancel := context.WithCancel(t.Context())
	calls = 0
	err = retryBusy(ctx, time.Now().Add(time.Minute), func() error {
		if calls++; calls == 2 {
			cancel()
		}
		return codedErr(5)
	})
	if !isBusy(err) || calls != 2 {
		t.Fatalf("busy until the context is canceled: %v after %d calls", err, calls)
	}
}

// TestUseWAL_ManyConnectionsSwitchANewFileAtOnce: the switch to WAL fails now and then with SQLITE_BUSY
// when many connections make it at once (busy_timeout does not wait for that lock); retried, every one
// succeeds.
func TestUseWAL_ManyConnectionsSwitchANewFileAtOnce(t *testing.T) {
	t.Parallel()
	const rounds, conns = 60, 30
	cfg := config{busyTimeout: DefaultBusyTimeout}
	for r := range rounds {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("loom%d.db", r))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range conns {
			db, err := sql.Open("sqlite", dsn(path, cfg, "FULL", connWriter))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			wg.Go(func() {
				<-start
				if err := retryBusy(t.Context(), time.Now().Add(cfg.busyTimeout), func() error { return useWAL(t.Context(), db) }); err != nil {
					t.Errorf("round %d: %v", r, err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
}
