package retriever

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// checkOrder checks the index's ords: byID holds the slots below len(byID) in chunk ID order (equal IDs, a
// dead slot and its replacement, in slot order), ord is its inverse, and at most a sixteenth of the slots
// have none.
func checkOrder(t *testing.T, ix *Index) {
	t.Helper()
	n := len(ix.byID)
	if len(ix.ord) != n || n > len(ix.entries) || 16*(len(ix.entries)-n) > len(ix.entries) {
		t.Fatalf("%d ords, %d in byID, %d slots", len(ix.ord), n, len(ix.entries))
	}
	for pos, s := range ix.byID {
		if int(s) >= n || ix.ord[s] != uint32(pos) {
			t.Fatalf("byID[%d] = %d, whose ord is %d (of %d)", pos, s, ix.ord[min(int(s), n-1)], n)
		}
		if pos > 0 {
			p := ix.byID[pos-1]
			if c := cmp.Or(strings.Compare(ix.entries[p].chunk.ID, ix.entries[s].chunk.ID), cmp.Compare(p, s)); c >= 0 {
				t.Fatalf("byID[%d] = slot %d (%q) after slot %d (%q)", pos, s, ix.entries[s].chunk.ID, p, ix.entries[p].chunk.ID)
			}
		}
	}
}

// randomID returns one of a few hundred chunk IDs, many sharing long prefixes as the engine's do (a
// document ID, "#", the chunk's number), some short, some not ASCII.
func randomID(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return []string{"a", "b", "ab", "a0", "é", "Z", "東京", "a\x00"}[rng.IntN(8)]
	case 1:
		return fmt.Sprintf("c%d", rng.IntN(40))
	}
	return fmt.Sprintf("collection/docs/guide-%d.md#%d", rng.IntN(5), rng.IntN(30))
}

// randomChunk returns a chunk of one of few texts and vectors, so that many chunks tie on score.
func randomChunk(rng *rand.Rand) (id, doc, text string, vec []float32) {
	id = randomID(rng)
	text = []string{"alpha beta", "alpha beta gamma", "beta", "gamma delta alpha", "alpha"}[rng.IntN(5)]
	vec = [][]float32{{1, 0, 0}, {1, 1, 0}, {0, 1, 1}, {1, 0, 1}}[rng.IntN(4)]
	return id, fmt.Sprint("d", rng.IntN(12)), text, vec
}

// TestSearch_TiesByChunkIDThroughWrites: whatever the writes (batches large and small, replacements,
// removals, compactions), ties rank by chunk ID, a smaller TopK gets the first results of a larger one, and
// an index of the same chunks added at once in another order gives the same results: the ords that break
// ties, and the comparison of IDs for the slots without one yet, order chunks as their IDs do.
func TestSearch_TiesByChunkIDThroughWrites(t *testing.T) {
	t.Parallel()
	queries := []Query{
		{Text: "alpha", Mode: ModeKeyword}, {Text: "beta gamma", Mode: ModeKeyword},
		{Vector: []float32{1, 0, 0}, Mode: ModeVector}, {Vector: []float32{0, 1, 1}, Mode: ModeVector},
		{Text: "alpha", Vector: []float32{1, 1, 0}, Mode: ModeHybrid}, {Text: "delta", Vector: []float32{1, 0, 1}, Mode: ModeMMR},
	}
	withoutOrd := 0 // searches that met slots without an ord
	seeds := 40
	if raceEnabled {
		seeds = 8 // one goroutine's index: the run without the detector runs all 40
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 12))
		ix := NewIndex(IndexOptions{HNSWThreshold: -1})
		live := map[string][]any{} // ID -> document, text, vector
		for op := range 80 {
			if rng.IntN(6) == 0 {
				doc := fmt.Sprint("d", rng.IntN(12))
				ix.RemoveDocument(doc)
				for id, c := range live {
					if c[0] == doc {
						delete(live, id)
					}
				}
			} else {
				size := 1 + rng.IntN(3)
				if rng.IntN(8) == 0 {
					size = 20 + rng.IntN(40)
				}
				for range size {
					id, doc, text, vec := randomChunk(rng)
					live[id] = []any{doc, text, vec}
					if err := ix.Add(mk(id, doc, text, vec)); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkOrder(t, ix)
			if op%8 != 7 {
				continue
			}
			if len(ix.entries) > len(ix.ord) {
				withoutOrd++
			}
			// The same chunks at once, in an order of their own.
			ref := NewIndex(IndexOptions{HNSWThreshold: -1})
			idList := slices.Collect(func(yield func(string) bool) {
				for id := range live {
					if !yield(id) {
						return
					}
				}
			})
			slices.Sort(idList)
			rng.Shuffle(len(idList), func(i, j int) { idList[i], idList[j] = idList[j], idList[i] })
			for _, id := range idList {
				c := live[id]
				if err := ref.Add(mk(id, c[0].(string), c[1].(string), c[2].([]float32))); err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range queries {
				q.TopK = 1000
				all := search(t, ix, q)
				if got, want := scoresOf(all), scoresOf(search(t, ref, q)); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("seed %d op %d %+v:\n%v\nthe same chunks added at once:\n%v", seed, op, q, got, want)
				}
				if q.Mode != ModeKeyword && q.Mode != ModeVector {
					continue // fused and MMR scores tie otherwise, and their candidates are as many as TopK says
				}
				for i := 1; i < len(all); i++ {
					if all[i].Score == all[i-1].Score && all[i].Chunk.ID <= all[i-1].Chunk.ID {
						t.Fatalf("seed %d op %d %+v: a tie not in chunk ID order: %v", seed, op, q, scoresOf(all))
					}
				}
				q.TopK = 1 + rng.IntN(8)
				if got, want := scoresOf(search(t, ix, q)), scoresOf(all[:min(q.TopK, len(all))]); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("seed %d op %d %+v: %v, not the first of %v", seed, op, q, got, want)
				}
			}
		}
	}
	if withoutOrd == 0 {
		t.Fatal("no search met a slot without an ord: the comparison of IDs went untested")
	}
}

// TestTopK_MatchesASort: the heap keeps the n best of any hits, ties included, in the order of a sort by
// score and then chunk ID, for slots with ords and without.
func TestTopK_MatchesASort(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	ix := NewIndex(IndexOptions{HNSWThreshold: -1})
	seen := map[string]bool{}
	add := func(k int) {
		for len(seen) < k {
			if id := randomID(rng) + fmt.Sprint(rng.IntN(50)); !seen[id] {
				seen[id] = true
				if err := ix.Add(mk(id, "d", "text", nil)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	add(400)
	add(420) // the last ones have no ord
	if len(ix.ord) == len(ix.entries) || len(ix.ord) == 0 {
		t.Fatalf("%d ords of %d slots: want some but not all", len(ix.ord), len(ix.entries))
	}
	for range 300 {
		var hits []hit
		for _, s := range rng.Perm(len(ix.entries))[:1+rng.IntN(len(ix.entries))] {
			hits = append(hits, hit{slot: uint32(s), score: float64(rng.IntN(4))})
		}
		n := 1 + rng.IntN(60)
		top := newTopK(n, ix)
		for _, h := range hits {
			top.push(h)
		}
		got := top.sorted()
		slices.SortFunc(hits, func(a, b hit) int {
			return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(ix.entries[a.slot].chunk.ID, ix.entries[b.slot].chunk.ID))
		})
		if want := hits[:min(n, len(hits))]; !slices.Equal(got, want) {
			t.Fatalf("top %d of %d hits:\n%v\nwant\n%v", n, len(hits), got, want)
		}
	}
}
