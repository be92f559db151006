package valkey_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

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
