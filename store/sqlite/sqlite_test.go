package sqlite_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/storetest"
)

// open opens a store in a fresh file under t.TempDir and closes it when the test ends.
func open(t testing.TB, opts store.Options, options ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := sqlite.Open(t.Context(), path, opts, options...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		s, _ := open(t, opts)
		return s
	})
}

func TestConcurrentWriters_LoseNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t, store.Options{})
	ctx := t.Context()
	const writers, appends = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			own := fmt.Sprintf("own-%d", w)
			for i := range appends {
				session := "hot"
				if i%2 == 1 {
					session = own
				}
				if _, err := s.AppendMessages(ctx, tenant, session, store.Message{Role: "user", Content: fmt.Sprintf("w%d i%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check := func(session string, want int) []store.Message {
		t.Helper()
		msgs, err := s.Messages(ctx, tenant, session, store.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != want {
			t.Fatalf("session %s: %d messages, want %d", session, len(msgs), want)
		}
		last := map[int]int{}
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				t.Fatalf("session %s: message %d has seq %d", session, i, m.Seq)
			}
			var w, n int
			if _, err := fmt.Sscanf(m.Content, "w%d i%d", &w, &n); err != nil {
				t.Fatal(err)
			}
			if prev, ok := last[w]; ok && n <= prev {
				t.Fatalf("session %s: writer %d's message %d after its message %d", session, w, n, prev)
			}
			last[w] = n
		}
		return msgs
	}
	check("hot", writers*appends/2)
	for w := range writers {
		check(fmt.Sprintf("own-%d", w), appends/2)
	}
}

const tenant = "acme"
