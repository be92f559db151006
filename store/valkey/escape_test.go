package valkey

import (
	"strings"
	"testing"
)

// FuzzEscape: unescape inverts escape, escaped ids hold none of the bytes that structure a key, and
// unescape accepts only what escape can have made (so a key cannot be read as another tenant's).
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "acme", "we:ird {t}%20 ü", "%", "%2", "%zz", "%3a", "%3A", "a\x00b", "}:colls"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := escape(s)
		for i := 0; i < len(e); i++ {
			switch {
			case e[i] == '%' && (i+2 >= len(e) || !strings.ContainsRune(hexDigits, rune(e[i+1])) || !strings.ContainsRune(hexDigits, rune(e[i+2]))):
				t.Fatalf("escape(%q) = %q: a %% not followed by two hex digits", s, e)
			case e[i] != '%' && mustEscape(e[i]):
				t.Fatalf("escape(%q) = %q keeps the byte %q", s, e, e[i])
			}
		}
		if got, ok := unescape(e); !ok || got != s {
			t.Fatalf("unescape(escape(%q)) = %q, %v", s, got, ok)
		}
		if got, ok := unescape(s); ok && escape(got) != s {
			t.Fatalf("unescape(%q) = %q, accepted, but escape gives %q", s, got, escape(got))
		}
	})
}

const hexDigits = "0123456789ABCDEF"
