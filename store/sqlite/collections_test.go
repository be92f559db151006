package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/collection/collectiontest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// openColls opens a store in a fresh file, as open does, and returns its collections and the file's path.
func openColls(t testing.TB, opts store.Options) (collection.Store, string) {
	t.Helper()
	s, path := open(t, sqlite.Options{Options: opts})
	c, ok := s.Collections()
	if !ok {
		t.Fatal("a SQLite store keeps no collections")
	}
	return c, path
}

func TestCollections_Conformance(t *testing.T) {
	collectiontest.Run(t, func(t *testing.T, opts store.Options) collection.Store {
		s, _ := openColls(t, opts)
		return s
	})
}

// putTexts stores a document whose chunks have the texts, with ids doc#0, doc#1, ...
func putTexts(t *testing.T, s collection.Store, tn, collID, docID, version string, texts ...string) {
	t.Helper()
	d := loom.Document{ID: docID, CollectionID: collID, Source: docID + ".txt", Hash: docID + "-" + version}
	var chunks []collection.Chunk
	for i, text := range texts {
		chunks = append(chunks, collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", docID, i), DocumentID: docID, Content: text, Index: i}})
	}
	if _, err := s.PutDocument(t.Context(), tn, d, chunks); err != nil {
		t.Fatal(err)
	}
}

func newCollection(t *testing.T, s collection.Store, tn, name string) loom.Collection {
	t.Helper()
	c, err := s.CreateCollection(t.Context(), tn, loom.Collection{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDeleteCollection_LeavesNoRows: deleting a document or a collection deletes its rows, and no other
// collection's.
func TestDeleteCollection_LeavesNoRows(t *testing.T) {
	t.Parallel()
	s, path := openColls(t, store.Options{})
	ctx := t.Context()
	c := newCollection(t, s, tenant, "docs")
	keep := newCollection(t, s, tenant, "keep")
	putTexts(t, s, tenant, c.ID, "guide", "v1", "alpha one", "alpha two", "alpha three")
	putTexts(t, s, tenant, c.ID, "other", "v1", "gamma")
	putTexts(t, s, tenant, keep.ID, "guide", "v1", "alpha kept")
	putTexts(t, s, tenant, c.ID, "guide", "v2", "beta one")
	if err := s.DeleteDocument(ctx, tenant, c.ID, "guide"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCollection(ctx, tenant, c.ID); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for table, want := range map[string]int{"chunks": 1, "documents": 1} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil || n != want {
			t.Errorf("%d %s rows left (%v), want %d", n, table, err, want)
		}
	}
}

func TestChanges_SeenByAnotherStoreOnTheFile(t *testing.T) {
	t.Parallel()
	writer, path := openColls(t, store.Options{})
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reader, _ := st.Collections()
	ctx := t.Context()
	c := newCollection(t, writer, tenant, "docs")
	last, err := reader.LastChange(ctx)
	if err != nil || last != "" {
		t.Fatalf("LastChange of a new file: %q %v", last, err)
	}
	type result struct {
		changes []collection.Change
		err     error
		at      time.Time
	}
	done := make(chan result, 1)
	go func() {
		// An hour: the change ends the wait, whenever the reader began it (before the write, or after and
		// finding the change at once); the two minutes below are a bound only a hang breaks.
		ch, err := reader.Changes(ctx, last, 10, time.Hour)
		done <- result{ch, err, time.Now()}
	}()
	putTexts(t, writer, tenant, c.ID, "guide", "v1", "hello")
	select {
	case r := <-done:
		if r.err != nil || len(r.changes) != 1 || r.changes[0].DocumentID != "guide" || r.changes[0].Op != collection.OpPut ||
			r.changes[0].Tenant != tenant || r.changes[0].CollectionID != c.ID {
			t.Fatalf("Changes = %+v, %v", r.changes, r.err)
		}
		last = r.changes[0].Seq
	case <-time.After(2 * time.Minute):
		t.Fatal("the other store's Changes did not return")
	}
	if l, err := reader.LastChange(ctx); err != nil || l != last {
		t.Errorf("LastChange = %q %v, want %q", l, err, last)
	}
	// Seqs compare as numbers: ten more changes, all after "9" (which sorts after "10" as a string).
	for i := range 10 {
		putTexts(t, writer, tenant, c.ID, fmt.Sprint("d", i), "v1", "text")
	}
	got, err := reader.Changes(ctx, "9", 100, 0)
	if err != nil || len(got) != 2 || got[0].Seq != "10" || got[1].Seq != "11" {
		t.Errorf("Changes after 9 = %+v %v", got, err)
	}
	if got, err := reader.Changes(ctx, "", 3, 0); err != nil || len(got) != 3 || got[0].Seq != "1" {
		t.Errorf("Changes from the start, 3 = %+v %v", got, err)
	}
	if _, err := reader.Changes(ctx, "nine", 10, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a seq that is no number: %v, want ErrInvalid", err)
	}
}

func TestChanges_EndsWithTheContext(t *testing.T) {
	t.Parallel()
	s, _ := openColls(t, store.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Changes(ctx, "", 10, time.Hour)
	// The wait was an hour: ending well before it is the context's doing (a bound only a hang breaks).
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Minute {
		t.Fatalf("Changes: %v after %v, want the context's error", err, time.Since(start))
	}
}

func TestPutDocument_Limits(t *testing.T) {
	t.Parallel()
	s, _ := openColls(t, store.Options{Limits: store.Limits{MaxValueBytes: 16}})
	ctx := t.Context()
	c := newCollection(t, s, tenant, "docs")
	d := loom.Document{ID: "d", CollectionID: c.ID, Hash: "h"}
	mk := func(chunks ...loom.Chunk) []collection.Chunk {
		out := make([]collection.Chunk, len(chunks))
		for i, ch := range chunks {
			out[i] = collection.Chunk{Chunk: ch, Vector: []float32{1, 2}}
		}
		return out
	}
	for name, tc := range map[string]struct {
		doc    loom.Document
		chunks []collection.Chunk
		want   error
	}{
		"content over MaxValueBytes": {d, mk(loom.Chunk{ID: "d#0", DocumentID: "d", Content: strings.Repeat("x", 17)}), store.ErrTooLarge},
		"invalid UTF-8":              {d, mk(loom.Chunk{ID: "d#0", DocumentID: "d", Content: "\xff"}), store.ErrInvalid},
		"a chunk id twice":           {d, mk(loom.Chunk{ID: "x", DocumentID: "d"}, loom.Chunk{ID: "x", DocumentID: "d"}), store.ErrInvalid},
		"an empty chunk id":          {d, mk(loom.Chunk{DocumentID: "d"}), store.ErrInvalid},
		"an end before the start":    {d, mk(loom.Chunk{ID: "d#0", DocumentID: "d", StartOffset: 5, EndOffset: 2}), store.ErrInvalid},
		"no hash":                    {loom.Document{ID: "d", CollectionID: c.ID}, nil, store.ErrInvalid},
		"no document id":             {loom.Document{CollectionID: c.ID, Hash: "h"}, nil, store.ErrInvalid},
	} {
		if _, err := s.PutDocument(ctx, tenant, tc.doc, tc.chunks); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// A chunk id another document of the collection has.
	if _, err := s.PutDocument(ctx, tenant, d, mk(loom.Chunk{ID: "shared", DocumentID: "d"})); err != nil {
		t.Fatal(err)
	}
	e := loom.Document{ID: "e", CollectionID: c.ID, Hash: "h"}
	if _, err := s.PutDocument(ctx, tenant, e, mk(loom.Chunk{ID: "shared", DocumentID: "e"})); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("another document's chunk id: %v, want ErrInvalid", err)
	}
	if _, err := s.GetDocument(ctx, tenant, c.ID, "e"); !errors.Is(err, collection.ErrNotFound) {
		t.Errorf("a rejected document was stored: %v", err)
	}
}

func TestCollections_ClosedStore(t *testing.T) {
	t.Parallel()
	st, _ := open(t, sqlite.Options{})
	s, _ := st.Collections()
	c := newCollection(t, s, tenant, "docs")
	_ = st.Close()
	ctx := t.Context()
	_, err := s.GetCollection(ctx, tenant, c.ID)
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("GetCollection after Close: %v", err)
	}
	if _, err := s.Changes(ctx, "", 10, time.Second); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Changes after Close: %v", err)
	}
}

func TestPutDocument_ManyChunksInBatches(t *testing.T) {
	t.Parallel()
	s, _ := openColls(t, store.Options{})
	ctx := t.Context()
	c := newCollection(t, s, tenant, "docs")
	for _, n := range []int{100, 1, 64, 65, 0, 127} { // 64+32+4, 1, 64, 64+1, none, 64+32+16+8+4+2+1
		texts := make([]string, n)
		for i := range texts {
			texts[i] = fmt.Sprintf("chunk number w%d of a version of %d chunks", i, n)
		}
		putTexts(t, s, tenant, c.ID, "big", fmt.Sprint("v", n), texts...)
		got, err := s.DocumentChunks(ctx, tenant, c.ID, "big")
		if err != nil || len(got) != n {
			t.Fatalf("%d chunks: DocumentChunks = %d, %v", n, len(got), err)
		}
		for i, ch := range got {
			if ch.Index != i || ch.Content != texts[i] || ch.ID != fmt.Sprintf("big#%d", i) {
				t.Fatalf("%d chunks: chunk %d = %+v", n, i, ch)
			}
		}
	}
}

// TestCollections_StoredSize measures the file's used pages after the suite's adversarial collections,
// the WAL checkpointed into it.
func TestCollections_StoredSize(t *testing.T) {
	t.Parallel()
	collectiontest.RunStoredSize(t, func(t *testing.T, opts store.Options) (collection.Store, collectiontest.Sizer) {
		s, path := openColls(t, opts)
		return s, func(t *testing.T) int64 {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var pages, free, size int64
			for q, dest := range map[string]*int64{`PRAGMA page_count`: &pages, `PRAGMA freelist_count`: &free, `PRAGMA page_size`: &size} {
				if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
					t.Fatal(err)
				}
				if err := db.QueryRow(q).Scan(dest); err != nil {
					t.Fatal(err)
				}
			}
			return (pages - free) * size
		}
	})
}
