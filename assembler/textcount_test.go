package assembler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// lineFragments make texts of many lines: line breaks of every kind (CR LF, blank lines, a break then
// spaces or a tab, NEL, LS, PS, VT, FF), words, punctuation that takes a line break into its token
// ("." ",\n"), '/', digits, CJK, emoji, accents and marks, and markup that the format escapes.
var lineFragments = []string{"\n", "\r\n", "\r", "\n\n", "\r\n\r\n", "\n  ", "\n\t", "\n    indented", "  \n", " ", "   ", "\t",
	"\u0085", "\u2028", "\u2029", "\v", "\f", "word", "Word", " word", "Hello, world.", "end.", ",", ".\n", "/", "\n/", "42", "3.14",
	"中文字", "。", "😀", "é", "e\u0301", "\u3000", "'s", "<b>", "&", "User: ", "\nAssistant: x", "func main() {\n\treturn\n}"}

func lineText(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(16) {
		b.WriteString(lineFragments[r.IntN(len(lineFragments))])
	}
	return b.String()
}

// TestText_CachedCountsGiveTheRenderingsCount: with the counts a store caches on every message and
// knowledge item (of the texts as given), the text format, which indents their lines after the first,
// still counts exactly what it renders: in both encodings, for random texts of many lines, when the
// counts are derived (a scope of its own each time) and when they come from the cache of renderings (the
// same request again), and the report's regions add up.
func TestText_CachedCountsGiveTheRenderingsCount(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 150 {
		model := []string{"gpt-4o", "gpt-4"}[i%2]
		enc := tokenizer.O200K()
		if model == "gpt-4" {
			enc = tokenizer.CL100K()
		}
		req := &Request{Model: model, Format: FormatText, MaxTokens: 2000 + r.IntN(4000), Message: lineText(r),
			CacheScope: fmt.Sprintf("textcount-%d", i)}
		for j := range 1 + r.IntN(10) {
			c := lineText(r)
			role := []string{"user", "assistant"}[j%2]
			req.History = append(req.History, Message{Role: role, Content: c, TokenCounts: map[string]int{enc.Name(): enc.Count(c)}})
		}
		for j := range r.IntN(6) {
			c := lineText(r)
			req.Knowledge = append(req.Knowledge, Knowledge{ID: fmt.Sprint(j), Content: c, Score: r.Float64(), TokenCounts: KnowledgeCounts(c)})
		}
		for j := range r.IntN(3) {
			req.ToolOutputs = append(req.ToolOutputs, ToolOutput{Tool: "search", CallID: fmt.Sprint(j), Result: lineText(r)})
		}
		for pass := range 2 { // derived, then from the cache of renderings
			res, err := AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := enc.Count(res.Text); got != res.TotalTokens {
				t.Fatalf("request %d, pass %d: TotalTokens %d, the transcript counts %d:\n%q", i, pass, res.TotalTokens, got, res.Text)
			}
			checkReportSums(t, req, res)
		}
	}
}

// TestText_RenderedCountsAreKeptPerScope: a count kept of a rendering in one cache scope is never found
// from another, and a scope holds no more than its bound.
func TestText_RenderedCountsAreKeptPerScope(t *testing.T) {
	t.Parallel()
	h := renderedHash("o200k_base", 3, "a\n  b")
	keepRenderedCount("scope-a/rendered", h, 5)
	if n, ok := cachedRenderedCount("scope-a/rendered", h); !ok || n != 5 {
		t.Errorf("kept in its scope: %d, %v", n, ok)
	}
	if _, ok := cachedRenderedCount("scope-b/rendered", h); ok {
		t.Error("found from another scope")
	}
	if renderedHash("o200k_base", 4, "a\n  b") == h || renderedHash("cl100k_base", 3, "a\n  b") == h {
		t.Error("the stored count and the count key are not in the hash")
	}
	for i := range maxScopeRenderedCounts + 10 {
		keepRenderedCount("scope-c/rendered", renderedHash("o200k_base", i, "x"), i)
	}
	renderedCounts.RLock()
	n := len(renderedCounts.scopes["scope-c/rendered"])
	renderedCounts.RUnlock()
	if n > maxScopeRenderedCounts {
		t.Errorf("a scope holds %d counts, more than %d", n, maxScopeRenderedCounts)
	}
}

// TestLineEnds_FindsEveryLineBreak checks lineEnds against lineBreak read at every byte, on texts long and
// short with breaks of every kind.
func TestLineEnds_FindsEveryLineBreak(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 14))
	for range 2000 {
		s := lineText(r)
		if r.IntN(2) == 0 {
			s = strings.Repeat("x", r.IntN(100)) + s + strings.Repeat("—", r.IntN(30)) + lineText(r)
		}
		var want []int
		for i := 0; i < len(s); {
			if n := lineBreak(s[i:]); n > 0 {
				i += n
				want = append(want, i)
				continue
			}
			i++
		}
		if got := lineEnds(s); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("lineEnds(%q) = %v, want %v", s, got, want)
		}
		if (textFormat{}).rewrites(s) != (len(want) > 0) {
			t.Fatalf("rewrites(%q) = %v", s, !(len(want) > 0))
		}
	}
}
