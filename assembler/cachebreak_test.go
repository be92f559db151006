package assembler

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// cacheBase is a request with every stable part: tools, instructions, pinned memory, a summary and a
// history, whose budget keeps all of it.
func cacheBase() *Request {
	hist := make([]Message, 0, 12)
	for i := range 6 {
		hist = append(hist, Message{Role: "user", Content: fmt.Sprintf("Question %d about the trip to Lisbon?", i)},
			Message{Role: "assistant", Content: fmt.Sprintf("Answer %d: the train leaves at nine.", i)})
	}
	return &Request{
		Model: "gpt-4o", MaxTokens: 20000, Instructions: "You are a travel agent. Be brief.",
		Tools: []Tool{{Type: "function", Function: ToolFunction{Name: "search", Description: "Search bookings.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}},
		Memory:  []MemoryFact{{Key: "name", Value: "Ada", Pinned: true}, {Key: "mood", Value: "curious"}},
		Summary: &Summary{Text: "The user planned a trip.", Covers: 2},
		History: hist, Message: "And the way back?", CacheReport: true,
	}
}

func assembleCache(t *testing.T, req *Request) *Result {
	t.Helper()
	res, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheState == nil {
		t.Fatal("no cache state")
	}
	return res
}

func used(res *Result, r Region) int {
	for _, reg := range res.Report.Regions {
		if reg.Name == r {
			return reg.Used
		}
	}
	return 0
}

// TestCacheReport_EachStablePartInTurn changes each stable part of a prompt in turn and checks the region,
// the reason and the tokens shared: those of the parts before it.
func TestCacheReport_EachStablePartInTurn(t *testing.T) {
	t.Parallel()
	prev := assembleCache(t, cacheBase())
	if prev.Cache != nil {
		t.Fatalf("a first assembly without a previous state reported %+v", prev.Cache)
	}
	tools, instr, hist, summ := used(prev, RegionTools), used(prev, RegionInstructions), used(prev, RegionHistory), used(prev, RegionSummary)
	var pinned int
	for _, p := range prev.CacheState.Parts {
		if p.Region == "memory" {
			pinned = p.Tokens
		}
	}
	if tools == 0 || instr == 0 || hist == 0 || summ == 0 || pinned == 0 {
		t.Fatalf("a part is missing: tools %d instructions %d pinned %d summary %d history %d", tools, instr, pinned, summ, hist)
	}
	stable := tools + instr + pinned + summ
	for _, tc := range []struct {
		name   string
		change func(*Request)
		region string
		reason string
		shared int
	}{
		{"nothing", func(*Request) {}, "", "", stable + hist},
		{"the next turn", func(r *Request) {
			r.History = append(r.History, Message{Role: "user", Content: r.Message}, Message{Role: "assistant", Content: "By bus."})
			r.Message = "Thanks."
		}, "", "", stable + hist},
		{"only the volatile context", func(r *Request) {
			r.Memory[1].Value = "tired"
			r.Knowledge = []Knowledge{{ID: "k", Content: "Trains run hourly.", Score: 1}}
		}, "", "", stable + hist},
		{"the tools", func(r *Request) { r.Tools[0].Function.Description = "Search the bookings." }, "tools", CacheToolsChanged, 0},
		{"a tool added", func(r *Request) {
			r.Tools = append(r.Tools, Tool{Type: "function", Function: ToolFunction{Name: "book", Parameters: json.RawMessage(`{"type":"object"}`)}})
		}, "tools", CacheToolsChanged, 0},
		{"the tools removed", func(r *Request) { r.Tools = nil }, "tools", CacheToolsChanged, 0},
		{"the instructions", func(r *Request) { r.Instructions += " Be kind." }, "instructions", CacheInstructionsEdited, tools},
		{"pinned memory", func(r *Request) { r.Memory[0].Value = "Ada L." }, "memory", CachePinnedChanged, tools + instr},
		{"pinned memory unpinned", func(r *Request) { r.Memory[0].Pinned = false }, "memory", CachePinnedChanged, tools + instr},
		{"the summary", func(r *Request) { r.Summary = &Summary{Text: "The user planned a trip to Lisbon.", Covers: 4} },
			"summary", CacheCompaction, tools + instr + pinned},
		{"the summary gone", func(r *Request) { r.Summary = nil }, "summary", CacheCompaction, tools + instr + pinned},
		{"the history cut", func(r *Request) { r.History = r.History[4:]; r.Summary.Covers = 0 }, "history", CacheCutMoved, stable},
		{"a kept message rewritten", func(r *Request) { r.History[5].Content = "Answer 2, corrected." }, "history", CacheHistoryRewritten, stable},
		{"the format", func(r *Request) { r.Format = FormatAnthropic }, "", CacheFormatChanged, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := cacheBase()
			tc.change(req)
			req.CachePrevious = prev.CacheState
			res := assembleCache(t, req)
			got := res.Cache
			if got == nil || got.Region != tc.region || got.Reason != tc.reason || got.SharedTokens != tc.shared {
				t.Fatalf("report %+v, want region %q reason %q shared %d", got, tc.region, tc.reason, tc.shared)
			}
			if got.SharedTokens > res.TotalTokens {
				t.Fatalf("shares %d of %d tokens", got.SharedTokens, res.TotalTokens)
			}
		})
	}
	first := cacheBase()
	first.CachePrevious = &CacheState{}
	if got := assembleCache(t, first).Cache; got == nil || got.Reason != CacheFirstAssembly || got.SharedTokens != 0 {
		t.Fatalf("first assembly: %+v", got)
	}
}

// TestCacheReport_Property plays random conversations whose stable parts change now and then, and checks
// against the rendered bytes: a report without a region means the previous prompt's stable parts and
// history start this one's (the openai format's messages, compared as JSON); one with a region means the
// part it names differs, and the parts before it do not.
func TestCacheReport_Property(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 4))
	for conv := range 20 {
		req := cacheBase()
		req.Summary, req.Memory = nil, req.Memory[:1] // no context message: system, history, message
		req.History = req.History[:2]
		var prev *Result
		for turn := range 15 {
			what := r.IntN(8)
			switch what {
			case 0:
				req.Instructions = fmt.Sprintf("You are agent %d.", r.IntN(3))
			case 1:
				req.Memory[0].Value = fmt.Sprint("Ada ", r.IntN(3))
			case 2:
				req.Tools[0].Function.Description = fmt.Sprint("Search ", r.IntN(3))
			case 3:
				req.History = req.History[2:]
			}
			req.History = append(req.History, Message{Role: "user", Content: req.Message},
				Message{Role: "assistant", Content: strings.Repeat("word ", 1+r.IntN(20))})
			req.Message = fmt.Sprint("Next ", turn)
			if prev != nil {
				req.CachePrevious = prev.CacheState
			}
			res := assembleCache(t, req)
			if prev != nil {
				checkCacheReport(t, fmt.Sprint(conv, "/", turn), prev, res)
			}
			prev = res
		}
	}
}

// checkCacheReport holds cur's report against the bytes of prev's and cur's openai messages.
func checkCacheReport(t *testing.T, at string, prev, cur *Result) {
	t.Helper()
	rep := cur.Cache
	sameTools := fmt.Sprint(prev.Tools) == fmt.Sprint(cur.Tools)
	sameSystem := prev.Messages[0].Content == cur.Messages[0].Content
	prevHist := prev.Messages[1 : len(prev.Messages)-1] // no context: system, history, message
	startsWith := len(cur.Messages) > len(prevHist)
	for i := range prevHist {
		if !startsWith {
			break
		}
		a, _ := json.Marshal(prevHist[i])
		b, _ := json.Marshal(cur.Messages[1+i])
		startsWith = string(a) == string(b)
	}
	switch rep.Region {
	case "":
		if !sameTools || !sameSystem || !startsWith {
			t.Fatalf("%s: no break reported, but tools %v system %v history %v", at, sameTools, sameSystem, startsWith)
		}
		if rep.SharedTokens != used(cur, RegionTools)+used(cur, RegionInstructions)+pinnedTokens(cur)+used(prev, RegionHistory) {
			t.Fatalf("%s: shared %d", at, rep.SharedTokens)
		}
	case "tools":
		if sameTools {
			t.Fatalf("%s: tools reported changed, and they are not", at)
		}
	case "instructions", "memory":
		if !sameTools || sameSystem {
			t.Fatalf("%s: %s reported changed: tools same %v, system same %v", at, rep.Region, sameTools, sameSystem)
		}
	case "history":
		if !sameTools || !sameSystem || startsWith {
			t.Fatalf("%s: history reported changed: tools %v system %v history %v", at, sameTools, sameSystem, startsWith)
		}
	default:
		t.Fatalf("%s: report %+v", at, rep)
	}
}

func pinnedTokens(res *Result) int {
	for _, p := range res.CacheState.Parts {
		if p.Region == "memory" {
			return p.Tokens
		}
	}
	return 0
}
