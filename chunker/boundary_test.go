package chunker

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestIsBoundary_AgreesWithSegmentingTheWholeText checks the grapheme boundaries the chunkers use (the
// bit set, and the checks of two characters next to ASCII) against uniseg run on the whole text, on texts
// of the characters whose rules look around: \r\n, controls, extending and prepended marks, joiners,
// regional indicators, Indic conjuncts, Hangul, invalid UTF-8.
func TestIsBoundary_AgreesWithSegmentingTheWholeText(t *testing.T) {
	t.Parallel()
	atoms := []string{"a", " ", "\r", "\n", "\r\n", "\u0301", "\u200d", "👨", "🇫", "🇷", "\u0600", "\u0915", "\u094d", "\u093f", "中", "\xff", "\u0085", "\t", "#", "\ufe0f", "\u20e3", "e", "\u1100", "\u1161", "\u11a8"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var sb strings.Builder
		for range 1 + r.IntN(12) {
			sb.WriteString(atoms[r.IntN(len(atoms))])
		}
		text := sb.String()
		want := map[int]bool{}
		for _, c := range cutsOf(graphemeCuts, text, 0, len(text)) {
			want[c] = true
		}
		b := &builder{text: text}
		bits := clusterStarts(text)
		for p := 1; p < len(text); p++ {
			if got := b.isBoundary(p); got != want[p] {
				t.Fatalf("isBoundary(%q, %d) = %v, want %v", text, p, got, want[p])
			}
			if got := bits[p/64]&(1<<(p%64)) != 0; got != want[p] {
				t.Fatalf("clusterStarts(%q) at %d: %v, want %v", text, p, got, want[p])
			}
		}
	}
}
