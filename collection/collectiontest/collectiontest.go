// Package collectiontest is the conformance suite every collection.Store passes:
// `collectiontest.Run(t, newStore)`. It includes retrieval parity: an index of the chunks a store gives
// back ranks every query (English, Chinese and Japanese, accents, stop words, filters; every mode) as an
// index of the chunks given to it does, bit for bit, so that retrieval is the same on every store.
package collectiontest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// NewStore opens a fresh, empty collection store with opts for one test; the suite does not close it
// (register the close with t.Cleanup).
type NewStore func(t *testing.T, opts store.Options) collection.Store

// Run runs the suite.
func Run(t *testing.T, newStore NewStore) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, collection.Store)
	}{
		{"Collections", testCollections},
		{"NamesAndIDs", testNamesAndIDs},
		{"NamesAndIDsConcurrent", testNamesAndIDsConcurrent},
		{"PutDocument", testPutDocument},
		{"Idempotent", testIdempotent},
		{"ReplaceAndDelete", testReplaceAndDelete},
		{"Dimensions", testDimensions},
		{"FusionWeights", testFusionWeights},
		{"TenantIsolation", testTenantIsolation},
		{"Changes", testChanges},
		{"ConcurrentPuts", testConcurrentPuts},
		{"Unicode", testUnicode},
		{"DeleteCollection", testDeleteCollection},
		{"AllCollections", testAllCollections},
		{"Metadata", testMetadata},
		{"MetadataLimits", testMetadataLimits},
		{"RetrievalParity", testRetrievalParity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t, store.Options{}))
		})
	}
	t.Run("FeedTrimmed", func(t *testing.T) {
		t.Parallel()
		testFeedTrimmed(t, newStore(t, store.Options{ChangesKept: trimmedKept}))
	})
}

// trimmedKept is the ChangesKept of FeedTrimmed's store.
const trimmedKept = 10

const tenant = "acme"

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

// doc makes a document of n chunks whose texts say which document and version they are.
func doc(collID, id, version string, n int) (loom.Document, []collection.Chunk) {
	d := loom.Document{ID: id, CollectionID: collID, Source: id + ".md", ContentType: "markdown", Hash: "h-" + id + "-" + version,
		Metadata: map[string]string{"lang": "en"}}
	var chunks []collection.Chunk
	off := 0
	for i := range n {
		text := fmt.Sprintf("%s %s chunk %d", id, version, i)
		chunks = append(chunks, collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", id, i), DocumentID: id, Content: text, Index: i,
			StartOffset: off, EndOffset: off + len(text), TokenCount: 5, Metadata: map[string]string{"source": d.Source, "section": fmt.Sprint(i)}},
			Vector: []float32{float32(i), 1, 0.5}})
		off += len(text)
	}
	d.Bytes, d.Chunks = off, n
	return d, chunks
}

func create(t *testing.T, s collection.Store, tn, name string) loom.Collection {
	t.Helper()
	c, err := s.CreateCollection(t.Context(), tn, loom.Collection{Name: name, ChunkStrategy: "recursive", ChunkSize: 512, ChunkOverlap: 50, Embedder: "lexical"})
	check(t, err)
	if c.ID == "" || c.Name != name || c.CreatedAt.IsZero() {
		t.Fatalf("CreateCollection = %+v", c)
	}
	return c
}

func testCollections(t *testing.T, s collection.Store) {
	ctx := t.Context()
	if l, err := s.ListCollections(ctx, tenant); err != nil || len(l) != 0 {
		t.Fatalf("ListCollections of a new store = %v, %v", l, err)
	}
	b := create(t, s, tenant, "manuals")
	a := create(t, s, tenant, "faq")
	_, err := s.CreateCollection(ctx, tenant, loom.Collection{Name: "faq"})
	wantErr(t, err, collection.ErrExists, "a second collection named faq")
	_, err = s.CreateCollection(ctx, tenant, loom.Collection{ID: b.ID, Name: "other"})
	wantErr(t, err, collection.ErrExists, "a second collection with an existing id")
	_, err = s.CreateCollection(ctx, tenant, loom.Collection{})
	wantErr(t, err, store.ErrInvalid, "a collection without a name")
	l, err := s.ListCollections(ctx, tenant)
	check(t, err)
	if len(l) != 2 || l[0].Name != "faq" || l[1].Name != "manuals" {
		t.Fatalf("ListCollections = %+v", l)
	}
	for _, key := range []string{a.ID, "faq"} {
		got, err := s.GetCollection(ctx, tenant, key)
		check(t, err)
		if got.ID != a.ID || got.ChunkStrategy != "recursive" || got.ChunkSize != 512 || got.ChunkOverlap != 50 || got.Embedder != "lexical" {
			t.Fatalf("GetCollection(%q) = %+v", key, got)
		}
	}
	_, err = s.GetCollection(ctx, tenant, "nope")
	wantErr(t, err, collection.ErrNotFound, "GetCollection of a missing collection")
	wantErr(t, s.DeleteCollection(ctx, tenant, "nope"), collection.ErrNotFound, "DeleteCollection of a missing collection")
}

// testNamesAndIDs: within a tenant, names and ids are one namespace (GetCollection takes either), so a new
// collection whose id is another's name or id, or whose name is another's id or name, is refused with
// ErrExists, and the error names what clashed and the existing collection's id. Another tenant's
// collections do not count.
func testNamesAndIDs(t *testing.T, s collection.Store) {
	ctx := t.Context()
	manual := create(t, s, tenant, "manual")
	fixed, err := s.CreateCollection(ctx, tenant, loom.Collection{ID: "fixed-id", Name: "fixed"})
	check(t, err)
	for _, tc := range []struct {
		what  string
		c     loom.Collection
		names []string // what the error must name
	}{
		{"a name in use", loom.Collection{Name: "manual"}, []string{"manual", manual.ID}},
		{"a name and an id in use", loom.Collection{ID: "fixed-id", Name: "fixed"}, []string{"fixed", "fixed-id"}},
		{"an id in use", loom.Collection{ID: "fixed-id", Name: "scratch"}, []string{"fixed-id", "fixed"}},
		{"an id that is another's name", loom.Collection{ID: "manual", Name: "scratch"}, []string{"manual", manual.ID}},
		{"an id that is another's name, the name free", loom.Collection{ID: "fixed", Name: "scratch"}, []string{"fixed", "fixed-id"}},
		{"a name that is another's id", loom.Collection{Name: manual.ID}, []string{manual.ID, "manual"}},
		{"a name that is another's id, the id free", loom.Collection{ID: "scratch-id", Name: "fixed-id"}, []string{"fixed-id", "fixed"}},
	} {
		_, err := s.CreateCollection(ctx, tenant, tc.c)
		wantErr(t, err, collection.ErrExists, tc.what)
		for _, name := range tc.names {
			if !strings.Contains(err.Error(), `"`+name+`"`) {
				t.Errorf("%s: the error %q does not name %q", tc.what, err, name)
			}
		}
	}
	// The refused collections left nothing behind, and each name names its collection.
	l, err := s.ListCollections(ctx, tenant)
	check(t, err)
	if len(l) != 2 || l[0].ID != fixed.ID || l[1].ID != manual.ID {
		t.Fatalf("after the refused creations, ListCollections = %+v", l)
	}
	for key, want := range map[string]string{"manual": manual.ID, manual.ID: manual.ID, "fixed": fixed.ID, "fixed-id": fixed.ID} {
		got, err := s.GetCollection(ctx, tenant, key)
		check(t, err)
		if got.ID != want {
			t.Errorf("GetCollection(%q) = collection %q (%q), want id %q", key, got.ID, got.Name, want)
		}
	}
	for _, key := range []string{"scratch", "scratch-id"} {
		_, err := s.GetCollection(ctx, tenant, key)
		wantErr(t, err, collection.ErrNotFound, "GetCollection of the refused "+key)
	}
	wantErr(t, s.DeleteCollection(ctx, tenant, "manual"), collection.ErrNotFound, "DeleteCollection of a name, not an id")
	if _, err := s.GetCollection(ctx, tenant, manual.ID); err != nil {
		t.Fatalf("manual after DeleteCollection(\"manual\"): %v", err)
	}

	// A collection's own id may be its name; the refused ids and names are free.
	same, err := s.CreateCollection(ctx, tenant, loom.Collection{ID: "same", Name: "same"})
	check(t, err)
	if got, err := s.GetCollection(ctx, tenant, "same"); err != nil || got.ID != same.ID {
		t.Fatalf("GetCollection of a collection whose id is its name: %+v, %v", got, err)
	}
	_, err = s.CreateCollection(ctx, tenant, loom.Collection{ID: "scratch-id", Name: "scratch"})
	check(t, err)

	// Another tenant may use every name and id of acme's, crossed or not.
	for _, c := range []loom.Collection{{ID: "manual", Name: "fixed-id"}, {ID: "fixed", Name: manual.ID}, {Name: "same"}} {
		_, err := s.CreateCollection(ctx, "globex", c)
		check(t, err)
	}
	if got, err := s.GetCollection(ctx, tenant, "manual"); err != nil || got.ID != manual.ID {
		t.Fatalf("acme's manual after globex's creations: %+v, %v", got, err)
	}
	if got, err := s.GetCollection(ctx, "globex", "manual"); err != nil || got.Name != "fixed-id" {
		t.Fatalf("globex's collection of id manual: %+v, %v", got, err)
	}
}

// testNamesAndIDsConcurrent: of two collections created at once, one named x and one of id x, exactly one
// is created.
func testNamesAndIDsConcurrent(t *testing.T, s collection.Store) {
	ctx := t.Context()
	for i := range 20 {
		x := fmt.Sprintf("x%d", i)
		var errs [2]error
		var wg sync.WaitGroup
		wg.Go(func() { _, errs[0] = s.CreateCollection(ctx, tenant, loom.Collection{Name: x}) })
		wg.Go(func() { _, errs[1] = s.CreateCollection(ctx, tenant, loom.Collection{ID: x, Name: "y" + x}) })
		wg.Wait()
		created := 0
		for _, err := range errs {
			if err == nil {
				created++
			} else if !errors.Is(err, collection.ErrExists) {
				t.Fatal(err)
			}
		}
		if created != 1 {
			t.Fatalf("%s: %d of the two collections were created (%v)", x, created, errs)
		}
		got, err := s.GetCollection(ctx, tenant, x)
		check(t, err)
		if (errs[0] == nil) != (got.Name == x) {
			t.Fatalf("%s: GetCollection = %+v, errors %v", x, got, errs)
		}
	}
}

func testPutDocument(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	d, chunks := doc(c.ID, "guide", "v1", 4)
	changed, err := s.PutDocument(ctx, tenant, d, chunks)
	check(t, err)
	if !changed {
		t.Fatal("PutDocument of a new document changed nothing")
	}
	got, err := s.GetDocument(ctx, tenant, c.ID, "guide")
	check(t, err)
	if got.Hash != d.Hash || got.Source != "guide.md" || got.ContentType != "markdown" || got.Chunks != 4 || got.Bytes != d.Bytes ||
		got.Metadata["lang"] != "en" || got.UpdatedAt.IsZero() || got.CollectionID != c.ID {
		t.Fatalf("GetDocument = %+v", got)
	}
	stored, err := s.DocumentChunks(ctx, tenant, c.ID, "guide")
	check(t, err)
	if len(stored) != 4 {
		t.Fatalf("%d chunks", len(stored))
	}
	for i, ch := range stored {
		w := chunks[i]
		if ch.ID != w.ID || ch.DocumentID != "guide" || ch.Content != w.Content || ch.Index != i || ch.StartOffset != w.StartOffset ||
			ch.EndOffset != w.EndOffset || ch.TokenCount != 5 || ch.Metadata["source"] != "guide.md" || ch.Metadata["section"] != fmt.Sprint(i) ||
			!slices.Equal(ch.Vector, w.Vector) {
			t.Fatalf("chunk %d = %+v, want %+v", i, ch, w)
		}
	}
	coll, err := s.GetCollection(ctx, tenant, c.ID)
	check(t, err)
	if coll.Dimensions != 3 {
		t.Errorf("Dimensions = %d after the first vectors of 3", coll.Dimensions)
	}
	n := 0
	check(t, s.ScanChunks(ctx, tenant, c.ID, func(collection.Chunk) error { n++; return nil }))
	if n != 4 {
		t.Errorf("ScanChunks saw %d chunks", n)
	}
	stop := errors.New("stop")
	if err := s.ScanChunks(ctx, tenant, c.ID, func(collection.Chunk) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("ScanChunks does not return fn's error: %v", err)
	}
	docs, err := s.ListDocuments(ctx, tenant, c.ID)
	check(t, err)
	if len(docs) != 1 || docs[0].ID != "guide" {
		t.Fatalf("ListDocuments = %+v", docs)
	}
	_, err = s.GetDocument(ctx, tenant, c.ID, "nope")
	wantErr(t, err, collection.ErrNotFound, "GetDocument of a missing document")
	_, err = s.PutDocument(ctx, tenant, loom.Document{ID: "x", CollectionID: "no-such-collection", Hash: "h"}, nil)
	wantErr(t, err, collection.ErrNotFound, "PutDocument into a missing collection")
	bad := chunks[0]
	bad.DocumentID = "other"
	_, err = s.PutDocument(ctx, tenant, loom.Document{ID: "y", CollectionID: c.ID, Hash: "h"}, []collection.Chunk{bad})
	wantErr(t, err, store.ErrInvalid, "a chunk of another document")
}

func testIdempotent(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	d, chunks := doc(c.ID, "guide", "v1", 3)
	_, err := s.PutDocument(ctx, tenant, d, chunks)
	check(t, err)
	before, err := s.GetDocument(ctx, tenant, c.ID, "guide")
	check(t, err)
	last, err := s.LastChange(ctx)
	check(t, err)
	changed, err := s.PutDocument(ctx, tenant, d, chunks)
	check(t, err)
	if changed {
		t.Error("PutDocument of the same hash reported a change")
	}
	after, err := s.GetDocument(ctx, tenant, c.ID, "guide")
	check(t, err)
	if !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Error("PutDocument of the same hash touched the document")
	}
	if l, _ := s.LastChange(ctx); l != last {
		t.Error("PutDocument of the same hash wrote a change")
	}
}

func testReplaceAndDelete(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	d1, c1 := doc(c.ID, "guide", "v1", 5)
	_, err := s.PutDocument(ctx, tenant, d1, c1)
	check(t, err)
	other, oc := doc(c.ID, "other", "v1", 2)
	_, err = s.PutDocument(ctx, tenant, other, oc)
	check(t, err)
	d2, c2 := doc(c.ID, "guide", "v2", 2) // fewer chunks: the old ones must go
	changed, err := s.PutDocument(ctx, tenant, d2, c2)
	check(t, err)
	if !changed {
		t.Fatal("a new version changed nothing")
	}
	var texts []string
	check(t, s.ScanChunks(ctx, tenant, c.ID, func(ch collection.Chunk) error { texts = append(texts, ch.Content); return nil }))
	slices.Sort(texts)
	if want := []string{"guide v2 chunk 0", "guide v2 chunk 1", "other v1 chunk 0", "other v1 chunk 1"}; !slices.Equal(texts, want) {
		t.Fatalf("after replacing, chunks = %q, want %q", texts, want)
	}
	check(t, s.DeleteDocument(ctx, tenant, c.ID, "guide"))
	wantErr(t, s.DeleteDocument(ctx, tenant, c.ID, "guide"), collection.ErrNotFound, "deleting a document twice")
	texts = nil
	check(t, s.ScanChunks(ctx, tenant, c.ID, func(ch collection.Chunk) error { texts = append(texts, ch.Content); return nil }))
	if len(texts) != 2 || !strings.HasPrefix(texts[0], "other") {
		t.Fatalf("after deleting, chunks = %q", texts)
	}
	if chunks, err := s.DocumentChunks(ctx, tenant, c.ID, "guide"); err == nil && len(chunks) != 0 {
		t.Fatalf("a deleted document has chunks %v", chunks)
	}
}

func testDimensions(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	d, chunks := doc(c.ID, "a", "v1", 2)
	_, err := s.PutDocument(ctx, tenant, d, chunks)
	check(t, err)
	d2, c2 := doc(c.ID, "b", "v1", 1)
	c2[0].Vector = []float32{1, 2}
	_, err = s.PutDocument(ctx, tenant, d2, c2)
	wantErr(t, err, store.ErrInvalid, "vectors of another length")
	if _, err := s.GetDocument(ctx, tenant, c.ID, "b"); !errors.Is(err, collection.ErrNotFound) {
		t.Fatal("a rejected document was stored")
	}
}

// testFusionWeights: a collection's fusion weights are stored at creation and by SetFusionWeights (nil
// unsets one), read back by every read, and shared with no caller; bad weights and unknown collections
// are refused.
func testFusionWeights(t *testing.T, s collection.Store) {
	ctx := t.Context()
	kw, vec := 0.5, 0.0
	c, err := s.CreateCollection(ctx, tenant, loom.Collection{Name: "weighted", ChunkStrategy: "recursive", ChunkSize: 512,
		ChunkOverlap: 50, Embedder: "lexical", KeywordWeight: &kw, VectorWeight: &vec})
	check(t, err)
	kw = 9 // the caller's variable, not the store's
	weights := func(c loom.Collection) string {
		f := func(w *float64) string {
			if w == nil {
				return "nil"
			}
			return fmt.Sprint(*w)
		}
		return f(c.KeywordWeight) + " " + f(c.VectorWeight)
	}
	read := func(want string) {
		t.Helper()
		got, err := s.GetCollection(ctx, tenant, c.ID)
		check(t, err)
		if weights(got) != want {
			t.Fatalf("GetCollection weights %s, want %s", weights(got), want)
		}
		l, err := s.ListCollections(ctx, tenant)
		check(t, err)
		if len(l) != 1 || weights(l[0]) != want {
			t.Fatalf("ListCollections weights %v, want %s", l, want)
		}
		*got.VectorWeight = 7 // a reader's copy, not the store's
		if again, _ := s.GetCollection(ctx, tenant, c.Name); weights(again) != want {
			t.Fatalf("a reader changed the stored weights: %s", weights(again))
		}
	}
	if weights(c) != "0.5 0" {
		t.Fatalf("CreateCollection weights %s", weights(c))
	}
	read("0.5 0")
	two := 2.0
	set, err := s.SetFusionWeights(ctx, tenant, c.ID, nil, &two)
	check(t, err)
	if weights(set) != "nil 2" || set.ID != c.ID || set.Name != c.Name || set.ChunkSize != c.ChunkSize || !set.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("SetFusionWeights = %+v (weights %s)", set, weights(set))
	}
	two = 3
	read("nil 2")
	_, err = s.SetFusionWeights(ctx, tenant, c.ID, nil, nil)
	check(t, err)
	if got, _ := s.GetCollection(ctx, tenant, c.ID); got.KeywordWeight != nil || got.VectorWeight != nil {
		t.Fatalf("unset weights read back as %s", weights(got))
	}
	neg, nan := -1.0, math.NaN()
	for _, w := range []*float64{&neg, &nan} {
		_, err = s.SetFusionWeights(ctx, tenant, c.ID, w, nil)
		wantErr(t, err, store.ErrInvalid, "a bad weight")
		wantErr(t, err, loom.ErrInvalidFusionWeights, "a bad weight")
		_, err = s.CreateCollection(ctx, tenant, loom.Collection{Name: "bad", VectorWeight: w})
		wantErr(t, err, store.ErrInvalid, "a collection created with a bad weight")
	}
	_, err = s.SetFusionWeights(ctx, tenant, "nope", &two, nil)
	wantErr(t, err, collection.ErrNotFound, "SetFusionWeights of an unknown collection")
	_, err = s.SetFusionWeights(ctx, "other-tenant", c.ID, &two, nil)
	wantErr(t, err, collection.ErrNotFound, "SetFusionWeights of another tenant's collection")
	_, err = s.SetFusionWeights(ctx, tenant, c.Name, &two, nil)
	wantErr(t, err, collection.ErrNotFound, "SetFusionWeights by name")
}

func testTenantIsolation(t *testing.T, s collection.Store) {
	ctx := t.Context()
	a := create(t, s, "acme", "docs")
	g := create(t, s, "globex", "docs") // the same name in another tenant is fine
	d, chunks := doc(a.ID, "secret", "v1", 2)
	_, err := s.PutDocument(ctx, "acme", d, chunks)
	check(t, err)
	// globex names acme's collection id and document id.
	_, err = s.GetCollection(ctx, "globex", a.ID)
	if err == nil && a.ID != g.ID {
		t.Fatal("globex reads acme's collection by id")
	}
	_, err = s.GetDocument(ctx, "globex", a.ID, "secret")
	wantErr(t, err, collection.ErrNotFound, "globex reading acme's document")
	n := 0
	_ = s.ScanChunks(ctx, "globex", a.ID, func(collection.Chunk) error { n++; return nil })
	if n != 0 {
		t.Fatal("globex scans acme's chunks")
	}
	_, err = s.PutDocument(ctx, "globex", loom.Document{ID: "secret", CollectionID: a.ID, Hash: "x"}, nil)
	if err == nil && a.ID != g.ID {
		t.Fatal("globex writes into acme's collection")
	}
	if a.ID != g.ID {
		wantErr(t, s.DeleteCollection(ctx, "globex", a.ID), collection.ErrNotFound, "globex deleting acme's collection")
	}
	if docs, _ := s.ListDocuments(ctx, "globex", g.ID); len(docs) != 0 {
		t.Fatalf("globex's collection has %v", docs)
	}
	got, err := s.GetDocument(ctx, "acme", a.ID, "secret")
	check(t, err)
	if got.Hash != d.Hash {
		t.Fatal("acme's document changed")
	}
}

func testChanges(t *testing.T, s collection.Store) {
	ctx := t.Context()
	start, err := s.LastChange(ctx)
	check(t, err)
	c := create(t, s, tenant, "docs")
	d, chunks := doc(c.ID, "guide", "v1", 2)
	_, err = s.PutDocument(ctx, tenant, d, chunks)
	check(t, err)
	check(t, s.DeleteDocument(ctx, tenant, c.ID, "guide"))
	got, err := s.Changes(ctx, start, 100, 0)
	check(t, err)
	var ops []string
	for _, ch := range got {
		if ch.Tenant == tenant && ch.CollectionID == c.ID {
			ops = append(ops, ch.Op+":"+ch.DocumentID)
		}
	}
	if want := []string{"put:guide", "delete:guide"}; !slices.Equal(ops, want) {
		t.Fatalf("changes = %q, want %q", ops, want)
	}
	// A limit of 0 or less means collection.DefaultChangesLimit, on every store.
	for _, limit := range []int{0, -1} {
		all, err := s.Changes(ctx, start, limit, 0)
		check(t, err)
		if !slices.Equal(all, got) {
			t.Errorf("Changes with limit %d = %+v, want %+v", limit, all, got)
		}
	}
	last := got[len(got)-1].Seq
	if l, _ := s.LastChange(ctx); l != last {
		t.Errorf("LastChange = %q, the last change's Seq is %q", l, last)
	}
	// A wait of 0 or less means not to wait, on every store: what there is, or nothing, at once and without
	// an error. (The deadline, patience, is late only for a store that waited the hour.)
	for _, wait := range []time.Duration{0, -time.Hour} {
		wctx, cancel := context.WithTimeout(ctx, patience)
		all, err := s.Changes(wctx, start, 100, wait)
		none, errNone := s.Changes(wctx, last, 100, wait)
		cancel()
		if err != nil || !slices.Equal(all, got) {
			t.Errorf("Changes with wait %v = %+v, %v; want %+v", wait, all, err, got)
		}
		if errNone != nil || len(none) != 0 {
			t.Errorf("Changes with wait %v and nothing new = %+v, %v; want nothing at once", wait, none, errNone)
		}
	}
	// Waiting: a change written while Changes waits is returned when it is written, not when the wait (an
	// hour) is over. The write waits until the reader is seen blocked in Changes; a reader that starts late
	// finds the change there at once, which is as right.
	type result struct {
		changes []collection.Change
		err     error
	}
	done := make(chan result, 1)
	returned := make(chan struct{})
	reader := make(chan int, 1)
	go func() {
		defer close(returned)
		reader <- goroutineID()
		ch, err := s.Changes(ctx, last, 100, time.Hour)
		done <- result{ch, err}
	}()
	if !untilBlocked(t, <-reader, ".Changes(", returned) {
		r := <-done
		t.Fatalf("Changes with nothing new returned before the hour's wait: %+v, %v", r.changes, r.err)
	}
	d2, c2 := doc(c.ID, "later", "v1", 1)
	_, err = s.PutDocument(ctx, tenant, d2, c2)
	check(t, err)
	var r result
	select {
	case r = <-done:
	case <-time.After(patience):
		t.Fatal("a waiting Changes did not return the change written")
	}
	if r.err != nil || len(r.changes) == 0 || r.changes[0].DocumentID != "later" || r.changes[0].Op != collection.OpPut {
		t.Fatalf("waiting Changes returned %+v, %v", r.changes, r.err)
	}
	// Nothing new: an empty answer once the wait is over, and no sooner (a timer cannot fire early; the
	// slack is for a server that measures the wait itself).
	l, _ := s.LastChange(ctx)
	t0 := time.Now()
	none, err := s.Changes(ctx, l, 100, 200*time.Millisecond)
	check(t, err)
	if len(none) != 0 || time.Since(t0) < 150*time.Millisecond {
		t.Errorf("Changes with nothing new: %v after %v", none, time.Since(t0))
	}
	check(t, s.DeleteCollection(ctx, tenant, c.ID))
	got, err = s.Changes(ctx, l, 100, 0)
	check(t, err)
	if len(got) != 1 || got[0].Op != collection.OpDeleteCollection || got[0].CollectionID != c.ID {
		t.Fatalf("deleting the collection: changes %+v", got)
	}
}

func testConcurrentPuts(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				d, chunks := doc(c.ID, fmt.Sprintf("d%d-%d", w, i), "v1", 3)
				if _, err := s.PutDocument(ctx, tenant, d, chunks); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	docs, err := s.ListDocuments(ctx, tenant, c.ID)
	check(t, err)
	n := 0
	check(t, s.ScanChunks(ctx, tenant, c.ID, func(collection.Chunk) error { n++; return nil }))
	if len(docs) != 80 || n != 240 {
		t.Fatalf("%d documents and %d chunks, want 80 and 240", len(docs), n)
	}
}

func testUnicode(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, "テナント", "文書 {x}:y")
	text := "Привет, 世界! 🧵 nul:\x00 crlf:\r\n e\u0301"
	d := loom.Document{ID: "док/1 {a}", CollectionID: c.ID, Source: "ファイル.md", Hash: "h"}
	chunks := []collection.Chunk{{Chunk: loom.Chunk{ID: "док/1 {a}#0", DocumentID: d.ID, Content: text, EndOffset: len(text), Metadata: map[string]string{"ключ": text}}, Vector: []float32{1}}}
	_, err := s.PutDocument(ctx, "テナント", d, chunks)
	check(t, err)
	got, err := s.DocumentChunks(ctx, "テナント", c.ID, d.ID)
	check(t, err)
	if len(got) != 1 || got[0].Content != text || got[0].Metadata["ключ"] != text {
		t.Fatalf("unicode chunk = %+v", got)
	}
	if byName, err := s.GetCollection(ctx, "テナント", "文書 {x}:y"); err != nil || byName.ID != c.ID {
		t.Fatalf("GetCollection by a unicode name: %+v %v", byName, err)
	}
}

func testDeleteCollection(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	keep := create(t, s, tenant, "keep")
	for _, coll := range []loom.Collection{c, keep} {
		d, chunks := doc(coll.ID, "guide", "v1", 3)
		_, err := s.PutDocument(ctx, tenant, d, chunks)
		check(t, err)
	}
	check(t, s.DeleteCollection(ctx, tenant, c.ID))
	_, err := s.GetCollection(ctx, tenant, c.ID)
	wantErr(t, err, collection.ErrNotFound, "GetCollection after DeleteCollection")
	_, err = s.GetDocument(ctx, tenant, c.ID, "guide")
	wantErr(t, err, collection.ErrNotFound, "a document of a deleted collection")
	n := 0
	_ = s.ScanChunks(ctx, tenant, c.ID, func(collection.Chunk) error { n++; return nil })
	if n != 0 {
		t.Fatalf("a deleted collection still has %d chunks", n)
	}
	if chunks, err := s.DocumentChunks(ctx, tenant, keep.ID, "guide"); err != nil || len(chunks) != 3 {
		t.Fatalf("another collection lost its chunks: %d %v", len(chunks), err)
	}
	// The name is free again.
	create(t, s, tenant, "docs")
}

// testFeedTrimmed: a reader whose seq is older than what the feed still holds gets ErrFeedTrimmed, never the
// newer changes with a silent gap; a reader within the kept changes reads on without a gap.
func testFeedTrimmed(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	put := func(id string) {
		t.Helper()
		d, chunks := doc(c.ID, id, "v1", 1)
		_, err := s.PutDocument(ctx, tenant, d, chunks)
		check(t, err)
	}
	put("first")
	first, err := s.LastChange(ctx)
	check(t, err)
	const n = 30 * trimmedKept
	for i := range n {
		put(fmt.Sprintf("doc%03d", i))
	}
	_, err = s.Changes(ctx, first, 100, 0)
	wantErr(t, err, collection.ErrFeedTrimmed, "Changes after a trimmed seq")
	_, err = s.Changes(ctx, first, 100, time.Second)
	wantErr(t, err, collection.ErrFeedTrimmed, "waiting Changes after a trimmed seq")

	// The start of the feed is not an error: it is what is left, the newest changes in order.
	kept, err := s.Changes(ctx, "", 10*n, 0)
	check(t, err)
	if len(kept) < trimmedKept || len(kept) > n {
		t.Fatalf("the feed kept %d of %d changes with ChangesKept %d", len(kept), n+1, trimmedKept)
	}
	if last := kept[len(kept)-1]; last.DocumentID != fmt.Sprintf("doc%03d", n-1) {
		t.Fatalf("the feed's newest change is %+v", last)
	}
	// From a kept seq the rest comes whole.
	rest, err := s.Changes(ctx, kept[0].Seq, 10*n, 0)
	check(t, err)
	if !slices.Equal(rest, kept[1:]) {
		t.Fatalf("Changes after the oldest kept change: %d changes, want %d", len(rest), len(kept)-1)
	}
	last, err := s.LastChange(ctx)
	check(t, err)
	none, err := s.Changes(ctx, last, 100, 0)
	check(t, err)
	if len(none) != 0 {
		t.Fatalf("Changes after the newest: %+v", none)
	}
}

// testAllCollections: every tenant's collections, tenants whose ids need escaping included, and none that
// was deleted.
func testAllCollections(t *testing.T, s collection.Store) {
	ctx := t.Context()
	all, err := s.AllCollections(ctx)
	check(t, err)
	if len(all) != 0 {
		t.Fatalf("a fresh store has collections %v", all)
	}
	var want []collection.Ref
	for _, tn := range []string{tenant, "other", "we:ird {t}%20 ü"} {
		for _, name := range []string{"docs", "notes"} {
			c := create(t, s, tn, name)
			want = append(want, collection.Ref{Tenant: tn, ID: c.ID})
		}
	}
	gone := create(t, s, "other", "gone")
	check(t, s.DeleteCollection(ctx, "other", gone.ID))
	slices.SortFunc(want, collection.CompareRefs)
	all, err = s.AllCollections(ctx)
	check(t, err)
	if !slices.Equal(all, want) {
		t.Fatalf("AllCollections = %v, want %v", all, want)
	}
}
