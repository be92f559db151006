package memory

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/context-loom/loom/store"
)

// TestReads_CopyOutsideTheLock: a read of a session's messages (a page, a selection, a Load) copies them
// after it lets go of the lock, so an append never waits for a long page being copied, which is what a
// background compaction's read of the uncovered turns did to the appends beside it.
func TestReads_CopyOutsideTheLock(t *testing.T) {
	b := newBackend(Options{})
	ctx := context.Background()
	var msgs []store.Message
	for i := range 300 {
		msgs = append(msgs, store.Message{Role: "user", Content: fmt.Sprint("message ", i)})
	}
	if _, err := b.AppendMessages(ctx, "t", "s", msgs); err != nil {
		t.Fatal(err)
	}
	copies := 0
	b.unlocked = func() {
		copies++
		if !b.mu.TryLock() {
			t.Error("the store's lock is held while the read copies its messages")
			return
		}
		b.mu.Unlock()
	}
	if got, _, err := b.ReadMessages(ctx, "t", "s", 0, 256); err != nil || len(got) != 256 {
		t.Fatalf("ReadMessages: %d messages, %v", len(got), err)
	}
	if got, _, err := b.SelectMessages(ctx, "t", "s", store.MessageQuery{Limit: 100}); err != nil || len(got) != 100 {
		t.Fatalf("SelectMessages: %d messages, %v", len(got), err)
	}
	if snap, err := b.Load(ctx, "t", store.LoadQuery{Session: "s", MaxMessages: 50}); err != nil || len(snap.Messages) != 50 {
		t.Fatalf("Load: %v", err)
	}
	if copies != 3 {
		t.Fatalf("%d reads passed the copy point, want 3", copies)
	}
}

// TestReads_ConcurrentWithAppends: pages read while another goroutine appends (moving the session to
// larger arrays as it grows) are whole and in order; under the race detector, the copy outside the lock
// is checked too.
func TestReads_ConcurrentWithAppends(t *testing.T) {
	b := newBackend(Options{})
	ctx := context.Background()
	const n = 400
	var wg sync.WaitGroup
	appended := make(chan struct{})
	wg.Go(func() {
		defer close(appended)
		for i := range n {
			if _, err := b.AppendMessages(ctx, "t", "s", []store.Message{{Role: "user", Content: fmt.Sprint("m", i+1),
				TokenCounts: map[string]int{"cl100k_base": i}}}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for done := false; !done; {
		page, _, err := b.SelectMessages(ctx, "t", "s", store.MessageQuery{Limit: 64})
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range page {
			if m.Seq != page[0].Seq+int64(i) || m.Content != fmt.Sprint("m", m.Seq) || m.TokenCounts["cl100k_base"] != int(m.Seq-1) {
				t.Fatalf("message %d of the page: %+v", i, m)
			}
		}
		select {
		case <-appended: // one more read after the last append, then stop
			done = true
		default:
		}
	}
	wg.Wait()
}
