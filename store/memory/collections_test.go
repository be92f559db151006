package memory_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/collection/collectiontest"
	"github.com/context-loom/loom/store"
)

func TestCollections_Conformance(t *testing.T) {
	collectiontest.Run(t, func(t *testing.T, opts store.Options) collection.Store { return colls(t, opts) })
}

func TestCollections_StoredValuesAreCopies(t *testing.T) {
	t.Parallel()
	s := colls(t, store.Options{})
	ctx := t.Context()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	chunks := []collection.Chunk{{Chunk: loom.Chunk{ID: "d#0", DocumentID: "d", Content: "x", Metadata: map[string]string{"k": "v"}}, Vector: []float32{1, 2}}}
	if _, err := s.PutDocument(ctx, "acme", loom.Document{ID: "d", CollectionID: c.ID, Hash: "h"}, chunks); err != nil {
		t.Fatal(err)
	}
	chunks[0].Metadata["k"], chunks[0].Vector[0] = "changed", 9
	err = s.ScanChunks(ctx, "acme", c.ID, func(ch collection.Chunk) error {
		if ch.Metadata["k"] != "v" || ch.Vector[0] != 1 {
			t.Errorf("the store kept the caller's maps: %+v", ch)
		}
		ch.Metadata["k"], ch.Vector[0] = "changed", 9
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.DocumentChunks(ctx, "acme", c.ID, "d")
	if err != nil || got[0].Metadata["k"] != "v" || got[0].Vector[0] != 1 {
		t.Errorf("ScanChunks handed out the stored maps: %+v %v", got, err)
	}
}

func TestChanges_SeqsSortAndCompare(t *testing.T) {
	t.Parallel()
	st := open(t, store.Options{})
	s, _ := st.Collections()
	ctx := t.Context()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		id := fmt.Sprint("d", i)
		if _, err := s.PutDocument(ctx, "acme", loom.Document{ID: id, CollectionID: c.ID, Hash: "h"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Changes(ctx, "", 100, 0)
	if err != nil || len(all) != 12 {
		t.Fatalf("Changes = %d %v", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].Seq >= all[i].Seq {
			t.Fatalf("seqs do not sort as strings: %q, %q", all[i-1].Seq, all[i].Seq)
		}
	}
	if got, err := s.Changes(ctx, "9", 100, 0); err != nil || len(got) != 3 || got[0].DocumentID != "d9" {
		t.Errorf("Changes after 9 = %+v %v", got, err)
	}
	if _, err := s.Changes(ctx, "nine", 100, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a seq that is no number: %v", err)
	}
	_ = st.Close()
	if _, err := s.Changes(ctx, all[11].Seq, 10, time.Second); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Changes after Close: %v", err)
	}
}

// TestCollections_StoredSize measures the heap the store holds after the suite's adversarial collections
// (not in parallel: the heap is the process's).
func TestCollections_StoredSize(t *testing.T) {
	collectiontest.RunStoredSize(t, func(t *testing.T, opts store.Options) (collection.Store, collectiontest.Sizer) {
		s := colls(t, opts)
		return s, func(*testing.T) int64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			runtime.KeepAlive(s)
			return int64(ms.HeapAlloc)
		}
	})
}
