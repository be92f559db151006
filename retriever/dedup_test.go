package retriever

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// shingles returns the set of runs of shingleTerms terms (all of them for fewer), as fingerprintOf cuts them.
func shingles(terms []string) map[string]bool {
	m := map[string]bool{}
	if len(terms) < shingleTerms {
		m[strings.Join(terms, " ")] = true
		return m
	}
	for i := 0; i+shingleTerms <= len(terms); i++ {
		m[strings.Join(terms[i:i+shingleTerms], " ")] = true
	}
	return m
}

func jaccard(a, b map[string]bool) float64 {
	n := 0
	for k := range a {
		if b[k] {
			n++
		}
	}
	return float64(n) / float64(len(a)+len(b)-n)
}

// TestFingerprint_NearDuplicatesByJaccard: pairs of passages of real text, one an edit of the other (words
// replaced, or the window shifted along the text), are near-duplicates when the Jaccard similarity of their
// shingles is high, and never when it is low: none below 0.6, all from 0.9.
func TestFingerprint_NearDuplicatesByJaccard(t *testing.T) {
	t.Parallel()
	sentences := corpusSentences(t)
	rng := rand.New(rand.NewSource(1))
	var words []string
	for len(words) < 100_000 {
		words = append(words, strings.Fields(sentences[rng.Intn(len(sentences))])...)
	}
	edits := []func(start, n int) []string{
		func(start, n int) []string { return words[start : start+n] }, // a copy
		func(start, n int) []string { // one word in k replaced
			out := append([]string{}, words[start:start+n]...)
			k := 5 + rng.Intn(50)
			for i := range out {
				if rng.Intn(k) == 0 {
					out[i] = fmt.Sprint("zz", rng.Intn(1e6))
				}
			}
			return out
		},
		func(start, n int) []string { // the window moved on by up to half its length
			shift := rng.Intn(n/2 + 1)
			return words[start+shift : start+shift+n]
		},
	}
	var low, high, copies int
	for i := range 1500 {
		n := 30 + rng.Intn(370)
		start := rng.Intn(len(words) - 2*n)
		a := AppendTerms(nil, strings.Join(words[start:start+n], " "))
		b := AppendTerms(nil, strings.Join(edits[i%len(edits)](start, n), " "))
		fa, fb := fingerprintOf(a), fingerprintOf(b)
		dup := fa.duplicates(&fb)
		if dup != fb.duplicates(&fa) {
			t.Fatal("duplicates is not symmetric")
		}
		switch j := jaccard(shingles(a), shingles(b)); {
		case j == 1 && strings.Join(a, " ") == strings.Join(b, " "):
			copies++
			if !dup {
				t.Fatalf("a copy is not a duplicate: %q", a)
			}
		case j < 0.6:
			low++
			if dup {
				t.Errorf("Jaccard %.2f taken for a near-duplicate", j)
			}
		case j >= 0.9:
			high++
			if !dup {
				t.Errorf("Jaccard %.2f not taken for a near-duplicate", j)
			}
		}
	}
	if low < 100 || high < 100 || copies < 100 {
		t.Fatalf("the test made %d pairs below 0.6, %d from 0.9 and %d copies: too few to tell", low, high, copies)
	}
	if none := (fingerprint{}); none.duplicates(&none) {
		t.Error("chunks without terms are duplicates")
	}
}

// TestSearch_MMRDropsDuplicatesFirst: the same passage ingested under two documents, and a window of it
// shifted by a word, are one result in mmr mode, the most relevant of them; a passage of other words stays.
func TestSearch_MMRDropsDuplicatesFirst(t *testing.T) {
	t.Parallel()
	text := "The leader of a raft cluster replicates its log to the followers; an entry is committed once a majority stores it, and the leader then applies it to its state machine and answers the client."
	shifted := strings.SplitN(text, " ", 2)[1] + " Then it waits."
	other := "A follower that hears nothing from the leader for an election timeout becomes a candidate and asks the others for their votes."
	ix := NewIndex(IndexOptions{})
	err := ix.Add(
		mk("a", "d1", text, vec2(0)),
		mk("a-again", "d2", strings.ToUpper(text), vec2(1)), // the same words
		mk("a-shifted", "d3", shifted, vec2(2)),
		mk("b", "d4", other, vec2(30)),
	)
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Text: "raft leader replicates log", Vector: vec2(0), TopK: 4}
	q.Mode = ModeHybrid
	if got := ids(search(t, ix, q)); len(got) != 4 {
		t.Fatalf("hybrid keeps duplicates: %v", got)
	}
	for _, lambda := range []float64{0.3, 0.7, 1} {
		q.Mode, q.MMRLambda = ModeMMR, lambda
		if got := fmt.Sprint(ids(search(t, ix, q))); got != "[a b]" {
			t.Errorf("mmr, lambda %v: %v, want [a b]", lambda, got)
		}
	}
}
