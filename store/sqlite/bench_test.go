package sqlite_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// words make up the benchmark's message texts.
var words = strings.Fields(`the account plan premium upgrade billing invoice month user support team please thanks
	could you check my order status delivery refund policy days working price discount code email password reset
	login error page settings profile project limit storage free tier annual payment card expired update`)

// text is a realistic message text of about n bytes.
func text(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// BenchmarkLoad reads what one assembly needs from a session of 200 stored messages (50 to 400 bytes
// each), with 10 facts, 5 tool outputs and 20 knowledge items, and reports the p50 and p99 latency of a
// Load.
func BenchmarkLoad(b *testing.B) {
	s, _ := open(b, sqlite.Options{Options: store.Options{SessionTTL: 24 * time.Hour}})
	ctx := b.Context()
	r := rand.New(rand.NewPCG(1, 2))
	if err := s.PutAgent(ctx, tenant, store.Agent{ID: "support", Instructions: text(r, 300), Model: "gpt-4o"}); err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		if err := s.SetFact(ctx, tenant, "user_42", store.Fact{Key: fmt.Sprintf("fact_%d", i), Value: text(r, 40), Pinned: i < 2}); err != nil {
			b.Fatal(err)
		}
	}
	msgs := make([]store.Message, 200)
	for i := range msgs {
		msgs[i] = store.Message{Role: []string{"user", "assistant"}[i%2], Content: text(r, 50+r.IntN(351))}
	}
	for i := 0; i < len(msgs); i += 2 { // one turn a write, as a conversation grows
		if _, err := s.AppendMessages(ctx, tenant, "sess_42", msgs[i:i+2]...); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := s.AppendToolOutput(ctx, tenant, "sess_42", store.ToolOutput{Tool: "check_account",
			CallID: fmt.Sprintf("call_%d", i), Args: `{"user":"user_42"}`, Result: text(r, 200)}); err != nil {
			b.Fatal(err)
		}
	}
	kb := make([]store.Knowledge, 20)
	for i := range kb {
		kb[i] = store.Knowledge{ID: fmt.Sprintf("k%d", i), DocumentID: "pricing", Content: text(r, 300), Score: 0.9 - float64(i)/50,
			Source: "Pricing", Metadata: map[string]string{"title": "Pricing"}}
	}
	if err := s.SetKnowledge(ctx, tenant, "sess_42", kb); err != nil {
		b.Fatal(err)
	}
	q := store.LoadQuery{Agent: "support", User: "user_42", Session: "sess_42"}

	var durs []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		snap, err := s.Load(ctx, tenant, q)
		durs = append(durs, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Messages) != 200 || len(snap.Facts) != 10 || len(snap.ToolOutputs) != 5 || len(snap.Knowledge) != 20 || snap.Agent == nil {
			b.Fatalf("Load read %d messages, %d facts, %d tool outputs, %d knowledge items", len(snap.Messages), len(snap.Facts), len(snap.ToolOutputs), len(snap.Knowledge))
		}
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkAssemblySessions lists the 50 most recently recorded of a tenant's 500 sessions, each keeping
// its newest 20 records of 8 KiB (a record keeps the rendered prompt: a few to tens of KiB).
func BenchmarkAssemblySessions(b *testing.B) {
	s, _ := open(b, sqlite.Options{})
	ctx := b.Context()
	rec := []byte(`{"text":"` + strings.Repeat("x", 8<<10) + `"}`)
	for i := range 500 {
		for range 20 {
			if _, err := s.RecordAssembly(ctx, tenant, fmt.Sprintf("sess_%03d", i), rec, 20, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := s.AssemblySessions(ctx, tenant, 50)
		if err != nil || len(l) != 50 {
			b.Fatal(len(l), err)
		}
	}
}
