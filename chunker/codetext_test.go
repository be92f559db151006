package chunker

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCodeText_SaysTheCodeWasNotParsed: without a parser, the code strategy chunks code as plain text, at
// lines, and every chunk says so, with the code strategy's metadata keys.
func TestCodeText_SaysTheCodeWasNotParsed(t *testing.T) {
	t.Parallel()
	text := "package p\n\n// F does it.\nfunc F() {\n\tprintln(1)\n}\n\n" + strings.Repeat("var x = 1\n", 60)
	for _, lang := range []string{"go", "golang", "Python"} {
		opts := Options{ChunkSize: 40, NoOverlap: true, Language: lang}
		chunks, err := New(Code)
		if err != nil {
			t.Fatal(err)
		}
		got, err := chunks.Chunk(context.Background(), text, &opts)
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		checkInvariants(t, Code, text, opts, got)
		want, _ := CodeLanguage(lang)
		for _, ch := range got {
			md := ch.Metadata
			if md[MetaParse] != ParseFallback || md[MetaParseReason] != FallbackUnavailable || md[MetaLanguage] != want ||
				md[MetaKind] != "text" || md[MetaSymbols] != "" {
				t.Fatalf("%s: chunk %d metadata %v, want a fallback for want of a parser", lang, ch.Index, md)
			}
			if text[ch.EndOffset-1] != '\n' {
				t.Errorf("%s: chunk %d ends inside a line: %q", lang, ch.Index, ch.Content)
			}
			first := ch.StartOffset + len(ch.Content) - len(strings.TrimLeft(ch.Content, " \t\n"))
			last := ch.StartOffset + len(strings.TrimRight(ch.Content, " \t\n")) - 1
			if md[MetaStartLine] != strconv.Itoa(1+strings.Count(text[:first], "\n")) ||
				md[MetaEndLine] != strconv.Itoa(1+strings.Count(text[:last], "\n")) {
				t.Errorf("%s: chunk %d lines %s-%s, text %q", lang, ch.Index, md[MetaStartLine], md[MetaEndLine], ch.Content)
			}
		}
	}
}

// TestCodeText_PlainTextIsNoFallback: asked for plain text, the code strategy did what was asked.
func TestCodeText_PlainTextIsNoFallback(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"", "text", "TEXT"} {
		chunks, err := NewCodeText().Chunk(context.Background(), "a = 1\nb = 2\n", &Options{Language: lang})
		if err != nil || len(chunks) != 1 {
			t.Fatalf("%q: %v, %v", lang, chunks, err)
		}
		md := chunks[0].Metadata
		if _, ok := md[MetaParse]; ok || md[MetaLanguage] != "text" || md[MetaKind] != "text" || md[MetaEndLine] != "2" {
			t.Errorf("%q: metadata %v", lang, md)
		}
	}
}

func TestCodeText_Errors(t *testing.T) {
	t.Parallel()
	c := NewCodeText()
	for _, bad := range []string{"cobol", "c++", "markdown"} {
		_, err := c.Chunk(context.Background(), "x", &Options{Language: bad})
		if !errors.Is(err, ErrUnknownLanguage) || !IsOptionError(err) || !strings.Contains(err.Error(), "go, java, javascript, python, rust, tsx, typescript") {
			t.Errorf("Language %q: %v, want ErrUnknownLanguage listing the known ones", bad, err)
		}
	}
	if _, err := c.Chunk(context.Background(), "x", &Options{Strategy: Recursive}); !errors.Is(err, ErrStrategyMismatch) {
		t.Errorf("strategy mismatch: %v", err)
	}
	if _, err := c.Chunk(context.Background(), "x", nil); err != nil {
		t.Errorf("nil options: %v", err)
	}
	if _, err := NewRecursive().Chunk(context.Background(), "x", &Options{Language: "go"}); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("Language with the recursive strategy: %v, want ErrNotApplicable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Chunk(ctx, strings.Repeat("line\n", 1000), &Options{ChunkSize: 16, Language: "go"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestCodeLanguage(t *testing.T) {
	t.Parallel()
	for alias, want := range map[string]string{
		"go": "go", "golang": "go", "Go": "go", "py": "python", "python3": "python", "js": "javascript",
		"jsx": "javascript", "ts": "typescript", " TypeScript ": "typescript", "tsx": "tsx", "rs": "rust",
		"rust": "rust", "java": "java", "": "", "text": "",
	} {
		if got, err := CodeLanguage(alias); got != want || err != nil {
			t.Errorf("CodeLanguage(%q) = %q, %v; want %q", alias, got, err, want)
		}
	}
	if got := CodeLanguages(); !slices.Equal(got, []string{"go", "java", "javascript", "python", "rust", "tsx", "typescript"}) {
		t.Errorf("CodeLanguages() = %v", got)
	}
	CodeLanguages()[0] = "changed"
	if CodeLanguages()[0] != "go" {
		t.Error("CodeLanguages returns the package's own slice")
	}
}

// TestBuilder_Window: a window's chunks join the text's with offsets and indexes into the text, lines
// numbered in the whole text, no overlap with the chunks before, and the limit of MaxChunks shared.
func TestBuilder_Window(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("alpha beta gamma\n", 20) + strings.Repeat("delta epsilon\n", 20)
	cut := strings.Index(text, "delta")
	opts := &Options{ChunkSize: 20, ChunkOverlap: 5}
	b, err := NewBuilder(context.Background(), Recursive, text, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range [][2]int{{0, cut}, {cut, len(text)}} {
		err := b.Window(w[0], w[1], func(wb *Builder) error {
			if wb.Text() != text[w[0]:w[1]] || wb.Size() != 20 {
				t.Errorf("window [%d, %d): text of %d bytes, size %d", w[0], w[1], len(wb.Text()), wb.Size())
			}
			if got, want := wb.Line(0), 1+strings.Count(text[:w[0]], "\n"); got != want {
				t.Errorf("window [%d, %d): Line(0) = %d, want %d", w[0], w[1], got, want)
			}
			return wb.Split(0, len(wb.Text()), SplitLines)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	chunks, err := b.Result()
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, Recursive, text, *opts, chunks)
	for i, ch := range chunks {
		if ch.StartOffset < cut && cut < ch.EndOffset {
			t.Errorf("chunk %d [%d, %d) spans the windows' edge %d", i, ch.StartOffset, ch.EndOffset, cut)
		}
	}

	// MaxChunks counts the chunks of every window.
	limited := &Options{ChunkSize: 20, NoOverlap: true, MaxChunks: 5}
	b, err = NewBuilder(context.Background(), Recursive, text, limited)
	if err != nil {
		t.Fatal(err)
	}
	split := func(wb *Builder) error { return wb.Split(0, len(wb.Text()), SplitLines) }
	if err := b.Window(0, 60, split); err != nil {
		t.Fatal(err)
	}
	if err := b.Window(60, len(text), split); !errors.Is(err, ErrTooManyChunks) {
		t.Fatalf("second window past MaxChunks: %v, want ErrTooManyChunks", err)
	}
	if _, err := b.Result(); !errors.Is(err, ErrTooManyChunks) {
		t.Errorf("Result after a window passed MaxChunks: %v", err)
	}
}

// TestBuilder_Pack: units become chunks of whole units within the size, neighbours sharing whole units.
func TestBuilder_Pack(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("one two three four.\n", 30)
	opts := &Options{ChunkSize: 24, ChunkOverlap: 6}
	b, err := NewBuilder(context.Background(), Recursive, text, opts)
	if err != nil {
		t.Fatal(err)
	}
	var units []Unit
	for start := 0; start < len(text); {
		end := start + strings.IndexByte(text[start:], '\n') + 1
		n, ok := b.Fits(text[start:end])
		if !ok {
			t.Fatalf("line %q does not fit", text[start:end])
		}
		units = append(units, Unit{Start: start, End: end, Tokens: n})
		start = end
	}
	b.Pack(units)
	chunks, err := b.Result()
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, Recursive, text, *opts, chunks)
	for _, ch := range chunks {
		if (ch.StartOffset != 0 && text[ch.StartOffset-1] != '\n') || text[ch.EndOffset-1] != '\n' {
			t.Errorf("chunk %d [%d, %d) cuts a unit", ch.Index, ch.StartOffset, ch.EndOffset)
		}
	}
	if len(chunks) < 2 || chunks[1].StartOffset >= chunks[0].EndOffset {
		t.Errorf("neighbours share nothing: %d chunks", len(chunks))
	}
	if _, err := NewBuilder(context.Background(), Fixed, text, &Options{Language: "go"}); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("NewBuilder with another strategy's option: %v", err)
	}
}
