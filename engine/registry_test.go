package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store/memory"
)

// gatedScans is a store whose scans (index builds) are counted, can be held until the test releases
// them, and can be made to fail.
type gatedScans struct {
	*memory.Backend
	scans   atomic.Int64
	entered chan struct{} // when not nil, told of each scan that begins
	gate    chan struct{} // when not nil, scans wait for it to be closed
	fail    atomic.Int64  // this many scans fail
}

var errScan = errors.New("the scan broke")

func (g *gatedScans) ScanChunks(ctx context.Context, tenant, collectionID string, fn func(collection.Chunk) error) error {
	g.scans.Add(1)
	if g.entered != nil {
		g.entered <- struct{}{}
	}
	if g.gate != nil {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if g.fail.Add(-1) >= 0 {
		return errScan
	}
	return g.Backend.ScanChunks(ctx, tenant, collectionID, fn)
}

// TestIndexes_BuiltOnFirstUse: an engine builds no index when it starts, nor when documents are
// ingested into a collection it has not searched; the first retrieval builds it, and two retrievals that
// arrive while it is built wait for that one build.
func TestIndexes_BuiltOnFirstUse(t *testing.T) {
	t.Parallel()
	mem := newMemory()
	st := &gatedScans{Backend: memoryOf(mem)}
	writer, _ := newCollectionsEngine(t, mem) // acme's "manual", through another engine
	ctx := loom.WithTenant(t.Context(), "acme")
	eng, err := testEngine(over(st))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.IngestText(ctx, "manual", "faq.md", "", "", "Passwords must have twelve characters.", nil); err != nil {
		t.Fatal(err)
	}
	if s := eng.IndexStats(); s.Builds != 0 || s.Loaded != 0 || s.MemoryBytes != 0 || st.scans.Load() != 0 {
		t.Fatalf("before any retrieval: %+v, %d scans", s, st.scans.Load())
	}
	c, err := writer.Collection(ctx, "manual")
	if err != nil {
		t.Fatal(err)
	}
	st.entered, st.gate = make(chan struct{}, 2), make(chan struct{})
	var wg sync.WaitGroup
	results := make([][]retriever.Result, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			results[i], errs[i] = eng.Retrieve(ctx, "reset a forgotten password", engine.WithCollection("manual"))
		})
		if i == 0 {
			<-st.entered // the first retrieval's build is under way
		}
	}
	// Both wait for the build the first one started.
	eventually(t, "the second retrieval does not wait for the first one's build", func() bool { return engine.IndexUsers(eng, "acme", c.ID) == 2 })
	close(st.gate)
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || len(results[i]) == 0 || !strings.Contains(results[i][0].Chunk.Content, "Forgot password") {
			t.Fatalf("retrieval %d: %v, %v", i, results[i], errs[i])
		}
	}
	if got := st.scans.Load(); got != 1 {
		t.Errorf("two retrievals of a cold collection made %d scans, want 1", got)
	}
	s := eng.IndexStats()
	if s.Builds != 1 || s.Loaded != 1 || s.MemoryBytes <= 0 {
		t.Errorf("after the first retrievals: %+v", s)
	}
	// A write to the loaded index is counted in its memory.
	if _, err := eng.IngestText(ctx, "manual", "more.md", "", "", strings.Repeat("Quotas are counted per account. ", 200), nil); err != nil {
		t.Fatal(err)
	}
	if after := eng.IndexStats(); after.MemoryBytes <= s.MemoryBytes || after.Builds != 1 {
		t.Errorf("after a write to the loaded index: %+v, before %+v", after, s)
	}
	// Deleting the collection drops its index.
	if err := eng.DeleteCollection(ctx, "manual"); err != nil {
		t.Fatal(err)
	}
	if s := eng.IndexStats(); s.Loaded != 0 || s.MemoryBytes != 0 {
		t.Errorf("after deleting the collection: %+v", s)
	}
}

// TestIndexes_FailedBuildForgotten: a build that fails fails the retrievals that waited for it, and the
// next retrieval builds again instead of getting the old error.
func TestIndexes_FailedBuildForgotten(t *testing.T) {
	t.Parallel()
	mem := newMemory()
	st := &gatedScans{Backend: memoryOf(mem)}
	newCollectionsEngine(t, mem)
	eng, err := testEngine(over(st))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	st.fail.Store(1)
	if _, err := eng.Retrieve(ctx, "password", engine.WithCollection("manual")); !errors.Is(err, errScan) {
		t.Fatalf("a retrieval whose build failed: %v, want the scan's error", err)
	}
	if s := eng.IndexStats(); s.Loaded != 0 || s.Builds != 1 || s.BuildFailures != 1 {
		t.Errorf("after a failed build: %+v", s)
	}
	if res, err := eng.Retrieve(ctx, "password", engine.WithCollection("manual")); err != nil || len(res) == 0 {
		t.Fatalf("the retrieval after a failed build: %v, %v", res, err)
	}
	if s := eng.IndexStats(); s.Loaded != 1 || s.Builds != 2 || s.BuildFailures != 1 {
		t.Errorf("after building again: %+v", s)
	}
}

// TestIndexes_EvictedUnderTheCap: under a memory cap that holds two of three collections' indexes, using
// the third evicts the least recently used one, which is built again on its next use; every answer is
// the same as on an engine without a cap. On SQLite, whose scan (and so the order of chunks that tie, the
// same sections of five documents) is the same at every build; written before either engine starts, so
// that no reload from the change feed moves a chunk.
func TestIndexes_EvictedUnderTheCap(t *testing.T) {
	t.Parallel()
	st := sqliteBackend(t).open(t)
	ctx := loom.WithTenant(t.Context(), "acme")
	writer, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	names := []string{"alpha", "beta", "gamma"}
	for _, name := range names {
		if _, err := writer.CreateCollection(ctx, loom.Collection{Name: name, ChunkSize: 40}); err != nil {
			t.Fatal(err)
		}
		for d := range 5 {
			text := fmt.Sprintf("%s %d: %s", name, d, strings.ReplaceAll(manual, "Acme", name))
			if _, err := writer.IngestText(ctx, name, fmt.Sprintf("doc%d.md", d), "", "", text, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	free, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	defer free.Close()
	var sizes []int64
	for i, name := range names {
		if err := free.WarmIndexes(ctx, collection.Ref{Tenant: "acme", ID: name}); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, free.IndexStats().MemoryBytes-sum(sizes))
		if sizes[i] <= 0 {
			t.Fatalf("the index of %s holds %d bytes", name, sizes[i])
		}
	}
	// Any two fit; the three do not.
	limit := sum(sizes) - min(sizes[0], sizes[1], sizes[2])/2
	capped, err := testEngine(st, engine.WithIndexMemory(limit))
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Close()
	queries := []string{"reset a forgotten password", "invoices", "fifty gigabytes"}
	check := func(name string, builds, evictions uint64) {
		t.Helper()
		for _, q := range queries {
			for _, mode := range []string{engine.ModeHybrid, engine.ModeKeyword, engine.ModeVector} {
				want, err := free.Retrieve(ctx, q, engine.WithCollection(name), engine.WithMode(mode))
				if err != nil {
					t.Fatal(err)
				}
				got, err := capped.Retrieve(ctx, q, engine.WithCollection(name), engine.WithMode(mode))
				if err != nil {
					t.Fatal(err)
				}
				if g, w := hits(got), hits(want); !reflect.DeepEqual(g, w) {
					t.Errorf("%s %q %s under the cap:\n%v\nwant\n%v", name, q, mode, g, w)
				}
			}
		}
		s := capped.IndexStats()
		if s.Builds != builds || s.Evictions != evictions || s.MemoryBytes > limit || s.MemoryLimit != limit {
			t.Errorf("after using %s: %+v; want %d builds, %d evictions, at most %d bytes", name, s, builds, evictions, limit)
		}
	}
	check("alpha", 1, 0)
	check("beta", 2, 0)
	check("gamma", 3, 1) // alpha is evicted
	check("beta", 3, 1)  // still loaded
	check("alpha", 4, 2) // built again; gamma, used before beta, is evicted
	check("beta", 4, 2)
	check("gamma", 5, 3)
	if s := capped.IndexStats(); s.Loaded != 2 {
		t.Errorf("%d indexes loaded under a cap that holds two", s.Loaded)
	}
}

func sqliteBackend(t testing.TB) backend {
	t.Helper()
	for _, b := range backends {
		if b.name == "sqlite" {
			return b
		}
	}
	t.Fatal("no sqlite backend")
	return backend{}
}

func hits(rs []retriever.Result) []engine.Hit {
	out := make([]engine.Hit, len(rs))
	for i, r := range rs {
		out[i] = engine.NewHit(r)
	}
	return out
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// TestIndexes_LargerThanTheCap: an index larger than the cap by itself stays loaded while it is the one
// used last, and is evicted when another is used.
func TestIndexes_LargerThanTheCap(t *testing.T) {
	t.Parallel()
	eng, _ := newCollectionsEngine(t, newMemory(), engine.WithIndexMemory(1))
	ctx := loom.WithTenant(t.Context(), "acme")
	if _, err := eng.CreateCollection(ctx, loom.Collection{Name: "notes"}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.IngestText(ctx, "notes", "n.md", "", "", "The zeppelin leaves at noon.", nil); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"manual", "manual", "notes", "manual"} {
		if res, err := eng.Retrieve(ctx, "password zeppelin", engine.WithCollection(name)); err != nil || len(res) == 0 {
			t.Fatalf("%s: %v, %v", name, res, err)
		}
		want := []uint64{1, 1, 2, 3}[i]
		if s := eng.IndexStats(); s.Loaded != 1 || s.Builds != want || s.Evictions != want-1 {
			t.Errorf("retrieval %d (%s): %+v; want 1 loaded, %d builds", i, name, s, want)
		}
	}
	if err := engine.WithIndexMemory(-1)(eng); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("a negative cap: %v", err)
	}
}
