package retriever

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/tokenizer"
)

// heapCounted checks that the memory the writes counted is what counting the index again finds.
func heapCounted(t *testing.T, ix *Index, after string) {
	t.Helper()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	got := ix.heap
	ix.recount()
	if got != ix.heap {
		t.Errorf("after %s: the writes counted %d bytes, counting again finds %d", after, got, ix.heap)
	}
}

// TestMemoryBytes_CountedAsWritten: the memory each write adds and each removal frees is what counting the
// whole index finds, through additions, replacements, removals and compactions; MemoryBytes grows with
// the index and falls when a compaction drops dead chunks.
func TestMemoryBytes_CountedAsWritten(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{HNSWThreshold: 50})
	t.Cleanup(func() { ix.Close(context.Background()) })
	if got := ix.MemoryBytes(); got != 0 {
		t.Errorf("an empty index holds %d bytes", got)
	}
	chunks := corpusChunks(t, 300)
	for i := 0; i < 200; i += 10 {
		if err := ix.Add(chunks[i : i+10]...); err != nil {
			t.Fatal(err)
		}
	}
	heapCounted(t, ix, "additions")
	if err := ix.WaitGraph(t.Context()); err != nil {
		t.Fatal(err)
	}
	full := ix.MemoryBytes()
	if full <= 0 {
		t.Fatalf("200 chunks hold %d bytes", full)
	}
	// The same documents again with other metadata: every chunk replaced, the documents' metadata too.
	for i := range 100 {
		c := chunks[i]
		c.DocumentMetadata = map[string]string{"team": fmt.Sprint("t", i%7)}
		if err := ix.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	heapCounted(t, ix, "replacements")
	for d := range 15 {
		ix.RemoveDocument(fmt.Sprintf("d%d", d))
	}
	heapCounted(t, ix, "removals and compactions")
	if err := ix.Add(chunks[200:]...); err != nil {
		t.Fatal(err)
	}
	heapCounted(t, ix, "additions after a compaction")
	if err := ix.WaitGraph(t.Context()); err != nil {
		t.Fatal(err)
	}
	for d := range 30 {
		ix.RemoveDocument(fmt.Sprintf("d%d", d))
	}
	heapCounted(t, ix, "removing all")
	if got := ix.MemoryBytes(); got >= full {
		t.Errorf("after removing every document the index holds %d bytes, as much as with 200 chunks (%d)", got, full)
	}
}

// heapAlloc returns the bytes of live heap objects after a collection.
func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryBytes_AgreesWithTheHeap: an index of real text with Lexical vectors and an HNSW graph
// estimates within 30% the growth of the heap that building it caused. Not parallel: the heap is the
// process's.
func TestMemoryBytes_AgreesWithTheHeap(t *testing.T) {
	n := 2000
	if raceEnabled {
		n = 500
	}
	corpusSentences(t) // whatever reading the corpus leaves behind is not the index's
	before := heapAlloc()
	ix := NewIndex(IndexOptions{HNSWThreshold: 100})
	if err := ix.Add(corpusChunks(t, n)...); err != nil {
		t.Fatal(err)
	}
	if err := ix.WaitGraph(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, q := range corpusQueries(t, 20) { // the pools of scratch space fill
		if _, err := ix.Search(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	grown := float64(heapAlloc()) - float64(before)
	est := float64(ix.MemoryBytes())
	runtime.KeepAlive(ix)
	t.Logf("%d chunks: estimate %.0f bytes (%.0f a chunk), heap grew %.0f (%.0f a chunk): ratio %.2f", n, est, est/float64(n), grown, grown/float64(n), est/grown)
	if est < 0.7*grown || est > 1.3*grown {
		t.Errorf("the estimate %.0f bytes is not within 30%% of the heap's growth, %.0f bytes", est, grown)
	}
}

// proseChunks makes n chunks of about 100 tokens of English prose (windows of the tokenizer's corpus, cut
// at spaces), 20 to a document whose metadata they share, with Lexical vectors, and returns them with
// their mean token count (cl100k_base).
func proseChunks(tb testing.TB, n int) ([]collection.Chunk, float64) {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", "english.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(data)), " ")
	chunks := make([]collection.Chunk, n)
	texts := make([]string, n)
	tokens := 0
	var meta map[string]string
	for i := range chunks {
		start := (i * 104729) % (len(text) - 1000)
		start += strings.IndexByte(text[start:], ' ') + 1
		end := start + 440
		end += strings.IndexByte(text[end:], ' ')
		texts[i] = text[start:end]
		doc := fmt.Sprintf("doc%05d.txt", i/20)
		if i%20 == 0 {
			meta = map[string]string{"source": doc, "format": "text"}
		}
		chunks[i] = collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", doc, i%20), DocumentID: doc, Content: texts[i],
			Index: i % 20, EndOffset: len(texts[i]), TokenCount: tokenizer.CL100K().Count(texts[i])}, DocumentMetadata: meta}
		tokens += chunks[i].TokenCount
	}
	vecs, err := embed.Default().Embed(context.Background(), texts)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range chunks {
		chunks[i].Vector = vecs[i]
	}
	return chunks, float64(tokens) / float64(n)
}

// BenchmarkIndexMemory builds an index of 10,000 and of 100,000 chunks of about 100 tokens (Lexical
// vectors, 384 dimensions; the HNSW graph past 20,000) and reports its memory a chunk by its estimate
// (MemoryBytes) and by the growth of the heap, the chunks' text included as a store's scan hands it over.
// ns/op is the build, graph included. Run with -benchtime 1x: the 100k build takes minutes.
func BenchmarkIndexMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%dk", n/1000), func(b *testing.B) {
			chunks, tokens := proseChunks(b, n)
			var est, grown float64
			for b.Loop() {
				b.StopTimer()
				before := heapAlloc()
				// The strings a store's scan would allocate, which the index keeps.
				in := make([]collection.Chunk, n)
				for i, c := range chunks {
					c.ID, c.DocumentID, c.Content = strings.Clone(c.ID), strings.Clone(c.DocumentID), strings.Clone(c.Content)
					in[i] = c
				}
				b.StartTimer()
				ix := NewIndex(IndexOptions{})
				if err := ix.Add(in...); err != nil {
					b.Fatal(err)
				}
				if err := ix.WaitGraph(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				in = nil
				grown = float64(heapAlloc()) - float64(before)
				est = float64(ix.MemoryBytes())
				runtime.KeepAlive(ix)
				b.StartTimer()
			}
			b.ReportMetric(est/float64(n), "est-B/chunk")
			b.ReportMetric(grown/float64(n), "heap-B/chunk")
			b.ReportMetric(tokens, "tokens/chunk")
		})
	}
}
