package assembler

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenRequest is a request of real text in many shapes: knowledge with exact and near copies, counts
// cached for some items, a budget from tiny to larger than everything, varied policies and formats. The
// golden file records what the assembler made of each, so that speed work cannot change a result.
func goldenRequest(r *rand.Rand, corpus []string) *Request {
	text := corpus[r.IntN(len(corpus))]
	piece := func(size int) string {
		size = min(size, len(text)-1)
		start := r.IntN(len(text) - size)
		return strings.ToValidUTF8(text[start:start+size], "")
	}
	model := []string{"gpt-4o", "gpt-4o", "gpt-4", "claude-sonnet-4-5"}[r.IntN(4)]
	req := &Request{
		Model:        model,
		Format:       []string{FormatOpenAI, FormatAnthropic, FormatText}[r.IntN(3)],
		MaxTokens:    []int{60, 300, 1500, 4000, 16000, 60000}[r.IntN(6)] + r.IntN(200),
		Instructions: "You are a helpful assistant. Cite sources as [n].",
		Message:      piece(10 + r.IntN(100)),
	}
	if r.IntN(3) == 0 {
		p := &Policy{
			NearDuplicate:  []float64{0, 0.5, 0.7, 0.95, 1}[r.IntN(5)],
			KnowledgeOrder: []string{"", OrderScore, OrderDocument, OrderLostInTheMiddle}[r.IntN(4)],
			MinScore:       []float64{0, 0, 0.3}[r.IntN(3)],
		}
		if r.IntN(2) == 0 {
			p.Regions = []RegionPolicy{
				{Name: RegionKnowledge, Priority: 1, MinShare: 0.1 * float64(r.IntN(4)), MaxShare: 0.2 * float64(r.IntN(6))},
				{Name: RegionHistory, Priority: 2 + r.IntN(2), MinShare: 0.1 * float64(r.IntN(3))},
			}
		}
		req.Policy = p
	}
	enc, err := tokenizer.ForModel(model)
	if err != nil {
		panic(err)
	}
	counts := func(key, s string) map[string]int {
		switch r.IntN(3) {
		case 0:
			return nil
		default:
			return map[string]int{key: enc.Counter().Count(s)}
		}
	}
	var kept []string
	for i := range r.IntN(120) {
		c := piece(20 + r.IntN(1200))
		switch {
		case len(kept) > 0 && r.IntN(6) == 0: // an exact copy, spacing aside
			c = "  " + kept[r.IntN(len(kept))] + "\n"
		case len(kept) > 0 && r.IntN(5) == 0: // a near copy
			c = kept[r.IntN(len(kept))]
			at := r.IntN(len(c) + 1)
			for at < len(c) && !isRuneStart(c, at) {
				at++
			}
			c = c[:at] + []string{" indeed", ".", " and so on and so forth", "X"}[r.IntN(4)] + c[at:]
		}
		kept = append(kept, c)
		k := Knowledge{ID: fmt.Sprintf("k%d", i), Content: c, Score: float64(r.IntN(50)) / 50, Source: "doc" + fmt.Sprint(r.IntN(3)),
			DocumentID: fmt.Sprint(r.IntN(4)), StartOffset: r.IntN(1000)}
		if r.IntN(3) > 0 {
			k.TokenCounts = counts(KnowledgeCountKey(enc.Encoding), RenderedKnowledge(c))
		}
		req.Knowledge = append(req.Knowledge, k)
	}
	for i := range r.IntN(300) {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		m := Message{Role: role, Content: piece(1 + r.IntN(600))}
		if r.IntN(40) == 0 {
			m.Content = " "
		}
		if role == "assistant" && r.IntN(8) == 0 {
			id := fmt.Sprintf("call%d", i)
			m.ToolCalls = []ToolCall{{ID: id, Type: "function", Function: ToolCallFunction{Name: "lookup", Arguments: `{"q":"x"}`}}}
			req.History = append(req.History, m)
			if r.IntN(10) > 0 {
				req.History = append(req.History, Message{Role: "tool", ToolCallID: id, Content: piece(1 + r.IntN(400))})
			}
			continue
		}
		if r.IntN(2) == 0 {
			m.TokenCounts = counts(enc.Encoding, m.Content)
		}
		req.History = append(req.History, m)
	}
	for i := range r.IntN(3) {
		req.Memory = append(req.Memory, MemoryFact{Key: fmt.Sprintf("m%d", i), Value: piece(5 + r.IntN(60)), Pinned: r.IntN(2) == 0})
	}
	for i := range r.IntN(3) {
		req.ToolOutputs = append(req.ToolOutputs, ToolOutput{Tool: "search", CallID: fmt.Sprintf("s%d", i), Result: piece(10 + r.IntN(6000))})
	}
	return req
}

// goldenLine sums up a result: its size, the ids per region, and a hash of its whole JSON.
func goldenLine(res *Result, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	b, jerr := json.Marshal(res)
	if jerr != nil {
		return "marshal: " + jerr.Error()
	}
	sum := sha256.Sum256(b)
	var regions []string
	for _, r := range res.Report.Regions {
		regions = append(regions, fmt.Sprintf("%s:%d/%d+%d-%d", r.Name, r.Used, r.Budget, len(r.Included), len(r.Dropped)))
	}
	return fmt.Sprintf("total %d %s %s", res.TotalTokens, strings.Join(regions, " "), hex.EncodeToString(sum[:8]))
}

// TestAssemble_MatchesGolden checks that assembling 300 varied requests gives, byte for byte, the results
// recorded in testdata/golden.txt (go test -run MatchesGolden -update rewrites it). Its hashes say only that
// a result changed, over more shapes of request than a person reads; what the output looks like, and how
// a change changes it, is in the readable goldens of TestAssemble_ReadableGolden.
func TestAssemble_MatchesGolden(t *testing.T) {
	t.Parallel()
	var corpus []string
	for _, name := range []string{"english.txt", "code.go.txt", "cjk.txt", "cyrillic.txt"} {
		data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, string(data))
	}
	r := rand.New(rand.NewPCG(7, 8))
	// Under the race detector the first sweep(300) requests are assembled and held to their lines: the
	// requests come from one seeded source, in order, so they are the same requests.
	n := 300
	if !*update {
		n = sweep(300)
	}
	var got []string
	for i := range n {
		req := goldenRequest(r, corpus)
		res, err := AssembleRequest(context.Background(), req)
		got = append(got, fmt.Sprintf("%d %s", i, goldenLine(res, err)))
		if err == nil {
			for _, rr := range res.Report.Regions {
				if rr.Used > rr.Budget {
					t.Errorf("request %d: region %s used %d tokens of a budget of %d", i, rr.Name, rr.Used, rr.Budget)
				}
			}
		}
	}
	path := filepath.Join("testdata", "golden.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	for s := bufio.NewScanner(f); s.Scan(); {
		want = append(want, s.Text())
	}
	if len(want) != 300 {
		t.Fatalf("%d golden lines, want 300", len(want))
	}
	want = want[:len(got)]
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			if bad++; bad <= 5 {
				t.Errorf("result changed:\n got %s\nwant %s", got[i], want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d results changed", bad, len(got))
	}
}

// TestAssemble_ConcurrentCallsMatchSequential checks that assemblies running at once, which share pooled
// working memory, give the results that they give one at a time.
func TestAssemble_ConcurrentCallsMatchSequential(t *testing.T) {
	t.Parallel()
	var corpus []string
	for _, name := range []string{"english.txt", "cjk.txt"} {
		data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, string(data))
	}
	r := rand.New(rand.NewPCG(9, 10))
	reqs := make([]*Request, max(sweep(60), 24)) // 4 workers over 24 requests still overlap under the race detector
	want := make([]string, len(reqs))
	for i := range reqs {
		reqs[i] = goldenRequest(r, corpus)
		want[i] = goldenLine(AssembleRequest(context.Background(), reqs[i]))
	}
	const workers = 4
	got := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		got[w] = make([]string, len(reqs))
		wg.Go(func() {
			for k := range reqs {
				i := (k + w*len(reqs)/workers) % len(reqs) // each worker from its own start
				got[w][i] = goldenLine(AssembleRequest(context.Background(), reqs[i]))
			}
		})
	}
	wg.Wait()
	for w := range workers {
		for i := range reqs {
			if got[w][i] != want[i] {
				t.Errorf("worker %d, request %d:\n got %s\nwant %s", w, i, got[w][i], want[i])
			}
		}
	}
}
