package assembler

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// benchRequest is 200 knowledge chunks and 500 history messages of real text, for a 16k budget. With
// cached, every item carries its counts, as a store keeps them: in o200k_base, and the estimate (for the
// gemini format, whose counts are the estimator's).
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
		return map[string]int{tokenizer.O200KBase: enc.Count(s), tokenizer.EstimateKey: tokenizer.Estimate(s)}
	}
	knowledgeCounts := func(s string) map[string]int {
		if !cached {
			return nil
		}
		return map[string]int{KnowledgeCountKey(tokenizer.O200KBase): enc.Count(RenderedKnowledge(s)),
			KnowledgeCountKey(tokenizer.EstimateKey): tokenizer.Estimate(RenderedKnowledge(s))}
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

// benchTools is 20 tool definitions of an agent, each with a description and a schema of three to five
// properties (a nested object, an array, an enum), about 500 bytes of JSON each.
func benchTools() []Tool {
	tools := make([]Tool, 20)
	for i := range tools {
		params := fmt.Sprintf(`{"type":"object","properties":{`+
			`"query":{"type":"string","description":"What to look for in the %[1]d-th source, in plain words"},`+
			`"limit":{"type":"integer","description":"How many results to return, at most"},`+
			`"order":{"type":"string","enum":["relevance","date","title"],"description":"How to order the results"},`+
			`"filter":{"type":"object","properties":{"after":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}},`+
			`"fields":{"type":"array","items":{"type":"string","enum":["id","title","body","url"]}}},`+
			`"required":["query"],"additionalProperties":false}`, i)
		tools[i] = Tool{Type: "function", Function: ToolFunction{
			Name:        fmt.Sprintf("search_source_%d", i),
			Description: fmt.Sprintf("Search the %d-th knowledge source of the workspace and return matching records with their ids.", i),
			Parameters:  json.RawMessage(params),
		}}
	}
	return tools
}

// BenchmarkAssembleRequest assembles benchRequest with counts cached, then the same with the 20 tools of
// benchTools (cached once per tool set: the difference is what tools cost an assembly), then counted from
// scratch. The cache-planning pairs assemble with the 20 tools with the cache planning off (no breakpoints,
// no cache report) and on (the anthropic format's breakpoints, the cache state hashed and compared with
// the previous assembly's), in the openai and anthropic formats: their difference is what the planning
// costs an assembly.
func BenchmarkAssembleRequest(b *testing.B) {
	for _, tc := range []struct {
		name          string
		cached, tools bool
		trim          string // the history's trim ("": the default, steps)
		format        string // "": openai
		cache         string // "": as the request has it; "off" or "on": the cache planning
	}{
		{"counts-cached", true, false, "", "", ""}, {"counts-cached-20-tools", true, true, "", "", ""}, {"counted-from-scratch", false, false, "", "", ""},
		// Cut a turn at a time: the plan of the assembler before it cut in steps, which keeps more history
		// and less knowledge.
		{"counts-cached-turns", true, false, HistoryTrimTurns, "", ""}, {"counted-from-scratch-turns", false, false, HistoryTrimTurns, "", ""},
		{"cache-planning-off/openai", true, true, "", FormatOpenAI, "off"}, {"cache-planning-on/openai", true, true, "", FormatOpenAI, "on"},
		{"cache-planning-off/anthropic", true, true, "", FormatAnthropic, "off"}, {"cache-planning-on/anthropic", true, true, "", FormatAnthropic, "on"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := benchRequest(b, tc.cached)
			if tc.trim != "" {
				req.Policy = &Policy{HistoryTrim: tc.trim}
			}
			if tc.format != "" {
				req.Format = tc.format
			}
			switch tc.cache {
			case "off":
				req.CacheBreakpoints = CacheBreakpointsOff
			case "on":
				req.CacheReport = true
			}
			if tc.tools {
				// The budget grows by what the tools take, so that the rest of the plan is the same.
				req.Tools = benchTools()
				res, err := AssembleRequest(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res.Report.Regions {
					if r.Name == RegionTools {
						req.MaxTokens += r.Used
					}
				}
			}
			if tc.cache == "on" { // the previous turn's state, as the engine hands it over
				res, err := AssembleRequest(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				req.CachePrevious = res.CacheState
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := AssembleRequest(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				if res.TotalTokens > req.MaxTokens {
					b.Fatal("over budget")
				}
				if (res.Cache != nil) != (tc.cache == "on") {
					b.Fatal("cache report")
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

// BenchmarkAssembleTools isolates what tools cost an assembly once their set is cached: a request of
// instructions, a short history and a message, without tools and with the 20 of benchTools, whose
// difference is measurable where BenchmarkAssembleRequest's noise would hide it.
func BenchmarkAssembleTools(b *testing.B) {
	for _, tools := range []bool{false, true} {
		name := "no-tools"
		if tools {
			name = "20-tools"
		}
		b.Run(name, func(b *testing.B) {
			req := &Request{Model: "gpt-4o", Instructions: "You are a helpful assistant.", Message: "Find the latest report.",
				History: []Message{{Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi! How can I help?"}}}
			if tools {
				req.Tools = benchTools()
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := AssembleRequest(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFormatCheck is the last step of an assembly alone, each format's check of its output against
// its provider's rules, on the benchmark request's verified rendering with the whole history kept (500
// messages), so that its share of BenchmarkAssembleRequest can be read beside it.
func BenchmarkFormatCheck(b *testing.B) {
	for _, format := range []Format{OpenAI, Anthropic, Responses, Gemini} {
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
			if n := len(out.messages) + len(out.input) + len(out.contents); n < 250 {
				b.Fatalf("%d messages", n)
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

// BenchmarkAssembleFormats is BenchmarkAssembleRequest's request (counts cached, 20 tools) in each format
// of Loom's markup, so that what a format's rendering costs can be read beside the others'.
func BenchmarkAssembleFormats(b *testing.B) {
	for _, format := range []Format{OpenAI, Responses, Anthropic, Gemini, Text} {
		b.Run(format.Name(), func(b *testing.B) {
			req := benchRequest(b, true)
			req.Tools, req.Formatter = benchTools(), format
			req.MaxTokens += 2000
			if _, err := AssembleRequest(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := AssembleRequest(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAnthropicBreakpoints is the anthropic format's assembly with its cache breakpoints placed
// (auto) and without (off), in one run, for the cost of placing them.
func BenchmarkAnthropicBreakpoints(b *testing.B) {
	for _, mode := range []string{CacheBreakpointsAuto, CacheBreakpointsOff} {
		b.Run(mode, func(b *testing.B) {
			req := benchRequest(b, true)
			req.Tools, req.Formatter, req.CacheBreakpoints = benchTools(), Anthropic, mode
			req.MaxTokens += 2000
			res, err := AssembleRequest(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			if placed := res.Messages[len(res.Messages)-1].Blocks[0].CacheControl != (CacheControl{}) || res.SystemBlocks != nil; placed != (mode == CacheBreakpointsAuto) {
				b.Fatalf("%s: breakpoints placed: %v", mode, placed)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := AssembleRequest(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCacheState is the cache report's share of an assembly alone: hashing the stable parts and the
// kept history of benchRequest's settled plan (with the 20 tools of benchTools) and comparing them with
// the previous assembly's. b.SetBytes is the history's bytes hashed.
func BenchmarkCacheState(b *testing.B) {
	req := benchRequest(b, true)
	req.Tools = benchTools()
	req.MaxTokens += 3000
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
	res := a.result(out)
	used := out.regionsUsed()
	prev, _ := a.cacheState(res, used, nil)
	size := 0
	for gi := a.keepFrom; gi < len(a.turns); gi++ {
		for _, c := range a.groupContents(&a.turns[gi]) {
			size += len(c.Text)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, rep := a.cacheState(res, used, prev); rep.Region != "" {
			b.Fatal(rep)
		}
	}
}
