package valkey

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
)

// openNative opens a store on addr under a prefix of its own and returns it with its backend.
func openNative(t *testing.T, addr, prefix string) (*store.Store, *Backend) {
	t.Helper()
	s, err := Open(t.Context(), Options{Prefix: prefix, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler), Client: valkeygo.ClientOption{InitAddress: []string{addr}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, s.Backend().(*Backend)
}

// indexed returns the sessions in the tenant's index of recorded sessions, by rank.
func indexed(t *testing.T, n *Backend, tenant string) []string {
	t.Helper()
	got, err := n.conn.Client.Do(t.Context(), n.conn.Client.B().Zrange().Key(n.recordedKey(tenant)).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestAssemblySessions_PrunesSessionsWhoseRecordsAreGone: a session whose records list is gone (as when
// it expires) is skipped by a listing, which reads on past it to fill its limit and takes it out of the
// index.
func TestAssemblySessions_PrunesSessionsWhoseRecordsAreGone(t *testing.T) {
	t.Parallel()
	s, n := openNative(t, valkeytest.Start(t), "prune")
	ctx := t.Context()
	for _, id := range []string{"old", "gone"} {
		if _, err := s.RecordAssembly(ctx, "acme", id, []byte(`{}`), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The newest session's keys vanish behind the index's back, as expired keys do.
	k := n.session("acme", "gone")
	if err := n.conn.Client.Do(ctx, n.conn.Client.B().Del().Key(k.asms, k.msgs).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	l, err := s.AssemblySessions(ctx, "acme", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 1 || l[0].Session != "old" {
		t.Fatalf("a listing of limit 1 gives %+v, want the session old, past the one whose records are gone", l)
	}
	if got := indexed(t, n, "acme"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("the index holds %v after the listing, want [old]", got)
	}
}

// TestAssemblySessions_IndexIsBounded: the tenant's index keeps its newest recordedKept sessions.
func TestAssemblySessions_IndexIsBounded(t *testing.T) {
	t.Parallel()
	s, n := openNative(t, valkeytest.Start(t), "bound")
	ctx := t.Context()
	const sessions = recordedKept + 5
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < sessions; i += 8 {
				if _, err := s.RecordAssembly(ctx, "acme", fmt.Sprintf("s%04d", i), []byte(`{}`), 1, 0); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := len(indexed(t, n, "acme")); got != recordedKept {
		t.Fatalf("the index holds %d sessions after %d were recorded, want %d", got, sessions, recordedKept)
	}
	l, err := s.AssemblySessions(ctx, "acme", store.MaxAssemblySessions)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != store.MaxAssemblySessions || !slices.IsSortedFunc(l, store.CompareAssemblySessions) {
		t.Fatalf("a listing of limit %d gives %d sessions, sorted: %v", store.MaxAssemblySessions, len(l), slices.IsSortedFunc(l, store.CompareAssemblySessions))
	}
}
