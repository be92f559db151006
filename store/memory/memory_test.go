package memory_test

import (
	"context"
	"testing"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/store/storetest"
)

// open opens a memory store with opts, closed when the test ends.
func open(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	s, err := memory.Open(t.Context(), memory.Options{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// colls is the collection store of a memory store opened with opts.
func colls(t testing.TB, opts store.Options) collection.Store {
	t.Helper()
	c, ok := open(t, opts).Collections()
	if !ok {
		t.Fatal("a memory store keeps no collections")
	}
	return c
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) *store.Store { return open(t, opts) })
}

// baseBackend is a backend with the methods of store.Backend alone: none of its optional interfaces.
type baseBackend struct{ store.Backend }

// TestConformance_BaseBackend runs the suite on the Store over a backend that is no MessageSelector and no
// Loader, so that the Store's own selection (ReadNewest over ReadMessages) and Load (one source after
// another) are what is checked.
func TestConformance_BaseBackend(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) *store.Store {
		s, err := store.New(baseBackend{open(t, opts).Backend()}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Collections(); ok {
			t.Fatal("the Store claims the collections of a backend that keeps none")
		}
		return s
	})
}

func TestBackendConformance(t *testing.T) {
	storetest.RunBackend(t, func(t *testing.T, opts store.Options) store.Backend { return open(t, opts).Backend() }, storetest.BackendOptions{})
}

// baseWithSummaries is baseBackend that keeps summaries: the Store's Load reads them one source after
// another (no Loader).
type baseWithSummaries struct {
	baseBackend
	sums store.SummaryBackend
}

func (b baseWithSummaries) Summary(ctx context.Context, tenant, session string) (store.Summary, error) {
	return b.sums.Summary(ctx, tenant, session)
}

func (b baseWithSummaries) SwapSummary(ctx context.Context, tenant, session string, rev int64, s store.Summary) (bool, error) {
	return b.sums.SwapSummary(ctx, tenant, session, rev, s)
}

func TestConformance_BaseBackendWithSummaries(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) *store.Store {
		mb := open(t, opts).Backend()
		s, err := store.New(baseWithSummaries{baseBackend{mb}, mb.(store.SummaryBackend)}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Summaries() {
			t.Fatal("the Store does not see the backend's summaries")
		}
		return s
	})
}
