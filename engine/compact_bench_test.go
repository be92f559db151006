package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/summarize"
)

// BenchmarkAssembleCompacted is BenchmarkAssembleFromStore's assembly of a session whose older half a
// summary covers ("compacted") beside the same session without one ("plain"), on each backend: the
// summary is read in the same Load, and what it covers is neither counted nor sent.
func BenchmarkAssembleCompacted(b *testing.B) {
	stores := []struct {
		name string
		open func(testing.TB) *store.Store
	}{{"memory", func(testing.TB) *store.Store { return newMemory() }}}
	for _, be := range backends {
		stores = append(stores, struct {
			name string
			open func(testing.TB) *store.Store
		}{be.name, be.open})
	}
	for _, st := range stores {
		for _, compacted := range []bool{false, true} {
			name := st.name + "/plain"
			if compacted {
				name = st.name + "/compacted"
			}
			b.Run(name, func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				fillBenchState(b, s)
				ctx := loom.WithTenant(b.Context(), "bench")
				if compacted {
					e, _ := engine.New(s, engine.WithSummarizer(&recorder{}, engine.SummarizerConfig{}))
					a, _ := s.GetAgent(ctx, "bench", "agent")
					a.Policy = &loom.Policy{Compaction: &loom.Compaction{KeepTokens: 4000}}
					if err := s.PutAgent(ctx, "bench", a); err != nil {
						b.Fatal(err)
					}
					if res, err := e.Compact(ctx, engine.CompactRequest{Session: "session", Agent: "agent", Force: true}); err != nil || res.Result != engine.CompactCompacted {
						b.Fatalf("%+v, %v", res, err)
					}
					e.Close()
				}
				eng, _ := engine.New(s)
				req := engine.Request{Agent: "agent", User: "user", Session: "session", Request: assembler.Request{Message: "How do I reset my password?"}}
				var lat []time.Duration
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					res, err := eng.Assemble(ctx, req)
					lat = append(lat, time.Since(start))
					if err != nil || len(res.Degraded) > 0 || (res.Report.Summary != nil) != compacted {
						b.Fatalf("%v, degraded %v, summary %v", err, res.Degraded, res.Report.Summary)
					}
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

// BenchmarkRecordCompacting records turns to a session with background compaction ("compacting": a
// summarizer configured, each Record scheduling a compaction) and without ("plain"), and reports the
// appends' p50 and p99: scheduling adds a queue send, no wait. The summarizer answers at once and keeps
// nothing (fixedSummary): the model's own work is on another machine, and what the worker costs here is
// Loom's part of a compaction (reading the uncovered turns, counting them, the transcript, the swaps).
func BenchmarkRecordCompacting(b *testing.B) {
	for _, compacting := range []bool{false, true} {
		name := "plain"
		if compacting {
			name = "compacting"
		}
		b.Run(name, func(b *testing.B) {
			s := newMemory()
			defer s.Close()
			var opts []engine.Option
			if compacting {
				opts = append(opts, engine.WithSummarizer(fixedSummary{}, engine.SummarizerConfig{}))
			}
			e, _ := engine.New(s, opts...)
			defer e.Close()
			ctx := b.Context()
			_ = s.PutAgent(ctx, loom.DefaultTenant, store.Agent{ID: "a", MaxTokens: 4000,
				Policy: &loom.Policy{Compaction: &loom.Compaction{TriggerTokens: 2000, KeepTokens: 1000}}})
			filler := strings.Repeat("words of a turn ", 40)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				i++
				start := time.Now()
				_, err := e.Record(ctx, engine.Turn{Session: fmt.Sprint("s", i%50), Agent: "a", Message: fmt.Sprint("question ", i, " ", filler),
					Reply: []store.Message{{Role: "assistant", Content: filler}}})
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// fixedSummary is a summarizer that answers every request with the same short summary.
type fixedSummary struct{}

func (fixedSummary) Summarize(context.Context, summarize.Request) (string, error) {
	return "the user asked questions and the assistant answered them", nil
}
