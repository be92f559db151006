package retriever

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchIndexes are built once per size: the 100k one takes a minute or more (mostly its HNSW graph).
var benchIndexes sync.Map // size -> *benchIndex

type benchIndex struct {
	once sync.Once
	ix   *Index
	qs   []Query
	took time.Duration
}

func benchIndexOf(b *testing.B, n int) *benchIndex {
	v, _ := benchIndexes.LoadOrStore(n, &benchIndex{})
	bi := v.(*benchIndex)
	bi.once.Do(func() {
		start := time.Now()
		bi.ix = NewIndex(IndexOptions{HNSWThreshold: 1000})
		if err := bi.ix.Add(corpusChunks(b, n)...); err != nil {
			b.Fatal(err)
		}
		if err := bi.ix.WaitGraph(context.Background()); err != nil {
			b.Fatal(err)
		}
		bi.took = time.Since(start)
		bi.qs = corpusQueries(b, 100)
	})
	if bi.ix == nil {
		b.Fatal("index not built")
	}
	return bi
}

// BenchmarkSearch measures one search of TopK 10 over real text with Lexical vectors, reporting p50 and p99.
// Run with -bench Search -benchtime 200x; the 100k index is built once, outside the timings.
func BenchmarkSearch(b *testing.B) {
	modes := []struct {
		name string
		set  func(*Query)
	}{
		{"keyword", func(q *Query) { q.Mode = ModeKeyword }},
		{"vector-exact", func(q *Query) { q.Mode, q.Exact = ModeVector, true }},
		{"vector-hnsw", func(q *Query) { q.Mode = ModeVector }},
		{"hybrid", func(q *Query) { q.Mode = ModeHybrid }},
		{"hybrid-exact", func(q *Query) { q.Mode, q.Exact = ModeHybrid, true }},
		{"mmr", func(q *Query) { q.Mode = ModeMMR }},
	}
	for _, n := range []int{10_000, 100_000} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("n=%dk/%s", n/1000, m.name), func(b *testing.B) {
				bi := benchIndexOf(b, n)
				ctx := context.Background()
				lat := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					q := bi.qs[i%len(bi.qs)]
					m.set(&q)
					start := time.Now()
					if _, err := bi.ix.Search(ctx, q); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

// BenchmarkRecall reports recall@10 of HNSW search against exact search over 100 queries, and how long
// the index took to build (chunks, terms and graph).
func BenchmarkRecall(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%dk", n/1000), func(b *testing.B) {
			bi := benchIndexOf(b, n)
			var r float64
			for b.Loop() {
				r = recallAt10(b, bi.ix, bi.qs, nil)
			}
			b.ReportMetric(r, "recall@10")
			b.ReportMetric(bi.took.Seconds(), "build-s")
		})
	}
}

// BenchmarkAnalyze measures the analyzer over the corpus's real text (English, code, CJK, Cyrillic), as an
// index build runs it on every chunk.
func BenchmarkAnalyze(b *testing.B) {
	sentences := corpusSentences(b)
	n := 0
	for _, s := range sentences {
		n += len(s)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	var buf []string
	buf = AppendTerms(buf, "é") // the analyzer's tables are made on first use
	for b.Loop() {
		for _, s := range sentences {
			buf = AppendTerms(buf[:0], s)
		}
	}
}
