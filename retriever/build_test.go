package retriever

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
)

// vectorHits returns the IDs and scores of a vector search.
func vectorHits(t *testing.T, ix *Index, q Query, exact bool) []string {
	t.Helper()
	q.Mode, q.TopK, q.Exact = ModeVector, 10, exact
	rs, err := ix.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s %.6f", r.Chunk.ID, r.Vector)
	}
	return out
}

// checkGraphCovers fails unless the index's graph holds every live vector.
func checkGraphCovers(t *testing.T, ix *Index) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.graph == nil {
		t.Fatal("no graph")
	}
	for slot, e := range ix.entries {
		if e.live && e.hasVec && (slot >= len(ix.graph.links) || ix.graph.links[slot] == nil) {
			t.Fatalf("live slot %d (%s) is not in the graph", slot, e.chunk.ID)
		}
	}
}

func TestIndex_SearchesExactlyWhileGraphBuilds(t *testing.T) {
	t.Parallel()
	n := 1500
	if raceEnabled {
		n = 600
	}
	chunks := corpusChunks(t, n)
	qs := corpusQueries(t, 10)
	ix := NewIndex(IndexOptions{HNSWThreshold: n / 3})
	ix.buildGate = make(chan struct{}) // the build cannot begin until the gate opens
	if err := ix.Add(chunks[:n/2]...); err != nil {
		t.Fatal(err)
	}
	ix.mu.RLock()
	building := ix.build != nil
	ix.mu.RUnlock()
	if !building {
		t.Fatal("no build started past the threshold")
	}
	// Searches and writes go on while the build waits; vector search is exact.
	for _, q := range qs {
		if got, want := vectorHits(t, ix, q, false), vectorHits(t, ix, q, true); !slices.Equal(got, want) {
			t.Fatalf("during the build: %v, exact %v", got, want)
		}
	}
	if err := ix.Add(chunks[n/2:]...); err != nil {
		t.Fatal(err)
	}
	ix.RemoveDocument("d3")
	close(ix.buildGate)
	if err := ix.WaitGraph(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkGraphCovers(t, ix)
	// Vectors added once the graph is ready go into it.
	more := corpusChunks(t, n+10)[n:]
	for i := range more {
		more[i].ID = fmt.Sprint("new", i)
	}
	if err := ix.Add(more...); err != nil {
		t.Fatal(err)
	}
	checkGraphCovers(t, ix)
	if r := recallAt10(t, ix, qs, nil); r < 0.9 {
		t.Errorf("recall@10 = %.3f, want >= 0.9", r)
	}
}

func TestIndex_CompactionBeforeBuildRenumbers(t *testing.T) {
	t.Parallel()
	n := 1200
	if raceEnabled {
		n = 400
	}
	ix := NewIndex(IndexOptions{HNSWThreshold: n / 4})
	ix.buildGate = make(chan struct{})
	if err := ix.Add(corpusChunks(t, n)...); err != nil {
		t.Fatal(err)
	}
	epoch := ix.epoch.Load()
	for d := range n / 10 / 3 { // a third of the documents: the index compacts
		ix.RemoveDocument(fmt.Sprint("d", d*3))
	}
	if ix.epoch.Load() == epoch {
		t.Fatal("no compaction")
	}
	close(ix.buildGate)
	if err := ix.WaitGraph(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkGraphCovers(t, ix)
	ix.mu.RLock()
	size, live := ix.graph.size, ix.liveVec
	ix.mu.RUnlock()
	if size != live {
		t.Errorf("graph of %d nodes, %d live vectors", size, live)
	}
	if r := recallAt10(t, ix, corpusQueries(t, 10), nil); r < 0.9 {
		t.Errorf("recall@10 = %.3f, want >= 0.9", r)
	}
}

func TestIndex_CloseStopsTheBuild(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{HNSWThreshold: 100})
	ix.buildGate = make(chan struct{})
	chunks := corpusChunks(t, 300)
	if err := ix.Add(chunks[:200]...); err != nil {
		t.Fatal(err)
	}
	go func() {
		for !ix.stopped.Load() {
			runtime.Gosched()
		}
		close(ix.buildGate)
	}()
	if err := ix.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(chunks[200:]...); err != nil {
		t.Fatal(err)
	}
	ix.mu.RLock()
	graph, build := ix.graph != nil, ix.build != nil
	ix.mu.RUnlock()
	if graph || build {
		t.Fatalf("after Close: graph %v, build %v", graph, build)
	}
	q := corpusQueries(t, 1)[0]
	if got, want := vectorHits(t, ix, q, false), vectorHits(t, ix, q, true); !slices.Equal(got, want) {
		t.Fatalf("after Close: %v, exact %v", got, want)
	}
}

func TestIndex_WaitGraphHonoursContext(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{HNSWThreshold: 10})
	ix.buildGate = make(chan struct{})
	defer close(ix.buildGate)
	if err := ix.Add(corpusChunks(t, 20)...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ix.WaitGraph(ctx); err == nil {
		t.Fatal("WaitGraph returned nil on a done context while the build waits")
	}
}

// TestHNSW_RecallFloor checks the default HNSW parameters against exact search on real text with Lexical
// vectors (whose short queries, a few words, are far from every chunk and make graph search harder than
// dense embeddings do). The race detector makes building the graph too slow for it.
func TestHNSW_RecallFloor(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("builds a graph of 5000 vectors")
	}
	t.Parallel()
	ix := NewIndex(IndexOptions{HNSWThreshold: 1000})
	if err := ix.Add(corpusChunks(t, 5000)...); err != nil {
		t.Fatal(err)
	}
	if err := ix.WaitGraph(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := recallAt10(t, ix, corpusQueries(t, 100), nil)
	t.Logf("recall@10: %.3f", r)
	if r < 0.97 {
		t.Errorf("recall@10 = %.3f, want >= 0.97", r)
	}
}
