package sqlite_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store/sqlite"
)

// benchDocument is a document of n chunks of about 1 KiB of text, each with a vector of dims floats, and
// the bytes of its chunks' text.
func benchDocument(r *rand.Rand, collID, id string, n, dims int) (loom.Document, []collection.Chunk, int) {
	d := loom.Document{ID: id, CollectionID: collID, Source: id + ".md", ContentType: "markdown", Hash: fmt.Sprint("h-", id, "-", r.Uint64())}
	chunks := make([]collection.Chunk, n)
	size := 0
	for i := range chunks {
		content := text(r, 1024)
		v := make([]float32, dims)
		for j := range v {
			v[j] = r.Float32()*2 - 1
		}
		chunks[i] = collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", id, i), DocumentID: id, Content: content, Index: i,
			StartOffset: size, EndOffset: size + len(content), TokenCount: len(content) / 4, Metadata: map[string]string{"source": d.Source}}, Vector: v}
		size += len(content)
	}
	d.Bytes, d.Chunks = size, n
	return d, chunks, size
}

// BenchmarkPutDocument stores a new 20-chunk document (20 KiB of text, 256-dimensional vectors) a
// transaction, in MB/s of chunk text.
func BenchmarkPutDocument(b *testing.B) {
	for _, sync := range []struct {
		name string
		mode sqlite.Synchronous
	}{{"sync=full", sqlite.SynchronousFull}, {"sync=normal", sqlite.SynchronousNormal}} {
		b.Run(sync.name, func(b *testing.B) {
			st, _ := open(b, sqlite.Options{Synchronous: sync.mode})
			s, _ := st.Collections()
			ctx := b.Context()
			c, err := s.CreateCollection(ctx, tenant, loom.Collection{Name: "docs"})
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			type doc struct {
				d      loom.Document
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

// BenchmarkScanChunks reads a collection of 10,000 chunks (500 documents of 20 chunks of about 1 KiB, with
// 256-dimensional vectors and a few keys of document metadata), as an index build does, in MB/s of chunk
// text.
func BenchmarkScanChunks(b *testing.B) {
	st, _ := open(b, sqlite.Options{Synchronous: sqlite.SynchronousNormal})
	s, _ := st.Collections()
	ctx := b.Context()
	c, err := s.CreateCollection(ctx, tenant, loom.Collection{Name: "docs"})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	size := 0
	for i := range 500 {
		d, chunks, n := benchDocument(r, c.ID, fmt.Sprint("doc-", i), 20, 256)
		d.Metadata = map[string]string{"source": d.Source, "title": "A title of some length", "format": "markdown"}
		if _, err := s.PutDocument(ctx, tenant, d, chunks); err != nil {
			b.Fatal(err)
		}
		size += n
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := s.ScanChunks(ctx, tenant, c.ID, func(collection.Chunk) error { n++; return nil }); err != nil || n != 10000 {
			b.Fatal(n, err)
		}
	}
}
