package assembler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// refShingles is the plain definition of the word 3-shingles: split into lowercased words, hash each
// word, hash each run of three (the whole text when it has fewer).
func refShingles(text string) []uint64 {
	const basis, prime = 14695981039346656037, 1099511628211
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	hashes := []uint64{}
	for _, word := range words {
		w := uint64(basis)
		for _, r := range word {
			w = (w ^ uint64(unicode.ToLower(r))) * prime
		}
		hashes = append(hashes, w)
	}
	if len(hashes) < 3 { // the whole text, and an empty word after it
		w := [3]uint64{0, 0, basis}
		copy(w[2-len(hashes):2], hashes)
		return []uint64{mix3(w[0], w[1], w[2])}
	}
	var out []uint64
	for i := 2; i < len(hashes); i++ {
		out = append(out, mix3(hashes[i-2], hashes[i-1], hashes[i]))
	}
	return out
}

// refNear is the plain definition of nearIndex: a text is a near-duplicate of an earlier kept text that
// shares one of its eight smallest distinct shingle hashes and has a Jaccard similarity of at least
// threshold.
type refNear struct{ sets [][]uint64 }

func (x *refNear) addUnlessNear(text string, threshold float64) bool {
	set := slices.Compact(slices.Sorted(slices.Values(refShingles(text))))
	sketch := set[:min(len(set), sketchSize)]
	for _, other := range x.sets {
		shares := false
		for _, h := range other[:min(len(other), sketchSize)] {
			shares = shares || slices.Contains(sketch, h)
		}
		if !shares {
			continue
		}
		inter := 0
		for _, h := range set {
			if _, ok := slices.BinarySearch(other, h); ok {
				inter++
			}
		}
		if float64(inter)/float64(len(set)+len(other)-inter) >= threshold {
			return true
		}
	}
	x.sets = append(x.sets, set)
	return false
}

// nearTexts returns texts over a small vocabulary, with exact, edited and reordered copies, so that
// similarities cover the whole range.
func nearTexts(r *rand.Rand, n int) []string {
	words := []string{"the", "Plan", "costs", "twenty", "dollars", "a", "month", "中文", "Привет", "x1", "42", "support"}
	var texts []string
	for range n {
		var b strings.Builder
		if len(texts) > 0 && r.IntN(2) == 0 {
			base := texts[r.IntN(len(texts))]
			fields := strings.Fields(base)
			for range r.IntN(4) {
				if len(fields) > 0 {
					i := r.IntN(len(fields))
					fields[i] = words[r.IntN(len(words))]
				}
			}
			b.WriteString(strings.Join(fields, []string{" ", "  ", ", ", "\n"}[r.IntN(4)]))
		} else {
			for i := range r.IntN(60) {
				if i > 0 {
					b.WriteString([]string{" ", " ", ". ", "-"}[r.IntN(4)])
				}
				b.WriteString(words[r.IntN(len(words))])
			}
		}
		texts = append(texts, b.String())
	}
	return texts
}

func TestAppendShingles_MatchesTheDefinition(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 1))
	texts := append(nearTexts(r, 300), "", "one", "one two", "one two three", "  a  ", "é", "\xff\xfe bad utf8 \xc3")
	for _, text := range texts {
		if got, want := appendShingles(nil, text), refShingles(text); !slices.Equal(got, want) {
			t.Errorf("%q: shingles %x, want %x", text, got, want)
		}
	}
	if got := appendShingles([]uint64{7}, "a b c d"); len(got) != 3 || got[0] != 7 {
		t.Errorf("appendShingles does not append: %x", got)
	}
}

func TestNearIndex_MatchesTheDefinition(t *testing.T) {
	t.Parallel()
	for _, threshold := range []float64{0, 0.3, 0.5, 0.7, 0.9, 0.95, 1} {
		t.Run(fmt.Sprint(threshold), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(2, uint64(threshold*100)))
			x, ref := newNearIndex(), &refNear{}
			nears := 0
			for i, text := range nearTexts(r, 400) {
				got, want := x.addUnlessNear(text, threshold), ref.addUnlessNear(text, threshold)
				if got != want {
					t.Fatalf("text %d %q: near %v, want %v", i, text, got, want)
				}
				if got {
					nears++
				}
			}
			if threshold > 0 && threshold < 1 && (nears == 0 || nears == 400) {
				t.Errorf("%d of 400 texts are near-duplicates: the test proves little", nears)
			}
		})
	}
}

func TestNearIndex_Similarity(t *testing.T) {
	t.Parallel()
	// Twenty distinct shingles, and texts sharing 19, 18 or none of them.
	words := make([]string, 22)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	base := strings.Join(words, " ")
	for _, tc := range []struct {
		other     string
		threshold float64
		near      bool
	}{
		{base, 1, true},
		{strings.ToUpper(base), 1, true},                         // case and spacing aside
		{base + " w22", 20.0 / 21, true},                         // 20 of 21
		{base + " w22", 20.0/21 + 1e-9, false},                   // just below
		{strings.Join(words[1:], " "), 19.0 / 20, true},          // 19 of 20
		{strings.Join(words[2:], " ") + " x y", 18.0 / 22, true}, // 18 of 22
		{strings.Join(words[2:], " ") + " x y", 0.82, false},
	} {
		x := newNearIndex()
		if x.addUnlessNear(base, tc.threshold) {
			t.Fatal("the first text is a near-duplicate")
		}
		if got := x.addUnlessNear(tc.other, tc.threshold); got != tc.near {
			t.Errorf("%q at %v: near %v, want %v", tc.other, tc.threshold, got, tc.near)
		}
	}
}

func TestNearIndex_ManyTexts(t *testing.T) {
	t.Parallel()
	// Enough texts to grow the sketch table many times; each is kept, and a copy of each is found.
	x := newNearIndex()
	text := func(i int) string { return fmt.Sprintf("text %d is about topic %d and %d", i, i*7, i*13) }
	for i := range 2000 {
		if x.addUnlessNear(text(i), 0.9) {
			t.Fatalf("text %d is a near-duplicate", i)
		}
	}
	for i := range 2000 {
		if !x.addUnlessNear(strings.ToUpper(text(i)), 0.9) {
			t.Fatalf("copy of text %d is not found", i)
		}
	}
}
