package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey"
)

// BenchmarkLoad reads what one assembly needs from a server on loopback: an agent, 10 facts, the newest of
// 200 messages (50-400 bytes each), 5 tool outputs and 20 knowledge items. It reports the p50 and p99 of
// one Load besides the mean.
func BenchmarkLoad(b *testing.B) {
	addr := valkeytest.Start(b)
	s := open(b, valkey.Options{Prefix: "bench"}, addr)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the of and to in is that for it as with was on be by this are from at or an which premium account upgrade plan")
	text := func(lo, hi int) string {
		n := lo + rng.IntN(hi-lo+1)
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		return sb.String()[:n]
	}
	if err := s.PutAgent(ctx, "acme", store.Agent{ID: "support", Instructions: text(200, 400), Constraints: "Be concise.", Model: "gpt-4o"}); err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		if err := s.SetFact(ctx, "acme", "user_42", store.Fact{Key: fmt.Sprintf("fact_%d", i), Value: text(10, 60)}); err != nil {
			b.Fatal(err)
		}
	}
	msgs := make([]store.Message, 200)
	for i := range msgs {
		msgs[i] = store.Message{Role: []string{"user", "assistant"}[i%2], Content: text(50, 400)}
	}
	if _, err := s.AppendMessages(ctx, "acme", "sess_42", msgs...); err != nil {
		b.Fatal(err)
	}
	for range 5 {
		if _, err := s.AppendToolOutput(ctx, "acme", "sess_42", store.ToolOutput{Tool: "search", Args: `{"q":"premium"}`, Result: text(100, 400)}); err != nil {
			b.Fatal(err)
		}
	}
	kb := make([]store.Knowledge, 20)
	for i := range kb {
		kb[i] = store.Knowledge{ID: fmt.Sprintf("k%d", i), Source: "doc", Content: text(200, 400), Score: rng.Float64()}
	}
	if err := s.SetKnowledge(ctx, "acme", "sess_42", kb); err != nil {
		b.Fatal(err)
	}
	q := store.LoadQuery{Agent: "support", User: "user_42", Session: "sess_42"}
	if snap, err := s.Load(ctx, "acme", q); err != nil || len(snap.Messages) != 200 || len(snap.Facts) != 10 || len(snap.ToolOutputs) != 5 || len(snap.Knowledge) != 20 || snap.Agent == nil {
		b.Fatalf("Load = %+v, %v", snap, err)
	}

	durations := make([]time.Duration, 0, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := s.Load(ctx, "acme", q); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durations)
	pct := func(p float64) float64 { return float64(durations[int(p*float64(len(durations)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}

// BenchmarkPutDocument stores a document of 20 chunks (about 500 bytes of text and 256 float32 each) in
// one script; each iteration is a new version of one of 100 documents, so every put replaces one. The
// bytes are the chunks' text and vectors.
func BenchmarkPutDocument(b *testing.B) {
	s := openColls(b, valkey.Options{Prefix: "benchput"}, valkeytest.Start(b))
	ctx := context.Background()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		b.Fatal(err)
	}
	d, chunks := testDoc(c.ID, "doc", "v", 20, 256)
	size := 0
	for _, ch := range chunks {
		size += len(ch.Content) + 4*len(ch.Vector)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d.ID = fmt.Sprintf("doc%d", i%100)
		d.Hash = fmt.Sprint(i)
		for j := range chunks {
			chunks[j].DocumentID = d.ID
		}
		if changed, err := s.PutDocument(ctx, "acme", d, chunks); err != nil || !changed {
			b.Fatal(changed, err)
		}
		i++
	}
}

// BenchmarkScanChunks reads a collection of 10,000 chunks (500 documents of 20 chunks, about 500 bytes of
// text and 256 float32 each), as a server does to build its index at start.
func BenchmarkScanChunks(b *testing.B) {
	s := openColls(b, valkey.Options{Prefix: "benchscan"}, valkeytest.Start(b))
	ctx := context.Background()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for i := range 500 {
		d, chunks := testDoc(c.ID, fmt.Sprintf("doc%d", i), "v1", 20, 256)
		for _, ch := range chunks {
			size += len(ch.Content) + 4*len(ch.Vector)
		}
		if _, err := s.PutDocument(ctx, "acme", d, chunks); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := s.ScanChunks(ctx, "acme", c.ID, func(collection.Chunk) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != 10000 {
			b.Fatalf("%d chunks", n)
		}
	}
	b.ReportMetric(float64(10000*b.N)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkLoadRefused is a Load while the server is down (connections refused): how long a caller waits
// for store.ErrUnavailable. With valkey-go's own retries it waited out the call's timeout; the store's
// retry delay gives up after three quick dials.
func BenchmarkLoadRefused(b *testing.B) {
	srv := valkeytest.StartServer(b)
	s := open(b, valkey.Options{Timeout: 2 * time.Second}, srv.Addr)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	srv.Stop()
	q := store.LoadQuery{Agent: "a", User: "u", Session: "s"}
	for b.Loop() {
		if _, err := s.Load(ctx, "acme", q); !errors.Is(err, store.ErrUnavailable) {
			b.Fatalf("Load with the server down: %v", err)
		}
	}
}
