package assembler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// benchRequest is 200 knowledge chunks and 500 history messages of real text, for a 16k budget. With
// cached, every item carries its count, as a store keeps it.
func benchRequest(b *testing.B, cached bool) *Request {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", "english.txt"))
	if err != nil {
		b.Fatal(err)
	}
	text := string(data)
	enc := tokenizer.O200K()
	piece := func(i, size int) string {
		start := (i * 997) % (len(text) - size)
		return strings.ToValidUTF8(text[start:start+size], "")
	}
	counts := func(s string) map[string]int {
		if !cached {
			return nil
		}
		return map[string]int{tokenizer.O200KBase: enc.Count(s)}
	}
	req := &Request{Model: "gpt-4o", MaxTokens: 16000, Instructions: "You are a helpful assistant. Cite sources as [n].", Message: "What does the memory model promise?"}
	for i := range 200 {
		c := piece(i, 800)
		req.Knowledge = append(req.Knowledge, Knowledge{ID: fmt.Sprintf("k%d", i), Content: c, Score: float64(i%97) / 97, Source: "go_mem.html", TokenCounts: counts(RenderedKnowledge(c))})
	}
	for i := range 500 {
		c := piece(i+1000, 200)
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		req.History = append(req.History, Message{Role: role, Content: c, TokenCounts: counts(c)})
	}
	return req
}

func BenchmarkAssembleRequest(b *testing.B) {
	for _, cached := range []bool{true, false} {
		name := "counted-from-scratch"
		if cached {
			name = "counts-cached"
		}
		b.Run(name, func(b *testing.B) {
			req := benchRequest(b, cached)
			b.ReportAllocs()
			for b.Loop() {
				res, err := AssembleRequest(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				if res.TotalTokens > 16000 {
					b.Fatal("over budget")
				}
			}
		})
	}
}

// TestAssemble_CountsEachTextOnce checks that an assembly counts each text at most once, however often it
// renders and verifies its plan.
func TestAssemble_CountsEachTextOnce(t *testing.T) {
	t.Parallel()
	req := benchRequest(&testing.B{}, false)
	req.ToolOutputs = []ToolOutput{{Tool: "search", Result: strings.Repeat("a long search result ", 30)}}
	req.Memory = []MemoryFact{{Key: "name", Value: "Bob", Pinned: true}, {Key: "tier", Value: "free"}}
	a, err := newAssembly(req)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	inner := a.m.counter
	a.m.counter = tokenizer.CounterFunc(func(s string) int {
		seen[s]++
		return inner.Count(s)
	})
	if _, err := a.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for text, n := range seen {
		if n > 1 {
			t.Errorf("counted %d times: %.60q", n, text)
		}
	}
	if texts := len(req.Knowledge) + len(req.History); a.m.counted < texts {
		t.Errorf("counted %d texts for %d items: the test does not see the counting", a.m.counted, texts)
	}
}
