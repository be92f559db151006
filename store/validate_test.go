package store_test

import (
	"testing"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// TestPrepareKnowledge_CountsTheRenderedTextUnderItsKey: the counts a store keeps for knowledge are of the
// text as the assembler renders it now, under the key that names that rendering, and given counts are
// replaced.
func TestPrepareKnowledge_CountsTheRenderedTextUnderItsKey(t *testing.T) {
	t.Parallel()
	content := `  She said "it's <fine>" & left.  `
	got, err := store.PrepareKnowledge(store.Limits{}, []store.Knowledge{{Content: content, TokenCounts: map[string]int{"o200k_base": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	counts := got[0].TokenCounts
	if len(counts) != len(store.CountedEncodings) {
		t.Fatalf("counts %v, want one per counted encoding", counts)
	}
	for _, name := range store.CountedEncodings {
		enc, _ := tokenizer.Get(name)
		if n, ok := counts[assembler.KnowledgeCountKey(name)]; !ok || n != enc.Count(assembler.RenderedKnowledge(content)) {
			t.Errorf("%s: counts %v, want %d under %q", name, counts, enc.Count(assembler.RenderedKnowledge(content)), assembler.KnowledgeCountKey(name))
		}
	}
}
