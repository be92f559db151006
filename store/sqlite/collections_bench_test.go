package sqlite_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom/chunk"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// benchDocument is a document of n chunks of about 1 KiB of text, each with a vector of dims floats, and
// the bytes of its chunks' text.
func benchDocument(r *rand.Rand, collID, id string, n, dims int) (collection.Document, []collection.Chunk, int) {
	d := collection.Document{ID: id, CollectionID: collID, Source: id + ".md", ContentType: "markdown", Hash: fmt.Sprint("h-", id, "-", r.Uint64())}
	chunks := make([]collection.Chunk, n)
	size := 0
	for i := range chunks {
		content := text(r, 1024)
		v := make([]float32, dims)
		for j := range v {
			v[j] = r.Float32()*2 - 1
		}
		chunks[i] = collection.Chunk{Chunk: chunk.Chunk{ID: fmt.Sprintf("%s#%d", id, i), DocumentID: id, Content: content, Index: i,
			StartOffset: size, EndOffset: size + len(content), TokenCount: len(content) / 4, Metadata: map[string]string{"source": d.Source}}, Vector: v}
		size += len(content)
	}
	d.Bytes, d.Chunks = size, n
	return d, chunks, size
}

// BenchmarkPutDocument stores a new 20-chunk document (20 KiB of text, 256-dimensional vectors) a
// transaction, FTS index included, in MB/s of chunk text.
func BenchmarkPutDocument(b *testing.B) {
	for _, sync := range []struct {
		name string
		mode sqlite.Synchronous
	}{{"sync=full", sqlite.SynchronousFull}, {"sync=normal", sqlite.SynchronousNormal}} {
		b.Run(sync.name, func(b *testing.B) {
			s, _ := open(b, store.Options{}, sqlite.WithSynchronous(sync.mode))
			ctx := b.Context()
			c, err := s.CreateCollection(ctx, tenant, collection.Collection{Name: "docs"})
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			type doc struct {
				d      collection.Document
				chunks []collection.Chunk
			}
			docs := make([]doc, 64) // made up front; stored again and again under new ids
			size := 0
			for i := range docs {
				docs[i].d, docs[i].chunks, size = benchDocument(r, c.ID, "proto", 20, 256)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := docs[i%len(docs)]
				id := fmt.Sprint("doc-", i)
				d := p.d
				d.ID = id
				chunks := slices.Clone(p.chunks)
				for j := range chunks {
					chunks[j].ID, chunks[j].DocumentID = fmt.Sprintf("%s#%d", id, j), id
				}
				if changed, err := s.PutDocument(ctx, tenant, d, chunks); err != nil || !changed {
					b.Fatal(changed, err)
				}
				i++
			}
		})
	}
}

// BenchmarkSearchKeywords searches a collection of 10,000 chunks (500 documents of 20 chunks of about 300
// bytes) for two or three words and reports the p50 and p99 latency of a search for the top 10. In
// "vocabulary=70" the chunks are made of the 70 words of the other benchmarks, so that every query word is
// in about half the chunks: the worst case, where BM25 is computed for most of the collection. In
// "vocabulary=zipf" they are drawn from 20,000 made-up words with Zipf's law (s = 1.1), as in real text, and
// the queries are of words of ranks 50 to 5,000, not the commonest. In "vocabulary=70,others=40k" the
// file holds four more collections of 10,000 such chunks, which a search must not read.
func BenchmarkSearchKeywords(b *testing.B) {
	b.Run("vocabulary=70", func(b *testing.B) {
		r := rand.New(rand.NewPCG(3, 4))
		benchSearch(b, 0, func() string { return text(r, 300) }, func() string { return words[r.IntN(len(words))] })
	})
	b.Run("vocabulary=70,others=40k", func(b *testing.B) {
		r := rand.New(rand.NewPCG(3, 4))
		benchSearch(b, 4, func() string { return text(r, 300) }, func() string { return words[r.IntN(len(words))] })
	})
	b.Run("vocabulary=zipf", func(b *testing.B) {
		r := rand.New(rand.NewPCG(5, 6))
		vocab := make([]string, 20000)
		for i := range vocab {
			vocab[i] = fmt.Sprintf("w%dx%d", i, r.IntN(1000))
		}
		z := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
		benchSearch(b, 0, func() string {
			var sb strings.Builder
			for sb.Len() < 300 {
				if sb.Len() > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(vocab[z.Uint64()])
			}
			return sb.String()
		}, func() string { return vocab[50+r.IntN(4950)] })
	})
}

// benchSearch fills a collection, and others besides, with 10,000 chunks each and measures searches of the
// first.
func benchSearch(b *testing.B, others int, chunkText, queryWord func() string) {
	s, _ := open(b, store.Options{}, sqlite.WithSynchronous(sqlite.SynchronousNormal))
	ctx := b.Context()
	var c collection.Collection
	for n := range others + 1 {
		coll, err := s.CreateCollection(ctx, fmt.Sprint("tenant-", n), collection.Collection{Name: "docs"})
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			c = coll
		}
		for i := range 500 {
			id := fmt.Sprint("doc-", i)
			d := collection.Document{ID: id, CollectionID: coll.ID, Hash: id}
			chunks := make([]collection.Chunk, 20)
			for j := range chunks {
				chunks[j] = collection.Chunk{Chunk: chunk.Chunk{ID: fmt.Sprintf("%s#%d", id, j), DocumentID: id, Content: chunkText(), Index: j}}
			}
			if _, err := s.PutDocument(ctx, fmt.Sprint("tenant-", n), d, chunks); err != nil {
				b.Fatal(err)
			}
		}
	}
	tenant := "tenant-0"
	queries := make([]string, 256)
	for i := range queries {
		queries[i] = queryWord() + " " + queryWord()
		if i%2 == 0 {
			queries[i] += " " + queryWord()
		}
	}
	var durs []time.Duration
	found := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		got, err := s.SearchKeywords(ctx, tenant, c.ID, queries[i%len(queries)], 10)
		durs = append(durs, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		found += len(got)
		i++
	}
	if found == 0 {
		b.Fatal("no search found anything")
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs")
}
