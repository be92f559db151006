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
	knowledgeCounts := func(s string) map[string]int {
		if !cached {
			return nil
		}
		return map[string]int{KnowledgeCountKey(tokenizer.O200KBase): enc.Count(RenderedKnowledge(s))}
	}
	req := &Request{Model: "gpt-4o", MaxTokens: 16000, Instructions: "You are a helpful assistant. Cite sources as [n].", Message: "What does the memory model promise?"}
	for i := range 200 {
		c := piece(i, 800)
		req.Knowledge = append(req.Knowledge, Knowledge{ID: fmt.Sprintf("k%d", i), Content: c, Score: float64(i%97) / 97, Source: "go_mem.html", TokenCounts: knowledgeCounts(c)})
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

// countingCounter counts texts with an encoding and records each text it counts, in whole or up to a
// limit.
type countingCounter struct {
	enc  *tokenizer.Encoding
	seen map[string]int
}

func (c *countingCounter) Count(s string) int {
	c.seen[s]++
	return c.enc.Count(s)
}

func (c *countingCounter) CountUpTo(s string, limit int) (int, bool) {
	c.seen[s]++
	return c.enc.CountUpTo(s, limit)
}

// The other upgrades, forwarded: they count nothing.
func (c *countingCounter) SplitsAt(s string, p int) bool { return c.enc.SplitsAt(s, p) }
func (c *countingCounter) LowerBound(parts []tokenizer.Part, limit int) int {
	return c.enc.LowerBound(parts, limit)
}

// wholeCounter is a countingCounter that can only count whole texts.
type wholeCounter struct{ c *countingCounter }

func (w wholeCounter) Count(s string) int            { return w.c.Count(s) }
func (w wholeCounter) SplitsAt(s string, p int) bool { return w.c.SplitsAt(s, p) }
func (w wholeCounter) LowerBound(parts []tokenizer.Part, limit int) int {
	return w.c.LowerBound(parts, limit)
}

// TestAssemble_CountsEachTextOnce checks that an assembly counts each text at most once, in whole or in
// part, however often it renders and verifies its plan, and that it does not count what cannot fit.
func TestAssemble_CountsEachTextOnce(t *testing.T) {
	t.Parallel()
	for _, upTo := range []bool{true, false} {
		req := benchRequest(&testing.B{}, false)
		req.ToolOutputs = []ToolOutput{{Tool: "search", Result: strings.Repeat("a long search result ", 30)}}
		req.Memory = []MemoryFact{{Key: "name", Value: "Bob", Pinned: true}, {Key: "tier", Value: "free"}}
		a, err := newAssembly(req)
		if err != nil {
			t.Fatal(err)
		}
		c := &countingCounter{enc: tokenizer.O200K(), seen: map[string]int{}}
		a.m = tokenizer.NewMeter(c)
		if !upTo {
			a.m = tokenizer.NewMeter(wholeCounter{c})
		}
		res, err := a.run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for text, n := range c.seen {
			if n > 1 {
				t.Errorf("counted %d times: %.60q", n, text)
			}
		}
		kept := 0
		for _, r := range res.Report.Regions {
			kept += len(r.Included)
		}
		texts := 0
		for _, n := range c.seen {
			texts += n
		}
		if texts < kept {
			t.Errorf("counted %d texts for %d included items: the test does not see the counting", texts, kept)
		}
		counted := 0
		for _, k := range req.Knowledge {
			counted += c.seen[RenderedKnowledge(k.Content)]
		}
		for _, h := range req.History {
			counted += c.seen[h.Content]
		}
		if items := len(req.Knowledge) + len(req.History); counted > items*3/4 {
			t.Errorf("counted %d of %d texts, when fewer than half fit", counted, items)
		}
		t.Logf("CountUpTo %v: counted %d of %d knowledge and history texts, included %d items", upTo, counted, len(req.Knowledge)+len(req.History), kept)
	}
}

// BenchmarkFormatCheck is the last step of an assembly alone, each format's check of its output against
// its provider's rules, on the benchmark request's verified rendering with the whole history kept (500
// messages), so that its share of BenchmarkAssembleRequest can be read beside it.
func BenchmarkFormatCheck(b *testing.B) {
	for _, format := range []Format{OpenAI, Anthropic} {
		b.Run(format.Name(), func(b *testing.B) {
			req := benchRequest(b, true)
			req.MaxTokens, req.Formatter = 110000, format
			a, err := newAssembly(req)
			if err != nil {
				b.Fatal(err)
			}
			a.scratch = getScratch()
			defer a.release()
			out, err := a.plan(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if len(out.messages) < 250 {
				b.Fatalf("%d messages", len(out.messages))
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := format.check(a, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
