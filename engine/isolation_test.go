package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store"
)

// allBackends are the memory store and the persistent backends.
func allBackends() []backend {
	return append([]backend{{name: "memory", open: func(testing.TB) *store.Store { return newMemory() }}}, backends...)
}

// scoreLines are the results of a retrieval, one a line, every float as its bits: equal lines are
// bit-identical.
func scoreLines(rs []retriever.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%d %s score=%.6g (%x) keyword=%x rank %d vector=%x rank %d", r.Rank, r.Chunk.ID, r.Score, math.Float64bits(r.Score),
			math.Float64bits(r.Keyword), r.KeywordRank, math.Float64bits(r.Vector), r.VectorRank)
	}
	return out
}

// TestRetrieve_ScoresAreTheTenantsAlone: a tenant's keyword and hybrid scores, and their order, are
// bit-identical before and after another tenant ingests documents of the same words into a collection of
// the same name and id, on every store (SQLite's FTS5 index counted every tenant's documents in its BM25
// statistics).
func TestRetrieve_ScoresAreTheTenantsAlone(t *testing.T) {
	t.Parallel()
	for _, b := range allBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			eng, err := testEngine(st)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			victim := loom.WithTenant(t.Context(), "globex")
			c, err := eng.CreateCollection(victim, loom.Collection{ID: "shared-id", Name: "fruit", ChunkSize: 64})
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range []string{
				"The kumquat is a small citrus fruit eaten whole, peel and all.",
				"Oranges and lemons are citrus fruit; the kumquat is their small cousin.",
				"Apples grow in cool climates and keep for months in a cellar.",
				"A kumquat tree flowers in summer.",
			} {
				if _, err := eng.IngestText(victim, c.ID, fmt.Sprintf("fruit-%d.txt", i), "", "", text, nil); err != nil {
					t.Fatal(err)
				}
			}
			queries := []struct{ text, mode string }{
				{"kumquat", engine.ModeKeyword}, {"small citrus kumquat", engine.ModeKeyword},
				{"kumquat", engine.ModeHybrid}, {"citrus fruit", engine.ModeHybrid},
			}
			retrieve := func() [][]string {
				var out [][]string
				for _, q := range queries {
					rs, err := eng.Retrieve(victim, q.text, engine.WithCollection(c.ID), engine.WithMode(q.mode))
					if err != nil {
						t.Fatal(err)
					}
					if len(rs) == 0 {
						t.Fatalf("%s %q found nothing", q.mode, q.text)
					}
					out = append(out, scoreLines(rs))
				}
				return out
			}
			before := retrieve()

			// Another tenant: the same collection name and id, the same words, many times over.
			attacker := loom.WithTenant(t.Context(), "acme")
			ac, err := eng.CreateCollection(attacker, loom.Collection{ID: "shared-id", Name: "fruit", ChunkSize: 64})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				text := strings.Repeat("kumquat small citrus fruit ", 1+i%5) + fmt.Sprint("note ", i)
				if _, err := eng.IngestText(attacker, ac.ID, fmt.Sprintf("fruit-%d.txt", i), "", "", text, nil); err != nil {
					t.Fatal(err)
				}
			}
			// The attacker's own collection ranks them: the collections are really both in the store.
			if rs, err := eng.Retrieve(attacker, "kumquat", engine.WithCollection(ac.ID), engine.WithMode(engine.ModeKeyword), engine.WithTopK(50)); err != nil || len(rs) != 40 {
				t.Fatalf("the other tenant's collection: %d results, %v", len(rs), err)
			}
			after := retrieve()
			// And an engine that builds its index from the store afresh (another server, or a restart).
			fresh, err := testEngine(st)
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			eng = fresh
			rebuilt := retrieve()
			for i, q := range queries {
				for what, got := range map[string][]string{"after the other tenant's ingestion": after[i], "from a fresh index": rebuilt[i]} {
					if strings.Join(got, "\n") != strings.Join(before[i], "\n") {
						t.Errorf("%s %q %s:\n%s\nbefore:\n%s", q.mode, q.text, what, strings.Join(got, "\n"), strings.Join(before[i], "\n"))
					}
				}
			}
		})
	}
}

// TestRetrieve_CJKKeywords: a keyword query in Chinese or Japanese finds its document on every store, by
// the retriever's one analyzer (SQLite's FTS5 tokenizer found nothing for 首都), and so does a query with
// or without accents (the analyzer folds them).
func TestRetrieve_CJKKeywords(t *testing.T) {
	t.Parallel()
	for _, b := range allBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			eng, err := testEngine(b.open(t))
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			ctx := loom.WithTenant(t.Context(), "acme")
			c, err := eng.CreateCollection(ctx, loom.Collection{Name: "places"})
			if err != nil {
				t.Fatal(err)
			}
			for id, text := range map[string]string{
				"tokyo.txt": "東京は日本の首都です。",
				"kyoto.txt": "京都には古い寺がたくさんあります。",
				"paris.txt": "Paris is the capital of France.",
				"cafe.txt":  "Un cafe\u0301 cre\u0300me, s'il vous plaît.",
			} {
				if _, err := eng.IngestText(ctx, c.ID, id, "", "", text, nil); err != nil {
					t.Fatal(err)
				}
			}
			for q, want := range map[string]string{"首都": "tokyo.txt", "古い寺": "kyoto.txt", "capital": "paris.txt", "cafe": "cafe.txt", "CAFÉ crème": "cafe.txt", "plait": "cafe.txt"} {
				rs, err := eng.Retrieve(ctx, q, engine.WithCollection(c.ID), engine.WithMode(engine.ModeKeyword))
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) == 0 || rs[0].Chunk.DocumentID != want {
					t.Errorf("keyword %q: %v, want %s first", q, scoreLines(rs), want)
				}
			}
		})
	}
}

// countingChunker counts its calls.
type countingChunker struct{ calls atomic.Int64 }

func (c *countingChunker) Chunk(ctx context.Context, text string, o *chunker.Options) ([]chunker.ChunkResult, error) {
	c.calls.Add(1)
	return chunker.NewRecursive().Chunk(ctx, text, o)
}

// TestIngest_MetadataLimits: a document's metadata over the store's limits is refused with ErrTooLarge
// (the server's 413) before any chunking, on every store; within them, every chunk retrieved shows the
// document's metadata with its own.
func TestIngest_MetadataLimits(t *testing.T) {
	t.Parallel()
	for _, b := range allBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ck := &countingChunker{}
			eng, err := testEngine(b.open(t), engine.WithChunker(ck))
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			ctx := loom.WithTenant(t.Context(), "acme")
			c, err := eng.CreateCollection(ctx, loom.Collection{Name: "docs", ChunkSize: 32})
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Repeat("Plain words for a few chunks. ", 40)
			for what, meta := range map[string]map[string]string{
				"1 MiB of metadata": {"blob": strings.Repeat("x", 1<<20)},
				"a byte over":       {"blob": strings.Repeat("x", store.DefaultMaxMetadataBytes-len("blob")+1)},
				"a key over":        keys(store.DefaultMaxMetadataKeys + 1),
			} {
				_, err := eng.IngestText(ctx, c.ID, "big.txt", "", "", text, meta)
				if !errors.Is(err, store.ErrTooLarge) {
					t.Errorf("%s: %v, want ErrTooLarge", what, err)
				}
			}
			if n := ck.calls.Load(); n != 0 {
				t.Errorf("the refused documents were chunked %d times", n)
			}
			// Within the limits (with what ingestion adds: source, format): stored, and shown by every chunk.
			meta := map[string]string{"blob": strings.Repeat("y", store.DefaultMaxMetadataBytes-200), "team": "docs"}
			r, err := eng.IngestText(ctx, c.ID, "ok.txt", "ok.txt", "", text, meta)
			if err != nil || r.Chunks < 3 {
				t.Fatalf("metadata within the limits: %+v, %v", r, err)
			}
			rs, err := eng.Retrieve(ctx, "plain words", engine.WithCollection(c.ID), engine.WithTopK(100), engine.WithFilter(map[string]string{"team": "docs"}))
			if err != nil || len(rs) != r.Chunks {
				t.Fatalf("filtered by the document's metadata: %d results of %d chunks, %v", len(rs), r.Chunks, err)
			}
			for _, res := range rs {
				if res.Chunk.Metadata["blob"] != meta["blob"] || res.Chunk.Metadata["source"] != "ok.txt" {
					t.Fatalf("chunk %s metadata lacks the document's: %v", res.Chunk.ID, slices.Collect(maps.Keys(res.Chunk.Metadata)))
				}
			}
			// A result's metadata is the caller's to change.
			rs[0].Chunk.Metadata["team"] = "changed"
			again, err := eng.Retrieve(ctx, "plain words", engine.WithCollection(c.ID), engine.WithTopK(100), engine.WithFilter(map[string]string{"team": "docs"}))
			if err != nil || len(again) != r.Chunks {
				t.Fatalf("after changing a result's metadata: %d results, %v", len(again), err)
			}
		})
	}
}

// keys returns metadata of n short keys.
func keys(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprint("k", i)] = "v"
	}
	return m
}
