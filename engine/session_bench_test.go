package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// fillLongSession appends n messages of real text (50 to 400 bytes, user and assistant in turn) to the
// session "long" of tenant "bench", in appends of store.DefaultMaxBatch, and stores the agent "small"
// (gpt-4o, a 500-token budget).
func fillLongSession(b *testing.B, s *store.Store, n int) {
	b.Helper()
	ctx := b.Context()
	data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", "english.txt"))
	if err != nil {
		b.Fatal(err)
	}
	text := string(data)
	piece := func(i, size int) string {
		start := (i * 7919) % (len(text) - size)
		return strings.ToValidUTF8(text[start:start+size], "")
	}
	if err := s.PutAgent(ctx, "bench", store.Agent{ID: "small", Instructions: "You are a support agent.", Model: "gpt-4o", MaxTokens: 500}); err != nil {
		b.Fatal(err)
	}
	batch := make([]store.Message, 0, store.DefaultMaxBatch)
	for i := range n {
		batch = append(batch, store.Message{Role: []string{"user", "assistant"}[i%2], Content: piece(i, 50+(i*37)%350)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.AppendMessages(ctx, "bench", "long", batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkAssembleLongSession assembles a 500-token request from a session of 200 and of 100,000 stored
// messages, on each backend: the budget given in the request, or by the stored agent (known only once the
// store has answered). Time and bytes per assembly should not depend on the session's length: compare the
// two sizes' ns/op and B/op within one run.
func BenchmarkAssembleLongSession(b *testing.B) {
	run := func(b *testing.B, open func(testing.TB) *store.Store) {
		for _, n := range []int{200, 100_000} {
			b.Run(fmt.Sprint(n), func(b *testing.B) {
				s := open(b)
				fillLongSession(b, s, n)
				eng, err := engine.New(s)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC() // the fill's garbage is not the assemblies' to collect
				for _, budget := range []string{"request", "agent"} {
					b.Run("budget="+budget, func(b *testing.B) {
						req := engine.Request{Session: "long", Request: assembler.Request{Message: "How do I reset my password?"}}
						if budget == "request" {
							req.Model, req.MaxTokens = "gpt-4o", 500
						} else {
							req.Agent = "small"
						}
						b.ReportAllocs()
						for b.Loop() {
							res, err := eng.Assemble(loom.WithTenant(b.Context(), "bench"), req)
							if err != nil {
								b.Fatal(err)
							}
							if res.TotalTokens > 500 || len(res.Degraded) > 0 {
								b.Fatalf("%d tokens, degraded %v", res.TotalTokens, res.Degraded)
							}
						}
					})
				}
			})
		}
	}
	b.Run("memory", func(b *testing.B) {
		run(b, func(testing.TB) *store.Store { return newMemory() })
	})
	for _, backend := range backends {
		b.Run(backend.name, func(b *testing.B) { run(b, backend.open) })
	}
}
