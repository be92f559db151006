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
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// fillBenchState stores what BenchmarkAssembleFromStore assembles: an agent, 12 facts, 200 messages of
// real text (50 to 400 bytes), 5 tool outputs and 20 knowledge items.
func fillBenchState(b *testing.B, s *store.Store) {
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
	if err := s.PutAgent(ctx, "bench", store.Agent{ID: "agent", Instructions: "You are a support agent. Cite sources as [n].",
		Constraints: "Be concise.", OutputFormat: "Markdown.", Model: "gpt-4o", MaxTokens: 8000}); err != nil {
		b.Fatal(err)
	}
	for i := range 12 {
		if err := s.SetFact(ctx, "bench", "user", store.Fact{Key: fmt.Sprintf("fact_%02d", i), Value: piece(i, 40), Pinned: i < 2}); err != nil {
			b.Fatal(err)
		}
	}
	var msgs []store.Message
	for i := range 200 {
		msgs = append(msgs, store.Message{Role: []string{"user", "assistant"}[i%2], Content: piece(i+100, 50+(i*37)%350)})
	}
	if _, err := s.AppendMessages(ctx, "bench", "session", msgs...); err != nil {
		b.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.AppendToolOutput(ctx, "bench", "session", store.ToolOutput{Tool: "search", CallID: fmt.Sprint("c", i), Result: piece(i+500, 300)}); err != nil {
			b.Fatal(err)
		}
	}
	var kb []store.Knowledge
	for i := range 20 {
		c := piece(i+900, 600)
		kb = append(kb, store.Knowledge{ID: fmt.Sprint("k", i), Content: c, Score: 1 - float64(i)/40, Source: "manual.html"})
	}
	if err := s.SetKnowledge(ctx, "bench", "session", kb); err != nil {
		b.Fatal(err)
	}
}

// benchAssemble assembles from s in a loop, in format ("": the agent's), and reports p50 and p99 latency
// besides the mean.
func benchAssemble(b *testing.B, s *store.Store, format string, opts ...engine.Option) {
	fillBenchState(b, s)
	eng, err := engine.New(s, opts...)
	if err != nil {
		b.Fatal(err)
	}
	req := engine.Request{Agent: "agent", User: "user", Session: "session",
		Request: assembler.Request{Message: "How do I reset my password?", Format: format}}
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		res, err := eng.Assemble(loom.WithTenant(b.Context(), "bench"), req)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Degraded) > 0 || res.TotalTokens > 8000 {
			b.Fatalf("degraded %v, %d tokens", res.Degraded, res.TotalTokens)
		}
	}
	if err := eng.FlushRecords(b.Context()); err != nil { // the records' cost is the benchmark's too
		b.Fatal(err)
	}
	b.ReportMetric(float64(eng.RecordsDropped())/float64(len(lat)), "unrecorded/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkAssembleFromStore assembles from 200 stored messages, memory, tool outputs and knowledge, read
// from each backend (the network ones on loopback): recorded in the session for the inspector
// (WithAssemblyRecords, as loom serve does by default) and unrecorded (the engine's default), to show what
// recording costs; and unrecorded in the gemini format, whose counts are the estimator's, to show what
// the stores' cached estimates save it.
func BenchmarkAssembleFromStore(b *testing.B) {
	modes := []struct {
		name   string
		format string // "": the agent's (openai)
		opts   []engine.Option
	}{
		{"recorded", "", []engine.Option{engine.WithAssemblyRecords(engine.RecordOptions{})}},
		{"unrecorded", "", nil},
		{"gemini", assembler.FormatGemini, nil},
	}
	for _, m := range modes {
		b.Run("memory/"+m.name, func(b *testing.B) {
			s := newMemory()
			defer s.Close()
			benchAssemble(b, s, m.format, m.opts...)
		})
		for _, backend := range backends {
			b.Run(backend.name+"/"+m.name, func(b *testing.B) {
				s := backend.open(b)
				defer s.Close()
				benchAssemble(b, s, m.format, m.opts...)
			})
		}
	}
}

// backend is a persistent store the engine's tests and benchmarks run on (see backends_test.go): open
// opens a fresh one; openPair opens two handles on one fresh store, as two servers would.
type backend struct {
	name     string
	open     func(testing.TB) *store.Store
	openPair func(testing.TB) (*store.Store, *store.Store)
}

var backends []backend

// mixedDocs writes a directory of mixed documents (prose, CJK, Cyrillic, Go, HTML, Markdown) and returns
// it with its size in bytes.
func mixedDocs(b *testing.B) (string, int64) {
	b.Helper()
	dir := b.TempDir()
	var total int64
	copyFile := func(src, name string) {
		data, err := os.ReadFile(src)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(len(data))
	}
	corpus := filepath.Join("..", "tokenizer", "testdata", "corpus")
	copyFile(filepath.Join(corpus, "english.txt"), "udhr.txt")
	copyFile(filepath.Join(corpus, "cjk.txt"), "cjk.txt")
	copyFile(filepath.Join(corpus, "cyrillic.txt"), "cyrillic.txt")
	copyFile(filepath.Join(corpus, "code.go.txt"), "code.go")
	copyFile(filepath.Join("testdata", "go_spec.html"), "go_spec.html")
	copyFile(filepath.Join("..", "README.md"), "README.md")
	return dir, total
}

// BenchmarkIngestDirectory ingests a directory of mixed documents (about 1.2 MB) into a new collection
// each time, with the offline embedder, on each backend: read, extract, chunk (auto strategy, 512 tokens),
// embed, store, index.
func BenchmarkIngestDirectory(b *testing.B) {
	run := func(b *testing.B, st *store.Store) {
		dir, size := mixedDocs(b)
		eng, err := engine.New(st)
		if err != nil {
			b.Fatal(err)
		}
		defer eng.Close()
		b.SetBytes(size)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			c, err := eng.CreateCollection(b.Context(), loom.Collection{Name: fmt.Sprint("c", i)})
			if err != nil {
				b.Fatal(err)
			}
			sum, err := eng.IngestPaths(b.Context(), c.ID, []string{dir}, engine.IngestOptions{})
			if err != nil || sum.Changed != 6 {
				b.Fatalf("%+v %v", sum, err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, newMemory()) })
	for _, backend := range backends {
		b.Run(backend.name, func(b *testing.B) { run(b, backend.open(b)) })
	}
}
