package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store/memory"
)

// storeWith returns a memory store holding the tenant acme's collections names, one document each.
func storeWith(t *testing.T, names ...string) collection.Store {
	t.Helper()
	st := memCollections(t)
	for _, name := range names {
		if _, err := st.CreateCollection(t.Context(), "acme", loom.Collection{ID: name, Name: name}); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf("The %s manual explains how to reset a password.", name)
		doc := loom.Document{ID: "d", CollectionID: name, Hash: name, Bytes: len(text), Chunks: 1}
		c := collection.Chunk{Chunk: loom.Chunk{ID: "d#0", DocumentID: "d", Content: text, EndOffset: len(text)}}
		if _, err := st.PutDocument(t.Context(), "acme", doc, []collection.Chunk{c}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// loaded returns the collections whose index r holds, built.
func (r *registry) loaded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, li := range r.m {
		if li.pending == nil {
			out = append(out, k.collection)
		}
	}
	slices.Sort(out)
	return out
}

// TestRegistry_InUseNotEvicted: under a cap that holds no index, an index held by a search stays loaded
// however many others are used meanwhile, and answers; once it is released it is evicted.
func TestRegistry_InUseNotEvicted(t *testing.T) {
	t.Parallel()
	r := newRegistry(storeWith(t, "a", "b", "c"), retriever.IndexOptions{}, 1)
	defer r.Close(context.Background())
	ctx := t.Context()
	use := func(name string) {
		t.Helper()
		li, err := r.acquire(ctx, indexKey{"acme", name})
		if err != nil {
			t.Fatal(err)
		}
		r.release(li)
	}
	held, err := r.acquire(ctx, indexKey{"acme", "a"})
	if err != nil {
		t.Fatal(err)
	}
	use("b")
	use("c") // b, idle and not the last used, is evicted; a is in use
	if got := r.loaded(); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("loaded while a is in use: %v, want [a c]", got)
	}
	held.swap.RLock()
	res, err := held.idx.Search(ctx, retriever.Query{Text: "password", Mode: retriever.ModeKeyword})
	held.swap.RUnlock()
	if err != nil || len(res) != 1 {
		t.Errorf("the index in use: %v, %v", res, err)
	}
	r.release(held)
	if got := r.loaded(); !slices.Equal(got, []string{"c"}) {
		t.Errorf("loaded after a is released: %v, want [c]", got)
	}
	if s := r.stats(); s.Evictions != 2 || s.Builds != 3 || s.Loaded != 1 || s.MemoryBytes <= 0 {
		t.Errorf("stats: %+v", s)
	}
}

// heldStore is a store whose scans, once begun, wait for the registry's end and then for the test, and
// whose change feed waits for the registry's end: Close must wait for both.
type heldStore struct {
	collection.Store
	entered, following   chan struct{}
	release              chan struct{}
	scanEnded, feedEnded atomic.Bool
}

func (h *heldStore) ScanChunks(ctx context.Context, tenant, collectionID string, fn func(collection.Chunk) error) error {
	h.entered <- struct{}{}
	<-ctx.Done()
	<-h.release
	h.scanEnded.Store(true)
	return ctx.Err()
}

func (h *heldStore) Changes(ctx context.Context, after string, limit int, wait time.Duration) ([]collection.Change, error) {
	select {
	case h.following <- struct{}{}:
	default:
	}
	<-ctx.Done()
	h.feedEnded.Store(true)
	return nil, ctx.Err()
}

// TestRegistry_CloseWaits: Close cancels a build under way and the follower, and returns only when both
// have ended (or its context is done first); the build's waiter and later callers get ErrClosed.
func TestRegistry_CloseWaits(t *testing.T) {
	t.Parallel()
	st := &heldStore{Store: storeWith(t, "a"), entered: make(chan struct{}, 1), following: make(chan struct{}, 1),
		release: make(chan struct{})}
	r := newRegistry(st, retriever.IndexOptions{}, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := r.acquire(context.Background(), indexKey{"acme", "a"})
		errc <- err
	}()
	<-st.entered
	<-st.following
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Close(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close while the build is held: %v, want its context's error", err)
	}
	close(st.release)
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !st.scanEnded.Load() || !st.feedEnded.Load() {
		t.Errorf("Close returned before its goroutines ended: scan ended %v, follower ended %v", st.scanEnded.Load(), st.feedEnded.Load())
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("the build's waiter: %v, want ErrClosed", err)
	}
	if _, err := r.acquire(t.Context(), indexKey{"acme", "a"}); !errors.Is(err, ErrClosed) {
		t.Errorf("acquire after Close: %v, want ErrClosed", err)
	}
}

// TestRegistry_GraphCounted: an index whose HNSW graph is built in the background after the index is
// loaded has its memory counted again once the graph is there.
func TestRegistry_GraphCounted(t *testing.T) {
	t.Parallel()
	st := memCollections(t)
	ctx := t.Context()
	if _, err := st.CreateCollection(ctx, "acme", loom.Collection{ID: "big", Name: "big"}); err != nil {
		t.Fatal(err)
	}
	// 1,000 chunks in 100 documents, the graph begun at 900; under the race detector, which slows
	// building the graph twentyfold, 300 in 30, begun at 270: it is still built in the background, after
	// the index is loaded.
	n := 1000
	if raceEnabled {
		n = 300
	}
	var texts []string
	for i := range n {
		texts = append(texts, fmt.Sprintf("Chunk %d tells of the %dth zeppelin and its %d passengers.", i, i%37, i%11))
	}
	vecs, err := embed.Default().Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	for d := range n / 10 {
		var chunks []collection.Chunk
		for i := d * 10; i < d*10+10; i++ {
			chunks = append(chunks, collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprint(i), DocumentID: fmt.Sprint(d), Content: texts[i],
				EndOffset: len(texts[i])}, Vector: vecs[i]})
		}
		doc := loom.Document{ID: fmt.Sprint(d), CollectionID: "big", Hash: fmt.Sprint(d), Chunks: len(chunks)}
		if _, err := st.PutDocument(ctx, "acme", doc, chunks); err != nil {
			t.Fatal(err)
		}
	}
	r := newRegistry(st, retriever.IndexOptions{HNSWThreshold: n * 9 / 10}, 0) // the graph is begun near the end of the build
	defer r.Close(context.Background())
	li, err := r.acquire(ctx, indexKey{"acme", "big"})
	if err != nil {
		t.Fatal(err)
	}
	r.release(li)
	if err := li.idx.WaitGraph(ctx); err != nil {
		t.Fatal(err)
	}
	counted := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return li.mem == li.idx.MemoryBytes() && r.mem == li.mem
	}
	for deadline := time.Now().Add(2 * time.Minute); !counted(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the graph is not counted: %d bytes counted, the index holds %d", r.stats().MemoryBytes, li.idx.MemoryBytes())
		}
	}
}

// probedReads is a store that calls probe in each DocumentChunks, before it reads.
type probedReads struct {
	collection.Store
	probe func()
}

func (p *probedReads) DocumentChunks(ctx context.Context, tenant, collectionID, documentID string) ([]collection.Chunk, error) {
	p.probe()
	return p.Store.DocumentChunks(ctx, tenant, collectionID, documentID)
}

// TestRegistry_ReloadHoldsTheWriteLock: a reload holds the index's write lock from before its read of the
// store until its replacement, so that the engine's own write of the document (made to the store, then to
// the index under that lock) cannot be undone by a reload that read the store before it: a deleted
// document would be retrievable again until the follower reached the deletion.
func TestRegistry_ReloadHoldsTheWriteLock(t *testing.T) {
	t.Parallel()
	st := &probedReads{Store: storeWith(t, "a")}
	r := newRegistry(st, retriever.IndexOptions{}, 0)
	defer r.Close(context.Background())
	li, err := r.acquire(t.Context(), indexKey{"acme", "a"})
	if err != nil {
		t.Fatal(err)
	}
	r.release(li)
	var held atomic.Bool
	st.probe = func() {
		if li.write.TryLock() {
			li.write.Unlock()
			return
		}
		held.Store(true)
	}
	r.reload(li, "d")
	if !held.Load() {
		t.Error("a reload reads the store without the index's write lock")
	}
}

// memCollections is the collections of a new memory store, through the store's front.
func memCollections(t *testing.T) collection.Store {
	t.Helper()
	st, err := memory.Open(t.Context(), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, ok := st.Collections()
	if !ok {
		t.Fatal("the memory store keeps no collections")
	}
	return cs
}
