package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom/chunk"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/collection/collectiontest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

func TestCollections_Conformance(t *testing.T) {
	collectiontest.Run(t, func(t *testing.T, opts store.Options) collection.Store {
		s, _ := open(t, opts)
		return s
	})
}

// putTexts stores a document whose chunks have the texts, with ids doc#0, doc#1, ...
func putTexts(t *testing.T, s collection.Store, tn, collID, docID, version string, texts ...string) {
	t.Helper()
	d := collection.Document{ID: docID, CollectionID: collID, Source: docID + ".txt", Hash: docID + "-" + version}
	var chunks []collection.Chunk
	for i, text := range texts {
		chunks = append(chunks, collection.Chunk{Chunk: chunk.Chunk{ID: fmt.Sprintf("%s#%d", docID, i), DocumentID: docID, Content: text, Index: i}})
	}
	if _, err := s.PutDocument(t.Context(), tn, d, chunks); err != nil {
		t.Fatal(err)
	}
}

func newCollection(t *testing.T, s collection.Store, tn, name string) collection.Collection {
	t.Helper()
	c, err := s.CreateCollection(t.Context(), tn, collection.Collection{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ids(rs []collection.ScoredID) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// ftsIntegrity checks the FTS5 index against the chunks table, as SQLite itself does.
func ftsIntegrity(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("the FTS index is out of step with the chunks: %v", err)
	}
}

func TestSearchKeywords_Ranks(t *testing.T) {
	t.Parallel()
	s, path := open(t, store.Options{})
	ctx := t.Context()
	c := newCollection(t, s, tenant, "help")
	putTexts(t, s, tenant, c.ID, "billing", "v1",
		"Refunds are issued within 14 days under our refund policy. The refund policy covers every plan.",
		"Invoices are emailed at the start of each month.",
		"To change your card, open the billing settings.")
	putTexts(t, s, tenant, c.ID, "account", "v1",
		"Reset your password from the login page.",
		"A refund can be asked for from the support page.",
		"The team plan has a shared storage limit.")
	got, err := s.SearchKeywords(ctx, tenant, c.ID, "refund policy", 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"billing#0", "account#1"}; !slices.Equal(ids(got), want) {
		t.Fatalf("refund policy: %v, want %v", got, want)
	}
	if got[0].Score <= got[1].Score || got[1].Score <= 0 {
		t.Errorf("scores are not positive and best first: %v", got)
	}
	got, err = s.SearchKeywords(ctx, tenant, c.ID, "PASSWORD", 10)
	if err != nil || !slices.Equal(ids(got), []string{"account#0"}) {
		t.Errorf("search is not case-insensitive: %v %v", got, err)
	}
	got, err = s.SearchKeywords(ctx, tenant, c.ID, "page", 1)
	if err != nil || len(got) != 1 {
		t.Errorf("k = 1: %v %v", got, err)
	}
	if got, err := s.SearchKeywords(ctx, tenant, c.ID, "page", 0); err != nil || len(got) != 0 {
		t.Errorf("k = 0: %v %v", got, err)
	}
	if _, err := s.SearchKeywords(ctx, tenant, c.ID, "page", -1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("k = -1: %v, want ErrInvalid", err)
	}
	ftsIntegrity(t, path)
}

func TestSearchKeywords_ScopedToTenantAndCollection(t *testing.T) {
	t.Parallel()
	s, _ := open(t, store.Options{})
	ctx := t.Context()
	mine := newCollection(t, s, "acme", "docs")
	other := newCollection(t, s, "acme", "other")
	theirs := newCollection(t, s, "globex", "docs")
	putTexts(t, s, "acme", mine.ID, "a", "v1", "the secret launch date")
	putTexts(t, s, "acme", other.ID, "b", "v1", "another secret launch")
	putTexts(t, s, "globex", theirs.ID, "c", "v1", "globex secret launch plans")
	for _, tc := range []struct {
		tenant, coll string
		want         []string
	}{
		{"acme", mine.ID, []string{"a#0"}},
		{"acme", other.ID, []string{"b#0"}},
		{"globex", theirs.ID, []string{"c#0"}},
	} {
		got, err := s.SearchKeywords(ctx, tc.tenant, tc.coll, "secret launch", 10)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s/%s: %v %v, want %v", tc.tenant, tc.coll, got, err, tc.want)
		}
	}
	if mine.ID != theirs.ID {
		if _, err := s.SearchKeywords(ctx, "globex", mine.ID, "secret", 10); !errors.Is(err, collection.ErrNotFound) {
			t.Errorf("globex searching acme's collection: %v, want ErrNotFound", err)
		}
	}
	if _, err := s.SearchKeywords(ctx, "acme", "missing", "secret", 10); !errors.Is(err, collection.ErrNotFound) {
		t.Errorf("a missing collection: %v, want ErrNotFound", err)
	}
}

func TestSearchKeywords_QueryIsNeverSyntax(t *testing.T) {
	t.Parallel()
	s, _ := open(t, store.Options{})
	ctx := t.Context()
	c := newCollection(t, s, tenant, "docs")
	putTexts(t, s, tenant, c.ID, "d", "v1",
		"Crème brûlée is a dessert", // 0
		"near the refund desk",      // 1
		"and or not",                // 2: only stopwords and operators
		"Привет, 世界",                // 3
		"content column dessert",    // 4
	)
	for _, tc := range []struct {
		query string
		want  []string // nil: no result
	}{
		{``, nil},
		{`   `, nil},
		{`"`, nil},
		{`""`, nil},
		{`*`, nil},
		{`-`, nil},
		{`NEAR(`, []string{"d#1"}}, // a word like any other
		{`NEAR(refund desk, 2)`, []string{"d#1"}},
		{`AND OR`, nil},
		{`the of and`, nil},
		{`NOT refund`, []string{"d#1"}},
		{`refund*`, []string{"d#1"}},
		{`"refund`, []string{"d#1"}},
		{`re"fund`, nil},
		{`^refund`, []string{"d#1"}},
		{`-refund`, []string{"d#1"}},
		{`content:refund`, []string{"d#1", "d#4"}},
		{`content : "column"`, []string{"d#4"}},
		{`{content}: dessert`, []string{"d#0", "d#4"}},
		{`rowid:1 OR rank:2`, nil},
		{`creme brulee`, []string{"d#0"}},
		{`CRÈME`, []string{"d#0"}},
		{`привет`, []string{"d#3"}},
		{`世界`, []string{"d#3"}},
		{`🧵 \x00 ;'--`, nil},
		{strings.Repeat("refund ", 1000), []string{"d#1"}},
	} {
		got, err := s.SearchKeywords(ctx, tenant, c.ID, tc.query, 10)
		if err != nil {
			t.Errorf("%q: %v", tc.query, err)
			continue
		}
		gotIDs := ids(got)
		slices.Sort(gotIDs)
		if !slices.Equal(gotIDs, tc.want) && !(len(gotIDs) == 0 && len(tc.want) == 0) {
			t.Errorf("%q: %v, want %v", tc.query, gotIDs, tc.want)
		}
	}
}

func TestSearchKeywords_FollowsReplaceAndDelete(t *testing.T) {
	t.Parallel()
	s, path := open(t, store.Options{})
	ctx := t.Context()
	c := newCollection(t, s, tenant, "docs")
	keep := newCollection(t, s, tenant, "keep")
	search := func(coll, q string) []string {
		t.Helper()
		got, err := s.SearchKeywords(ctx, tenant, coll, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		return ids(got)
	}
	putTexts(t, s, tenant, c.ID, "guide", "v1", "alpha one", "alpha two", "alpha three")
	putTexts(t, s, tenant, c.ID, "other", "v1", "gamma")
	putTexts(t, s, tenant, keep.ID, "guide", "v1", "alpha kept")
	if got := search(c.ID, "alpha"); len(got) != 3 {
		t.Fatalf("alpha before replacing: %v", got)
	}
	putTexts(t, s, tenant, c.ID, "guide", "v2", "beta one")
	if got := search(c.ID, "alpha"); len(got) != 0 {
		t.Errorf("the replaced chunks are still found: %v", got)
	}
	if got := search(c.ID, "beta"); !slices.Equal(got, []string{"guide#0"}) {
		t.Errorf("the new chunk: %v", got)
	}
	ftsIntegrity(t, path)
	if err := s.DeleteDocument(ctx, tenant, c.ID, "guide"); err != nil {
		t.Fatal(err)
	}
	if got := search(c.ID, "beta one"); len(got) != 0 {
		t.Errorf("a deleted document's chunks are found: %v", got)
	}
	if got := search(c.ID, "gamma"); len(got) != 1 {
		t.Errorf("another document's chunk is lost: %v", got)
	}
	ftsIntegrity(t, path)
	if err := s.DeleteCollection(ctx, tenant, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SearchKeywords(ctx, tenant, c.ID, "gamma", 10); !errors.Is(err, collection.ErrNotFound) {
		t.Errorf("searching a deleted collection: %v", err)
	}
	again := newCollection(t, s, tenant, "docs") // the same name, a new collection: nothing of the old one
	if got := search(again.ID, "gamma alpha beta"); len(got) != 0 {
		t.Errorf("a new collection of the old name finds %v", got)
	}
	if got := search(keep.ID, "alpha"); !slices.Equal(got, []string{"guide#0"}) {
		t.Errorf("another collection's chunks: %v", got)
	}
	ftsIntegrity(t, path)
	var n int
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT count(*) FROM chunks`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d chunk rows left (%v), want 1", n, err)
	}
}

func TestChanges_SeenByAnotherStoreOnTheFile(t *testing.T) {
	t.Parallel()
	writer, path := open(t, store.Options{})
	reader, err := sqlite.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Close() })
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
		ch, err := reader.Changes(ctx, last, 10, 5*time.Second)
		done <- result{ch, err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond)
	written := time.Now()
	putTexts(t, writer, tenant, c.ID, "guide", "v1", "hello")
	select {
	case r := <-done:
		if r.err != nil || len(r.changes) != 1 || r.changes[0].DocumentID != "guide" || r.changes[0].Op != collection.OpPut ||
			r.changes[0].Tenant != tenant || r.changes[0].CollectionID != c.ID {
			t.Fatalf("Changes = %+v, %v", r.changes, r.err)
		}
		if d := r.at.Sub(written); d > time.Second {
			t.Errorf("the other store saw the change %v after it was written", d)
		}
		last = r.changes[0].Seq
	case <-time.After(10 * time.Second):
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
	s, _ := open(t, store.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Changes(ctx, "", 10, time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("Changes: %v after %v, want the context's error", err, time.Since(start))
	}
}

func TestPutDocument_Limits(t *testing.T) {
	t.Parallel()
	s, _ := open(t, store.Options{Limits: store.Limits{MaxValueBytes: 16}})
	ctx := t.Context()
	c := newCollection(t, s, tenant, "docs")
	d := collection.Document{ID: "d", CollectionID: c.ID, Hash: "h"}
	mk := func(chunks ...chunk.Chunk) []collection.Chunk {
		out := make([]collection.Chunk, len(chunks))
		for i, ch := range chunks {
			out[i] = collection.Chunk{Chunk: ch, Vector: []float32{1, 2}}
		}
		return out
	}
	for name, tc := range map[string]struct {
		doc    collection.Document
		chunks []collection.Chunk
		want   error
	}{
		"content over MaxValueBytes": {d, mk(chunk.Chunk{ID: "d#0", DocumentID: "d", Content: strings.Repeat("x", 17)}), store.ErrTooLarge},
		"invalid UTF-8":              {d, mk(chunk.Chunk{ID: "d#0", DocumentID: "d", Content: "\xff"}), store.ErrInvalid},
		"a chunk id twice":           {d, mk(chunk.Chunk{ID: "x", DocumentID: "d"}, chunk.Chunk{ID: "x", DocumentID: "d"}), store.ErrInvalid},
		"an empty chunk id":          {d, mk(chunk.Chunk{DocumentID: "d"}), store.ErrInvalid},
		"an end before the start":    {d, mk(chunk.Chunk{ID: "d#0", DocumentID: "d", StartOffset: 5, EndOffset: 2}), store.ErrInvalid},
		"no hash":                    {collection.Document{ID: "d", CollectionID: c.ID}, nil, store.ErrInvalid},
		"no document id":             {collection.Document{CollectionID: c.ID, Hash: "h"}, nil, store.ErrInvalid},
	} {
		if _, err := s.PutDocument(ctx, tenant, tc.doc, tc.chunks); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// A chunk id another document of the collection has.
	if _, err := s.PutDocument(ctx, tenant, d, mk(chunk.Chunk{ID: "shared", DocumentID: "d"})); err != nil {
		t.Fatal(err)
	}
	e := collection.Document{ID: "e", CollectionID: c.ID, Hash: "h"}
	if _, err := s.PutDocument(ctx, tenant, e, mk(chunk.Chunk{ID: "shared", DocumentID: "e"})); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("another document's chunk id: %v, want ErrInvalid", err)
	}
	if _, err := s.GetDocument(ctx, tenant, c.ID, "e"); !errors.Is(err, collection.ErrNotFound) {
		t.Errorf("a rejected document was stored: %v", err)
	}
}

func TestCollections_ClosedStore(t *testing.T) {
	t.Parallel()
	s, _ := open(t, store.Options{})
	c := newCollection(t, s, tenant, "docs")
	_ = s.Close()
	ctx := t.Context()
	_, err := s.GetCollection(ctx, tenant, c.ID)
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("GetCollection after Close: %v", err)
	}
	if _, err := s.Changes(ctx, "", 10, time.Second); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Changes after Close: %v", err)
	}
	if _, err := s.SearchKeywords(ctx, tenant, c.ID, "x", 10); !errors.Is(err, store.ErrClosed) {
		t.Errorf("SearchKeywords after Close: %v", err)
	}
}

func TestPutDocument_ManyChunksInBatches(t *testing.T) {
	t.Parallel()
	s, path := open(t, store.Options{})
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
		if n > 0 {
			hits, err := s.SearchKeywords(ctx, tenant, c.ID, fmt.Sprintf("w%d", n-1), 10)
			if err != nil || len(hits) != 1 || hits[0].ID != fmt.Sprintf("big#%d", n-1) {
				t.Fatalf("%d chunks: the last chunk's word finds %v, %v", n, hits, err)
			}
		}
		ftsIntegrity(t, path)
	}
}
