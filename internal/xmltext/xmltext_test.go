// SPDX-License-Identifier: Apache-2.0

package xmltext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var (
	unescaper  = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'")
	references = strings.NewReplacer("&amp;", "", "&lt;", "", "&gt;", "", "&quot;", "", "&#39;", "")
)

// FuzzKnowledge: Escape leaves no character of markup but in its references, and unescaping gives the
// text back (invalid UTF-8 as U+FFFD); Knowledge is the trimmed content escaped and ended by one line
// break, written in one piece.
func FuzzKnowledge(f *testing.F) {
	for _, s := range []string{"", "plain", `  She said "it's <fine>" & left.  `, "\xff<\xe2\x80", "a\n\nb\n", "&amp;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if strings.ContainsAny(references.Replace(e), `&<>"'`) {
			t.Fatalf("Escape(%q) = %q leaves markup", s, e)
		}
		if got, want := unescaper.Replace(e), strings.ToValidUTF8(s, "\uFFFD"); got != want || !utf8.ValidString(e) {
			t.Fatalf("Escape(%q) = %q, which unescapes to %q", s, e, got)
		}
		if HasMarkup(s) != (strings.ContainsAny(s, `&<>"'`)) {
			t.Fatalf("HasMarkup(%q) = %v", s, HasMarkup(s))
		}
		if got, want := Knowledge(s), Escape(strings.TrimSpace(s))+"\n"; got != want {
			t.Fatalf("Knowledge(%q) = %q, want %q", s, got, want)
		}
	})
}
