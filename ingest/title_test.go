package ingest

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRead_TitleIsBounded: a first heading or <title> of any length gives a title of at most
// MaxTitleBytes, a prefix of it cut between characters.
func TestRead_TitleIsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Überschrift ", 2000) // 24 KB, two-byte characters among one-byte ones
	for name, text := range map[string]string{
		"doc.md":   "# " + long + "\n\nBody text.\n",
		"doc.html": "<html><head><title>" + long + "</title></head><body><p>Body text.</p></body></html>",
	} {
		d, err := Read(name, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		title := d.Metadata["title"]
		if len(title) > MaxTitleBytes || len(title) < MaxTitleBytes-utf8.UTFMax || !utf8.ValidString(title) || !strings.HasPrefix(long, title) {
			t.Errorf("%s: a title of %d bytes (valid UTF-8 %v), want a prefix of the heading of at most %d", name, len(title), utf8.ValidString(title), MaxTitleBytes)
		}
	}
	if d, err := Read("short.md", []byte("# Short\n")); err != nil || d.Metadata["title"] != "Short" {
		t.Errorf("a short title: %q %v", d.Metadata["title"], err)
	}
}

// FuzzCutTitle: a cut title is a valid prefix of at most MaxTitleBytes, as long as it can be.
func FuzzCutTitle(f *testing.F) {
	f.Add(strings.Repeat("é", 400))
	f.Add(strings.Repeat("a", 511) + "日本")
	f.Fuzz(func(t *testing.T, s string) {
		got := cutTitle(s)
		if !strings.HasPrefix(s, got) || len(got) > MaxTitleBytes {
			t.Fatalf("cutTitle(%q) = %q", s, got)
		}
		if len(s) <= MaxTitleBytes && got != s {
			t.Fatalf("a short title was cut: %q", got)
		}
		if len(s) > MaxTitleBytes && len(got) < MaxTitleBytes-utf8.UTFMax+1 {
			t.Fatalf("cut to %d bytes, too short", len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("a cut inside a character: %q", got)
		}
	})
}
