package stopword

import "testing"

// TestIsEnglish_IsTheList: the switch and the list are the same words.
func TestIsEnglish_IsTheList(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, w := range English {
		if !IsEnglish(w) {
			t.Errorf("%q is in English but IsEnglish says no", w)
		}
		seen[w] = true
	}
	for _, w := range []string{"", "A", "the ", "thee", "then", "which", "what"} {
		if IsEnglish(w) != seen[w] {
			t.Errorf("IsEnglish(%q) = %v", w, IsEnglish(w))
		}
	}
	if len(seen) != len(English) {
		t.Errorf("English holds a word twice")
	}
}
