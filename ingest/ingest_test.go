package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRead_DetectsTheContentType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, source, text string
		want, language     string
	}{
		{"markdown by extension", "docs/README.md", "# Hi\n", TypeMarkdown, ""},
		{"long markdown extension, any case", "Guide.MARKDOWN", "text", TypeMarkdown, ""},
		{"html by extension", "index.html", "<p>hi</p>", TypeHTML, ""},
		{"htm", "old/INDEX.HTM", "<p>hi</p>", TypeHTML, ""},
		{"xhtml", "a.xhtml", "<p>hi</p>", TypeHTML, ""},
		{"go", "main.go", "package main\n", TypeCode, "go"},
		{"python", "tool.py", "print(1)\n", TypeCode, "python"},
		{"tsx", "App.tsx", "export {}\n", TypeCode, "tsx"},
		{"rust", "lib.rs", "fn main() {}\n", TypeCode, "rust"},
		{"txt", "notes.txt", "just notes", TypeText, ""},
		{"no extension", "LICENSE", "MIT", TypeText, ""},
		{"unknown extension", "data.csv", "a,b\n1,2\n", TypeText, ""},
		{"sniffed doctype", "page.txt", "<!DOCTYPE html><title>x</title><p>y", TypeHTML, ""},
		{"sniffed doctype after space", "page", "\n\t <!doctype HTML>\n<p>y", TypeHTML, ""},
		{"sniffed html tag", "saved", "<html><body>hi</body></html>", TypeHTML, ""},
		{"sniffed html tag with attributes", "saved", "<HTML lang=en>hi", TypeHTML, ""},
		{"sniffed after a BOM", "saved", "\uFEFF<!doctype html><p>hi", TypeHTML, ""},
		{"not html: htmlx tag", "notes", "<htmlx>hi", TypeText, ""},
		{"not html: later tag", "notes", "see <html> below", TypeText, ""},
		{"extension beats sniffing", "x.md", "<!doctype html><p>hi", TypeMarkdown, ""},
		{"code beats sniffing", "x.js", "<html>", TypeCode, "javascript"},
		{"empty", "empty.txt", "", TypeText, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := Read(tt.source, []byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if doc.ContentType != tt.want {
				t.Errorf("ContentType = %q, want %q", doc.ContentType, tt.want)
			}
			if got := doc.Metadata["language"]; got != tt.language {
				t.Errorf("language = %q, want %q", got, tt.language)
			}
			if doc.ID != tt.source || doc.Source != tt.source || doc.Metadata["source"] != tt.source {
				t.Errorf("ID, Source, source = %q, %q, %q, want %q", doc.ID, doc.Source, doc.Metadata["source"], tt.source)
			}
		})
	}
}

// TestReadAs_TheTypeGivenIsTheDocuments: a content type given is not detected again, whatever the
// source's extension or the text's first bytes; "" detects it as Read does.
func TestReadAs_TheTypeGivenIsTheDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		source, contentType, text string
		want, format, title       string
	}{
		{"notes.md", TypeText, "# Title\n\nbody", TypeText, "text", ""},
		{"page.txt", TypeText, "<!doctype html><title>x</title><p>y", TypeText, "text", ""},
		{"page.html", TypeMarkdown, "# Heading\n", TypeMarkdown, "markdown", "Heading"},
		{"notes", TypeHTML, "<title>T</title><p>hi</p>", TypeHTML, "markdown", "T"},
		{"main.go", TypeText, "package main\n", TypeText, "text", ""},
		{"README", TypeMarkdown, "# Read me\n", TypeMarkdown, "markdown", "Read me"},
		{"notes.md", "", "# Title\n", TypeMarkdown, "markdown", "Title"},
	}
	for _, tt := range tests {
		doc, err := ReadAs(tt.source, tt.contentType, []byte(tt.text))
		if err != nil {
			t.Fatalf("%s as %q: %v", tt.source, tt.contentType, err)
		}
		if doc.ContentType != tt.want || doc.Metadata["format"] != tt.format || doc.Metadata["title"] != tt.title || doc.Source != tt.source {
			t.Errorf("%s as %q: type %q, format %q, title %q, source %q; want %q, %q, %q", tt.source, tt.contentType,
				doc.ContentType, doc.Metadata["format"], doc.Metadata["title"], doc.Source, tt.want, tt.format, tt.title)
		}
	}
	if doc, err := ReadAs("tool.py", TypeCode, []byte("print(1)\n")); err != nil || doc.ContentType != TypeCode || doc.Metadata["language"] != "python" {
		t.Errorf("code: %+v, %v", doc, err)
	}
	for _, tt := range []struct{ source, contentType string }{{"notes.txt", TypeCode}, {"x", "pdf"}, {"x.md", "Markdown"}} {
		if _, err := ReadAs(tt.source, tt.contentType, []byte("x")); !errors.Is(err, ErrContentType) {
			t.Errorf("%s as %q: %v, want ErrContentType", tt.source, tt.contentType, err)
		}
	}
}

func TestRead_MetadataFormatAndTitle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		source, text, format, title string
	}{
		{"a.md", "intro\n\n# The Title #\n\n# Second\n", "markdown", "The Title"},
		{"a.md", "---\ntitle: x\n# not this\n---\n\n```\n# nor this\n```\n    # nor this\nSetext\n======\n", "markdown", "Setext"},
		{"a.md", "## Only a subsection\n", "markdown", ""},
		{"a.md", "#hashtag is not a heading\n", "markdown", ""},
		{"a.html", "<title>  A \n page </title><h1>H</h1>", "markdown", "A page"},
		{"a.html", "<h2>x</h2><h1>First <em>h1</em></h1><h1>Second</h1>", "markdown", "First h1"},
		{"a.go", "package a\n", "code", ""},
		{"a.txt", "# looks like markdown\n", "text", ""},
	}
	for _, tt := range tests {
		doc, err := Read(tt.source, []byte(tt.text))
		if err != nil {
			t.Fatal(err)
		}
		if doc.Metadata["format"] != tt.format {
			t.Errorf("%s %q: format = %q, want %q", tt.source, tt.text, doc.Metadata["format"], tt.format)
		}
		title, ok := doc.Metadata["title"]
		if title != tt.title || ok != (tt.title != "") {
			t.Errorf("%s %q: title = %q (present %v), want %q", tt.source, tt.text, title, ok, tt.title)
		}
	}
}

func TestRead_TextIsTheInputForTextMarkdownAndCode(t *testing.T) {
	t.Parallel()
	text := "# Title\r\n\r\n  indented\ttabs \n\n\ntrailing   \n"
	for _, source := range []string{"a.txt", "a.md", "a.py"} {
		doc, err := Read(source, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if doc.Text != text {
			t.Errorf("%s: Text = %q, want the input unchanged", source, doc.Text)
		}
	}
}

func TestRead_HashIsTheSHA256OfTheRawBytes(t *testing.T) {
	t.Parallel()
	raw := []byte("\uFEFF<!doctype html><p>same bytes</p>")
	a, err := Read("one.html", raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read("elsewhere/two.txt", bytes.Clone(raw))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if want := hex.EncodeToString(sum[:]); a.Hash != want || b.Hash != want {
		t.Errorf("Hash = %s and %s, want %s", a.Hash, b.Hash, want)
	}
	c, err := Read("one.html", append(bytes.Clone(raw), ' '))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash == a.Hash {
		t.Error("a changed byte left the Hash unchanged")
	}
	again, _ := Read("one.html", raw)
	if again.Text != a.Text || again.Hash != a.Hash || again.ContentType != a.ContentType {
		t.Error("reading the same bytes twice gave different documents")
	}
}

func TestRead_RejectsBinaryContent(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	random := make([]byte, 4096)
	x := uint32(1)
	for i := range random {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		random[i] = byte(x) | 0x80 // no NUL: rejected for its invalid UTF-8
	}
	tests := map[string][]byte{
		"png":                         png,
		"NUL in text":                 []byte("hello\x00world"),
		"NUL at 8 KiB - 1":            append(bytes.Repeat([]byte("a"), 8<<10-1), 0),
		"random high bytes":           random,
		"latin-1 heavy":               bytes.Repeat([]byte("caf\xe9 "), 10),
		"utf-16 with NUL chars":       {0xFF, 0xFE, 'a', 0, 0, 0, 'b', 0},
		"five bad bytes of a few":     []byte("\xfd\xfc\xfb\xfa\xf9"),
		"utf-16 with lone surrogates": append([]byte{0xFF, 0xFE}, bytes.Repeat([]byte{0x00, 0xDC}, 10)...),
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			doc, err := Read("file.txt", raw)
			if !errors.Is(err, ErrBinary) {
				t.Fatalf("Read = %q, %v; want an error wrapping ErrBinary", doc.Text, err)
			}
			if !strings.Contains(err.Error(), "file.txt") {
				t.Errorf("error %q does not name the source", err)
			}
		})
	}
}

func TestRead_ToleratesAFewInvalidBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want string
		bad  string
	}{
		{"one latin-1 word", "Caf\xe9 au lait", "Caf\uFFFD au lait", "1"},
		{"a cut character at the end", "na\xc3\xafve r\xc3", "na\u00efve r\uFFFD", "1"},
		{"a run of invalid bytes is one replacement", "a\xff\xfe\xfdb", "a\uFFFDb", "3"},
		{"NUL after the first 8 KiB is text", strings.Repeat("a", 8<<10) + "\x00", strings.Repeat("a", 8<<10) + "\x00", ""},
		{"a UTF-8 BOM is removed", "\xef\xbb\xbfhello", "hello", ""},
		{"one in 64", strings.Repeat("a", 630) + strings.Repeat("\xff ", 10), strings.Repeat("a", 630) + strings.Repeat("\uFFFD ", 10), "10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := Read("a.txt", []byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if doc.Text != tt.want {
				t.Errorf("Text = %q, want %q", doc.Text, tt.want)
			}
			if doc.Metadata["invalid_utf8"] != tt.bad {
				t.Errorf("invalid_utf8 = %q, want %q", doc.Metadata["invalid_utf8"], tt.bad)
			}
		})
	}
}

func TestRead_DecodesUTF16WithAByteOrderMark(t *testing.T) {
	t.Parallel()
	le := []byte{0xFF, 0xFE, 'h', 0, 'i', 0, 0x3D, 0xD8, 0x00, 0xDE} // "hi😀"
	be := []byte{0xFE, 0xFF, 0, 'h', 0, 'i', 0xD8, 0x3D, 0xDE, 0x00}
	for name, raw := range map[string][]byte{"utf-16le": le, "utf-16be": be} {
		doc, err := Read("a.txt", raw)
		if err != nil {
			t.Fatal(err)
		}
		if doc.Text != "hi😀" || doc.Metadata["encoding"] != name {
			t.Errorf("%s: Text %q, encoding %q", name, doc.Text, doc.Metadata["encoding"])
		}
	}
	doc, err := Read("a.txt", []byte{0xFF, 0xFE, 'h', 0, 0x3D, 0xD8, 'x'}) // lone surrogate, odd byte
	if err != nil {
		t.Fatal(err)
	}
	if doc.Text != "h\uFFFD\uFFFD" {
		t.Errorf("Text = %q", doc.Text)
	}
}

func TestRead_EnforcesTheSizeLimit(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte("a"), 100)
	if _, err := (Limits{MaxBytes: 99}).Read("a.txt", raw); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxBytes 99: err = %v, want ErrTooLarge", err)
	}
	if _, err := (Limits{MaxBytes: 100}).Read("a.txt", raw); err != nil {
		t.Errorf("MaxBytes 100: %v", err)
	}
	if _, err := (Limits{MaxBytes: -1}).Read("a.txt", bytes.Repeat([]byte("a"), DefaultMaxBytes+1)); err != nil {
		t.Errorf("no limit: %v", err)
	}
	if _, err := Read("a.txt", bytes.Repeat([]byte("a"), DefaultMaxBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("default limit: err = %v, want ErrTooLarge", err)
	}
}

// FuzzRead: any bytes give an error, or a Document with valid UTF-8 Text, a type and the raw bytes' Hash.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"", "hello", "# T\n", "<!doctype html><p>x", "\xff\xfe\x00a", "\xfe\xff\x00a",
		"caf\xe9", "\x00", "<html><script>x</script>"} {
		for _, name := range []string{"a.txt", "a.md", "a.html", "a.go", "a"} {
			f.Add(name, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, source string, raw []byte) {
		doc, err := Read(source, raw)
		if err != nil {
			if !errors.Is(err, ErrBinary) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !utf8.ValidString(doc.Text) {
			t.Fatalf("Text is not valid UTF-8: %q", doc.Text)
		}
		for k, v := range doc.Metadata {
			if !utf8.ValidString(v) && k != "source" {
				t.Fatalf("Metadata[%q] is not valid UTF-8: %q", k, v)
			}
		}
		sum := sha256.Sum256(raw)
		if doc.Hash != hex.EncodeToString(sum[:]) {
			t.Fatal("Hash is not the SHA-256 of raw")
		}
		switch doc.ContentType {
		case TypeText, TypeMarkdown, TypeCode:
			if utf8.Valid(raw) && !bytes.HasPrefix(raw, []byte("\xef\xbb\xbf")) && !bytes.HasPrefix(raw, []byte("\xff\xfe")) &&
				!bytes.HasPrefix(raw, []byte("\xfe\xff")) && doc.Text != string(raw) {
				t.Fatalf("valid UTF-8 text changed: %q -> %q", raw, doc.Text)
			}
		case TypeHTML:
		default:
			t.Fatalf("ContentType %q", doc.ContentType)
		}
	})
}
