package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// storeCorpus stores in st the tenant bench's collection "kb" of n chunks of about 100 tokens of English
// prose (windows of the tokenizer's corpus, cut at spaces), 20 to a document, with the default embedder's
// vectors, as ingestion stores them. It returns the chunks' mean token count (cl100k_base).
func storeCorpus(b *testing.B, st *store.Store, n int) float64 {
	b.Helper()
	ctx := loom.WithTenant(b.Context(), "bench")
	data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", "english.txt"))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(data)), " ")
	eng, err := engine.New(st)
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	c, err := eng.CreateCollection(ctx, loom.Collection{ID: "kb", Name: "kb", ChunkSize: 100})
	if err != nil {
		b.Fatal(err)
	}
	cs, _ := st.Collections()
	const perDoc = 20
	tokens := 0
	for d := 0; d*perDoc < n; d++ {
		id := fmt.Sprintf("doc%05d.txt", d)
		meta := map[string]string{"source": id, "format": "text"}
		var chunks []collection.Chunk
		var texts []string
		offset := 0
		for i := d * perDoc; i < min(n, (d+1)*perDoc); i++ {
			start := (i * 104729) % (len(text) - 1000)
			start += strings.IndexByte(text[start:], ' ') + 1
			end := start + 440
			end += strings.IndexByte(text[end:], ' ')
			content := text[start:end]
			texts = append(texts, content)
			chunks = append(chunks, collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", id, i%perDoc), DocumentID: id,
				Content: content, Index: i % perDoc, StartOffset: offset, EndOffset: offset + len(content),
				TokenCount: tokenizer.CL100K().Count(content)}, DocumentMetadata: meta})
			offset += len(content)
			tokens += chunks[len(chunks)-1].TokenCount
		}
		vecs, err := embed.Default().Embed(ctx, texts)
		if err != nil {
			b.Fatal(err)
		}
		for i := range chunks {
			chunks[i].Vector = vecs[i]
		}
		doc := loom.Document{ID: id, CollectionID: c.ID, Source: id, ContentType: "text", Hash: id, Bytes: offset,
			Chunks: len(chunks), Metadata: meta}
		if _, err := cs.PutDocument(ctx, "bench", doc, chunks); err != nil {
			b.Fatal(err)
		}
	}
	return float64(tokens) / float64(n)
}

// BenchmarkFirstQuery measures, on SQLite, the first retrieval from a collection of 10,000 and of 100,000
// chunks (about 100 tokens each, Lexical vectors) by an engine that has not loaded its index (cold: the
// build from the store, then the search) and the retrievals after it (warm), reporting p50 and p99 of
// each; and the index's memory once loaded, a chunk, by its estimate. Past 20,000 chunks the HNSW graph is
// built in the background after the first query, which searches exactly meanwhile. Run with
// -benchtime 5x: each iteration opens a new engine over the same file.
func BenchmarkFirstQuery(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("sqlite/n=%dk", n/1000), func(b *testing.B) {
			st := sqliteBackend(b).open(b)
			tokens := storeCorpus(b, st, n)
			queries := []string{"the rights of everyone to education", "freedom of thought and religion", "equal protection of the law",
				"arbitrary arrest or exile", "periodic holidays with pay", "marriage and the family", "peaceful assembly",
				"a fair and public hearing", "nationality", "social security"}
			ctx := loom.WithTenant(b.Context(), "bench")
			var cold, warm []time.Duration
			var est int64
			b.ReportAllocs()
			for b.Loop() {
				eng, err := engine.New(st)
				if err != nil {
					b.Fatal(err)
				}
				for i, q := range queries {
					start := time.Now()
					res, err := eng.Retrieve(ctx, q, engine.WithCollection("kb"))
					took := time.Since(start)
					if err != nil || len(res) == 0 {
						b.Fatalf("%q: %v, %v", q, res, err)
					}
					if i == 0 {
						cold = append(cold, took)
					} else {
						warm = append(warm, took)
					}
				}
				est = eng.IndexStats().MemoryBytes
				if err := eng.Close(); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(cold)
			slices.Sort(warm)
			b.ReportMetric(float64(cold[len(cold)/2].Microseconds())/1000, "cold-p50-ms")
			b.ReportMetric(float64(cold[len(cold)*99/100].Microseconds())/1000, "cold-p99-ms")
			b.ReportMetric(float64(warm[len(warm)/2].Microseconds()), "warm-p50-µs")
			b.ReportMetric(float64(warm[len(warm)*99/100].Microseconds()), "warm-p99-µs")
			b.ReportMetric(float64(est)/float64(n), "est-B/chunk")
			b.ReportMetric(tokens, "tokens/chunk")
		})
	}
}
