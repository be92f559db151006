package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
)

// manual is a small Markdown manual; each section answers one question.
const manual = `# Acme Cloud manual

## Billing

Invoices are issued on the first day of each month. Premium costs twenty dollars a month, billed yearly
at a discount of two months.

## Passwords

To reset a forgotten password, open the sign-in page and follow the "Forgot password" link; the reset
email expires after thirty minutes.

## Storage

Every account stores up to fifty gigabytes. Files larger than five gigabytes must be uploaded in parts.
`

// newCollectionsEngine returns an engine over a fresh store that keeps collections, with a collection
// "manual" holding the manual.
func newCollectionsEngine(t *testing.T, st *store.Store, opts ...engine.Option) (*engine.Engine, loom.Collection) {
	t.Helper()
	eng, err := testEngine(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ctx := loom.WithTenant(t.Context(), "acme")
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "manual", ChunkSize: 40})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.IngestText(ctx, c.ID, "manual.md", "manual.md", "", manual, nil); err != nil {
		t.Fatal(err)
	}
	return eng, c
}

// RunCollections checks ingestion and retrieval on a store that keeps collections.
func RunCollections(t *testing.T, st *store.Store) {
	eng, c := newCollectionsEngine(t, st)
	ctx := loom.WithTenant(t.Context(), "acme")
	if c.ChunkStrategy != engine.StrategyAuto || c.ChunkSize != 40 || c.ChunkOverlap != 8 || c.Embedder == "" {
		t.Errorf("the collection's defaults: %+v", c)
	}
	byName, err := eng.Collection(ctx, "manual")
	if err != nil || byName.ID != c.ID {
		t.Fatalf("Collection by name: %+v %v", byName, err)
	}
	for _, mode := range []string{engine.ModeHybrid, engine.ModeKeyword, engine.ModeVector, engine.ModeMMR} {
		res, err := eng.Retrieve(ctx, "how do I reset a forgotten password", engine.WithCollection("manual"), engine.WithTopK(3), engine.WithMode(mode))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(res) == 0 {
			t.Fatalf("%s: no results", mode)
		}
		top := res[0].Chunk
		if !strings.Contains(top.Content, "Forgot password") {
			t.Errorf("%s: the best result is %q", mode, top.Content)
		}
		if top.DocumentID != "manual.md" || top.Metadata["source"] != "manual.md" || !strings.HasPrefix(top.ID, "manual.md#") ||
			manual[top.StartOffset:top.EndOffset] != top.Content || res[0].Kind == "" || res[0].Rank != 1 {
			t.Errorf("%s: the result lost its identity: %+v %+v", mode, res[0], top)
		}
	}
	// Idempotent: the same bytes again change nothing.
	r, err := eng.IngestText(ctx, c.ID, "manual.md", "manual.md", "", manual, nil)
	if err != nil || r.Changed {
		t.Fatalf("re-ingesting the same document: %+v %v", r, err)
	}
	// An update replaces the old chunks.
	updated := strings.ReplaceAll(manual, "thirty minutes", "ninety seconds")
	if r, err = eng.IngestText(ctx, c.ID, "manual.md", "manual.md", "", updated, nil); err != nil || !r.Changed {
		t.Fatalf("updating: %+v %v", r, err)
	}
	res, err := eng.Retrieve(ctx, "reset email expires", engine.WithCollection(c.ID), engine.WithTopK(10), engine.WithMode(engine.ModeKeyword))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if strings.Contains(x.Chunk.Content, "thirty minutes") {
			t.Fatal("an old chunk is still retrieved after the update")
		}
	}
	if len(res) == 0 || !strings.Contains(res[0].Chunk.Content, "ninety seconds") {
		t.Fatalf("the updated chunk is not retrieved: %+v", res)
	}
	// Filters.
	if _, err := eng.IngestText(ctx, c.ID, "faq.txt", "faq.txt", "", "Passwords must have twelve characters.", map[string]string{"team": "security"}); err != nil {
		t.Fatal(err)
	}
	res, err = eng.Retrieve(ctx, "password", engine.WithCollection(c.ID), engine.WithFilter(map[string]string{"team": "security"}))
	if err != nil || len(res) != 1 || res[0].Chunk.DocumentID != "faq.txt" {
		t.Fatalf("a filtered retrieval: %+v %v", res, err)
	}
	// Delete.
	if err := eng.DeleteDocument(ctx, c.ID, "faq.txt"); err != nil {
		t.Fatal(err)
	}
	res, _ = eng.Retrieve(ctx, "twelve characters", engine.WithCollection(c.ID), engine.WithMode(engine.ModeKeyword))
	for _, x := range res {
		if x.Chunk.DocumentID == "faq.txt" {
			t.Fatal("a deleted document is retrieved")
		}
	}
	// Another tenant cannot reach the collection, by name or id.
	other := loom.WithTenant(t.Context(), "globex")
	for _, key := range []string{"manual", c.ID} {
		if _, err := eng.Retrieve(other, "password", engine.WithCollection(key)); !errors.Is(err, collection.ErrNotFound) {
			t.Errorf("globex retrieving from acme's collection %q: %v", key, err)
		}
	}
	// Assembling with retrieval cites the chunks.
	out, err := eng.Assemble(ctx, engine.Request{Retrieve: &engine.RetrieveRequest{Collection: "manual", TopK: 2},
		Request: assembler.Request{Message: "How much is premium?", MaxTokens: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Citations) == 0 || out.Citations[0].DocumentID != "manual.md" || out.Citations[0].Source != "manual.md" ||
		!strings.Contains(out.Context, "twenty dollars") || !strings.Contains(out.Context, `source="manual.md"`) {
		t.Fatalf("assembly with retrieval: citations %+v context %q", out.Citations, out.Context)
	}
	if _, err := eng.Assemble(ctx, engine.Request{Retrieve: &engine.RetrieveRequest{Collection: "nope"},
		Request: assembler.Request{Message: "hi"}}); !errors.Is(err, collection.ErrNotFound) {
		t.Errorf("assembly retrieving from a missing collection: %v", err)
	}
	// Deleting the collection.
	if err := eng.DeleteCollection(ctx, "manual"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Retrieve(ctx, "password", engine.WithCollection(c.ID)); !errors.Is(err, collection.ErrNotFound) {
		t.Errorf("retrieving from a deleted collection: %v", err)
	}
}

func TestCollections_Memory(t *testing.T) {
	t.Parallel()
	st := newMemory()
	defer st.Close()
	RunCollections(t, st)
}

func TestCollections_Backends(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			defer st.Close()
			RunCollections(t, st)
		})
	}
}

// TestCollections_Limits: an overlap of -1 means none, and a document that would make more chunks than the
// limit is refused as too large, leaving nothing stored.
func TestCollections_Limits(t *testing.T) {
	t.Parallel()
	eng, err := testEngine(newMemory(), engine.WithMaxDocumentChunks(5))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "tight", ChunkStrategy: "fixed", ChunkSize: engine.MinChunkSize, ChunkOverlap: -1})
	if err != nil || c.ChunkOverlap != 0 {
		t.Fatalf("CreateCollection with overlap -1 = %+v, %v", c, err)
	}
	text := strings.Repeat("word ", 4*engine.MinChunkSize) // about four chunks
	if r, err := eng.IngestText(ctx, c.ID, "ok.txt", "", "", text, nil); err != nil || r.Chunks < 2 || r.Chunks > 5 {
		t.Fatalf("a document of ~4 chunks: %+v, %v", r, err)
	}
	res, err := eng.Retrieve(ctx, "word", engine.WithCollection(c.ID), engine.WithTopK(10), engine.WithMode(engine.ModeKeyword))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(res, func(a, b retriever.Result) int { return a.Chunk.StartOffset - b.Chunk.StartOffset })
	for i := 1; i < len(res); i++ {
		if res[i].Chunk.StartOffset < res[i-1].Chunk.EndOffset {
			t.Errorf("chunks overlap with overlap -1: %d-%d and %d-%d", res[i-1].Chunk.StartOffset, res[i-1].Chunk.EndOffset, res[i].Chunk.StartOffset, res[i].Chunk.EndOffset)
		}
	}
	_, err = eng.IngestText(ctx, c.ID, "big.txt", "", "", strings.Repeat(text, 3), nil)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a document of ~12 chunks with a limit of 5: %v, want ErrTooLarge", err)
	}
	if docs, _ := eng.Documents(ctx, c.ID); len(docs) != 1 {
		t.Errorf("after the refused document: %d documents", len(docs))
	}
}

func TestCollections_BadInput(t *testing.T) {
	t.Parallel()
	eng, c := newCollectionsEngine(t, newMemory())
	ctx := loom.WithTenant(t.Context(), "acme")
	for name, coll := range map[string]loom.Collection{
		"overlap over size": {Name: "a", ChunkSize: 20, ChunkOverlap: 20},
		"size below least":  {Name: "e", ChunkSize: engine.MinChunkSize - 1},
		"unknown strategy":  {Name: "b", ChunkStrategy: "magic"},
		"unknown embedder":  {Name: "c", Embedder: "nope"},
		"negative size":     {Name: "d", ChunkSize: -1},
	} {
		if _, err := eng.CreateCollection(ctx, coll); !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := eng.CreateCollection(ctx, loom.Collection{Name: "manual"}); !errors.Is(err, collection.ErrExists) {
		t.Errorf("a second collection named manual: %v", err)
	}
	for name, opts := range map[string][]engine.RetrieveOption{
		"no collection":  nil,
		"top k over max": {engine.WithCollection(c.ID), engine.WithTopK(engine.MaxTopK + 1)},
	} {
		if _, err := eng.Retrieve(ctx, "x", opts...); !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The query's settings are checked by the retriever's rules, and refused as the caller's error.
	for name, opt := range map[string]engine.RetrieveOption{
		"bad mode":      engine.WithMode("psychic"),
		"top k":         engine.WithTopK(-1),
		"min score":     engine.WithMinScore(2),
		"NaN min score": engine.WithMinScore(math.NaN()),
		"lambda":        engine.WithMMRLambda(-0.5),
	} {
		_, err := eng.Retrieve(ctx, "x", engine.WithCollection(c.ID), opt)
		if !errors.Is(err, engine.ErrInvalidRequest) || !errors.Is(err, retriever.ErrInvalidQuery) {
			t.Errorf("%s: %v, want ErrInvalidRequest and retriever.ErrInvalidQuery", name, err)
		}
	}
	if _, err := eng.IngestText(ctx, c.ID, "x", "x", "pdf", "text", nil); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("an unknown content type: %v", err)
	}
	if _, err := eng.IngestText(ctx, c.ID, "bin", "bin.txt", "", "a\x00b", nil); !errors.Is(err, ingest.ErrBinary) {
		t.Errorf("binary text: %v", err)
	}
	noColls, _ := testEngine(over(struct{ store.Backend }{newMemory().Backend()})) // no store.CollectionBackend
	if _, err := noColls.Collections(ctx); !errors.Is(err, engine.ErrNoCollections) {
		t.Errorf("a store without collections: %v", err)
	}
}

// sentenceChunker is a custom chunker: one chunk per line.
type sentenceChunker struct{}

func (sentenceChunker) Chunk(_ context.Context, text string, _ *chunker.Options) ([]chunker.ChunkResult, error) {
	var out []chunker.ChunkResult
	start := 0
	for i, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			out = append(out, chunker.ChunkResult{Content: line, Index: i, StartOffset: start, EndOffset: start + len(line), TokenCount: len(line) / 4})
		}
		start += len(line)
	}
	return out, nil
}

func TestCollections_WithChunker(t *testing.T) {
	t.Parallel()
	eng, err := testEngine(newMemory(), engine.WithChunker(sentenceChunker{}))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := t.Context() // the default tenant
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "lines"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ChunkStrategy != engine.StrategyCustom {
		t.Fatalf("strategy %q, want the registered custom chunker", c.ChunkStrategy)
	}
	r, err := eng.IngestText(ctx, c.ID, "t", "t.txt", "", "one line\nanother line\nthird\n", nil)
	if err != nil || r.Chunks != 3 {
		t.Fatalf("ingest with the custom chunker: %+v %v", r, err)
	}
}

// TestCollections_TwoEngines checks that a document ingested through one engine becomes retrievable through
// another on the same store, by the change feed.
func TestCollections_TwoEngines(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st1, st2 := b.openPair(t)
			a, _ := newCollectionsEngine(t, st1)
			bEng, err := testEngine(st2)
			if err != nil {
				t.Fatal(err)
			}
			defer bEng.Close()
			ctx := loom.WithTenant(t.Context(), "acme")
			// b loads its index (and starts following) before the new document exists.
			if _, err := bEng.Retrieve(ctx, "password", engine.WithCollection("manual")); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := a.IngestText(ctx, "manual", "news.md", "news.md", "", "# News\n\nThe zeppelin service launches in March.", nil); err != nil {
				t.Fatal(err)
			}
			for {
				res, err := bEng.Retrieve(ctx, "zeppelin service", engine.WithCollection("manual"), engine.WithMode(engine.ModeKeyword))
				if err != nil {
					t.Fatal(err)
				}
				if len(res) > 0 && res[0].Chunk.DocumentID == "news.md" {
					t.Logf("retrievable through the other engine after %v", time.Since(start))
					break
				}
				if time.Since(start) > 2*time.Minute { // a hang: the follower waits on the feed a second at a time
					t.Fatal("not retrievable through the other engine within two minutes")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestCollections_SelectiveFilter: a filter that keeps one document out of hundreds that match the query
// better still finds that document's matching chunk, in every mode, on every backend (the filter applies
// before the ranking, never to its best candidates alone).
func TestCollections_SelectiveFilter(t *testing.T) {
	t.Parallel()
	for _, b := range append([]backend{{name: "memory", open: func(testing.TB) *store.Store { return newMemory() }}}, backends...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			eng, err := testEngine(b.open(t))
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			ctx := loom.WithTenant(t.Context(), "acme")
			c, err := eng.CreateCollection(ctx, loom.Collection{Name: "many", ChunkSize: 40})
			if err != nil {
				t.Fatal(err)
			}
			var docs []ingest.Document
			for i := range 300 {
				docs = append(docs, ingest.Document{ID: fmt.Sprintf("short%03d.txt", i), ContentType: ingest.TypeText,
					Text: fmt.Sprintf("Common common words, note %d.", i)})
			}
			long := strings.Repeat("Unrelated filler about rivers and hills and the weather in spring. ", 20) +
				"One common word appears here, at the end."
			docs = append(docs, ingest.Document{ID: "zz_target.txt", ContentType: ingest.TypeText, Text: long})
			if _, err := eng.Ingest(ctx, c.ID, docs...); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []string{engine.ModeKeyword, engine.ModeHybrid} {
				res, err := eng.Retrieve(ctx, "common", engine.WithCollection(c.ID), engine.WithMode(mode),
					engine.WithFilter(map[string]string{retriever.FilterDocumentID: "zz_target.txt"}))
				if err != nil {
					t.Fatal(err)
				}
				if len(res) == 0 || !strings.Contains(res[0].Chunk.Content, "common word") {
					t.Errorf("%s: the filtered document's matching chunk is not first: %+v", mode, res)
				}
			}
		})
	}
}

// countedScans is a backend that counts the index builds (ScanChunks calls) made on it.
type countedScans struct {
	store.Backend
	store.CollectionBackend
	scans atomic.Int64
}

func (c *countedScans) ScanChunks(ctx context.Context, tenant, collectionID string, fn func(collection.Chunk) error) error {
	c.scans.Add(1)
	return c.CollectionBackend.ScanChunks(ctx, tenant, collectionID, fn)
}

// TestCollections_WarmIndexes: an engine told to warm collections of two tenants builds one index each,
// retrieves without building again, and follows the changes made after.
func TestCollections_WarmIndexes(t *testing.T) {
	t.Parallel()
	for _, b := range append([]backend{{name: "memory", openPair: func(testing.TB) (*store.Store, *store.Store) {
		m := newMemory()
		return m, m
	}}}, backends...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st1, st2 := b.openPair(t)
			a, _ := newCollectionsEngine(t, st1) // acme's "manual"
			other := loom.WithTenant(t.Context(), "other")
			if _, err := a.CreateCollection(other, loom.Collection{Name: "notes"}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.IngestText(other, "notes", "n.md", "n.md", "", "The zeppelin leaves at noon.", nil); err != nil {
				t.Fatal(err)
			}
			counted := &countedScans{Backend: st2.Backend(), CollectionBackend: st2.Backend().(store.CollectionBackend)}
			bEng, err := testEngine(over(counted))
			if err != nil {
				t.Fatal(err)
			}
			defer bEng.Close()
			if err := bEng.WarmIndexes(t.Context(), collection.Ref{Tenant: "acme", ID: "manual"}, collection.Ref{Tenant: "other", ID: "notes"}); err != nil {
				t.Fatal(err)
			}
			if s := bEng.IndexStats(); s.Loaded != 2 || s.Builds != 2 || s.MemoryBytes <= 0 {
				t.Fatalf("after warming 2 collections: %+v", s)
			}
			if got := counted.scans.Load(); got != 2 {
				t.Fatalf("WarmIndexes made %d scans for 2 collections", got)
			}
			acme := loom.WithTenant(t.Context(), "acme")
			for ctx, q := range map[context.Context]string{acme: "password reset", other: "zeppelin"} {
				res, err := bEng.Retrieve(ctx, q, engine.WithCollection(map[context.Context]string{acme: "manual", other: "notes"}[ctx]))
				if err != nil || len(res) == 0 {
					t.Fatalf("Retrieve %q = %v, %v", q, res, err)
				}
			}
			if got := counted.scans.Load(); got != 2 {
				t.Errorf("retrievals after WarmIndexes built again: %d scans", got)
			}
			if _, err := a.IngestText(other, "notes", "later.md", "later.md", "", "The airship is delayed.", nil); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
				res, err := bEng.Retrieve(other, "airship", engine.WithCollection("notes"), engine.WithMode(engine.ModeKeyword))
				if err != nil {
					t.Fatal(err)
				}
				if len(res) > 0 && res[0].Chunk.DocumentID == "later.md" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("a document ingested after WarmIndexes is not retrievable")
				}
			}
		})
	}
}

// pausedFeed is a backend whose change feed reads wait until released: an engine on it falls behind.
type pausedFeed struct {
	*memory.Backend
	release chan struct{}
}

func (p *pausedFeed) Changes(ctx context.Context, after string, limit int, wait time.Duration) ([]collection.Change, error) {
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.Backend.Changes(ctx, after, limit, wait)
}

// TestCollections_FollowerFallsBehind: an engine whose follower falls further behind than the feed keeps
// rebuilds its index instead of following on with a gap: a document deleted and documents added while it
// was away are gone and present when it catches up, and it follows on normally after.
func TestCollections_FollowerFallsBehind(t *testing.T) {
	t.Parallel()
	mem, err := memory.Open(t.Context(), memory.Options{Options: store.Options{ChangesKept: 10}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := newCollectionsEngine(t, mem)
	paused := &pausedFeed{Backend: memoryOf(mem), release: make(chan struct{})}
	b, err := testEngine(over(paused))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	keyword := func(eng *engine.Engine, q string) []string {
		t.Helper()
		res, err := eng.Retrieve(ctx, q, engine.WithCollection("manual"), engine.WithMode(engine.ModeKeyword))
		if err != nil {
			t.Fatal(err)
		}
		var docs []string
		for _, r := range res {
			docs = append(docs, r.Chunk.DocumentID)
		}
		return docs
	}
	if got := keyword(b, "password reset"); !slices.Contains(got, "manual.md") { // b loads the index and follows
		t.Fatalf("b before: %v", got)
	}
	// While b's follower waits, far more changes than the feed keeps.
	if err := a.DeleteDocument(ctx, "manual", "manual.md"); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := a.IngestText(ctx, "manual", fmt.Sprintf("news%02d.md", i), "", "", fmt.Sprintf("Airship%02d departs at dawn.", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	close(paused.release)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("b: %s", what)
			}
		}
	}
	waitFor("the deleted manual is still retrievable", func() bool { return !slices.Contains(keyword(b, "password reset"), "manual.md") })
	for _, q := range []string{"airship00", "airship17", "airship49"} {
		want := "news" + q[len(q)-2:] + ".md"
		waitFor(want+" is not retrievable", func() bool { return slices.Contains(keyword(b, q), want) })
	}
	// The follower counts its rebuild just after it swaps the new index in: wait for the count.
	waitFor("b's rebuild is not counted once", func() bool { return engine.Resyncs(b) == 1 })
	// Following on: a new document arrives through the feed.
	if _, err := a.IngestText(ctx, "manual", "late.md", "", "", "The zeppelin is late.", nil); err != nil {
		t.Fatal(err)
	}
	waitFor("late.md is not retrievable", func() bool { return slices.Contains(keyword(b, "zeppelin"), "late.md") })
}

// TestRetrievalQuality ingests the Go specification (a public manual we did not write, as HTML) and asks 30
// questions whose answer sits in one place of it; a question is answered when a chunk among the first five
// holds the answer's words. It reports hit@5 per mode.
func TestRetrievalQuality(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "go_spec.html"))
	if err != nil {
		t.Fatal(err)
	}
	var questions []struct{ Q, A string }
	data, err := os.ReadFile(filepath.Join("testdata", "go_spec_questions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &questions); err != nil {
		t.Fatal(err)
	}
	doc, err := ingest.Read("go_spec.html", raw)
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(doc.Text), " ")
	for _, q := range questions {
		if !strings.Contains(strings.ToLower(flat), strings.ToLower(q.A)) {
			t.Fatalf("the answer %q is not in the extracted text", q.A)
		}
	}
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := t.Context()
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "spec", ChunkSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Ingest(ctx, c.ID, doc); err != nil {
		t.Fatal(err)
	}
	hits := map[string]int{}
	modes := []string{engine.ModeHybrid, engine.ModeKeyword, engine.ModeVector, engine.ModeMMR}
	for _, q := range questions {
		for _, mode := range modes {
			res, err := eng.Retrieve(ctx, q.Q, engine.WithCollection(c.ID), engine.WithTopK(5), engine.WithMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(res, func(r retriever.Result) bool {
				return strings.Contains(strings.ToLower(strings.Join(strings.Fields(r.Chunk.Content), " ")), strings.ToLower(q.A))
			}) {
				hits[mode]++
			}
		}
	}
	var report []string
	for _, mode := range modes {
		report = append(report, fmt.Sprintf("%s %d/%d", mode, hits[mode], len(questions)))
	}
	t.Logf("hit@5 on the Go specification: %s", strings.Join(report, ", "))
	// Floors well under what the modes reach, so that a regression (a broken index, lost chunks, offsets
	// off) fails while the figures themselves are reported, not asserted.
	if hits[engine.ModeHybrid] < len(questions)/2 || hits[engine.ModeKeyword] < len(questions)/3 {
		t.Errorf("retrieval quality fell: %s", strings.Join(report, ", "))
	}
}

// TestCollections_AfterClose: once the engine is closed no index is built and no follower started:
// retrievals and WarmIndexes fail with ErrClosed.
func TestCollections_AfterClose(t *testing.T) {
	t.Parallel()
	eng, c := newCollectionsEngine(t, newMemory())
	eng.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	if _, err := eng.Retrieve(ctx, "password", engine.WithCollection(c.ID)); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Retrieve after Close: %v, want ErrClosed", err)
	}
	if err := eng.WarmIndexes(t.Context(), collection.Ref{Tenant: "acme", ID: c.ID}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("WarmIndexes after Close: %v, want ErrClosed", err)
	}
}

// limitChunker records the MaxChunks it is given and makes chunks until it passes it, as the built-in
// strategies do.
type limitChunker struct{ got *int }

func (c limitChunker) Chunk(_ context.Context, text string, opts *chunker.Options) ([]chunker.ChunkResult, error) {
	*c.got = opts.MaxChunks
	var out []chunker.ChunkResult
	for i := range len(text) {
		if opts.MaxChunks > 0 && len(out) == opts.MaxChunks {
			return nil, fmt.Errorf("after %d: %w", len(out), chunker.ErrTooManyChunks)
		}
		out = append(out, chunker.ChunkResult{Content: text[i : i+1], Index: i, StartOffset: i, EndOffset: i + 1, TokenCount: 1})
	}
	return out, nil
}

// TestCollections_ChunkerStopsAtTheLimit: ingestion tells the chunker the document's chunk limit, so a
// document that makes too many chunks is refused as soon as the chunker passes it, as too large.
func TestCollections_ChunkerStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	var got int
	eng, err := testEngine(newMemory(), engine.WithMaxDocumentChunks(7), engine.WithChunker(limitChunker{&got}))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "limited"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.IngestText(ctx, c.ID, "big.txt", "", "", strings.Repeat("x", 100), nil)
	if got != 7 {
		t.Errorf("the chunker was given MaxChunks %d, want the document limit 7", got)
	}
	if !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("a document past the limit: %v, want store.ErrTooLarge", err)
	}
}

// TestIngestText_TheTypeGivenIsKept: the content type IngestText is given is the document's, whatever its
// source's extension or its first bytes, and its source keeps its name.
func TestIngestText_TheTypeGivenIsKept(t *testing.T) {
	t.Parallel()
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "typed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ id, source, contentType, text, want string }{
		{"a", "notes.md", ingest.TypeText, "# Not a heading, a line of text", ingest.TypeText},
		{"b", "page.txt", ingest.TypeText, "<!doctype html><p>text about html</p>", ingest.TypeText},
		{"c", "page.html", ingest.TypeMarkdown, "# A heading\n\nbody", ingest.TypeMarkdown},
		{"d", "", ingest.TypeHTML, "<h1>Title</h1><p>body</p>", ingest.TypeHTML},
		{"e", "guess.md", "", "# Detected", ingest.TypeMarkdown},
	} {
		if _, err := eng.IngestText(ctx, c.ID, tt.id, tt.source, tt.contentType, tt.text, nil); err != nil {
			t.Fatalf("%s: %v", tt.id, err)
		}
		d, err := eng.Documents(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(d, func(d loom.Document) bool { return d.ID == tt.id })
		if i < 0 || d[i].ContentType != tt.want || d[i].Source != tt.source {
			t.Errorf("%s (%s given as %q): %+v, want type %q", tt.id, tt.source, tt.contentType, d, tt.want)
		}
	}
	if _, err := eng.IngestText(ctx, c.ID, "f", "notes.txt", ingest.TypeCode, "x", nil); !errors.Is(err, engine.ErrInvalidRequest) || !errors.Is(err, ingest.ErrContentType) {
		t.Errorf("code without a language: %v", err)
	}
}
