package chunker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/context-loom/loom/tokenizer"
)

// mdHeadings returns the section headings scanMarkdown finds, as "level:title".
func mdHeadings(text string) []string {
	var out []string
	for _, blk := range scanMarkdown(text) {
		if blk.kind == mdHeading {
			out = append(out, strconv.Itoa(blk.level)+":"+blk.title)
		}
	}
	return out
}

// mdChunk runs the markdown strategy and checks the package's invariants on the result.
func mdChunk(t testing.TB, text string, opts Options) []ChunkResult {
	t.Helper()
	chunks, err := NewMarkdown().Chunk(context.Background(), text, &opts)
	if err != nil {
		t.Fatalf("Chunk(size %d, overlap %d): %v", opts.ChunkSize, opts.ChunkOverlap, err)
	}
	checkInvariants(t, Markdown, text, opts, chunks)
	checkMarkdownPaths(t, text, chunks)
	return chunks
}

// checkMarkdownPaths asserts the markdown strategy's own promises: the blocks tile the text, and every
// chunk carries the metadata of the section it starts in and lies under that section's heading path.
func checkMarkdownPaths(t testing.TB, text string, chunks []ChunkResult) {
	t.Helper()
	blocks := scanMarkdown(text)
	if len(blocks) == 0 || blocks[0].start != 0 {
		t.Fatalf("blocks do not start at 0: %+v", blocks)
	}
	for i := 1; i < len(blocks); i++ {
		if blocks[i].start <= blocks[i-1].start || blocks[i].start >= len(text) {
			t.Fatalf("block %d starts at %d after %d (text of %d bytes)", i, blocks[i].start, blocks[i-1].start, len(text))
		}
	}
	sections := markdownSections(text, blocks)
	for _, ch := range chunks {
		first := -1
		for k, s := range sections {
			if s.start >= ch.EndOffset || s.end <= ch.StartOffset {
				continue
			}
			if first < 0 {
				first = k
				if !reflect.DeepEqual(ch.Metadata, s.meta) {
					t.Fatalf("chunk %d [%d, %d) has metadata %v; its section has %v", ch.Index, ch.StartOffset, ch.EndOffset, ch.Metadata, s.meta)
				}
				continue
			}
			if sections[first].level == 0 || s.level <= sections[first].level {
				t.Fatalf("chunk %d (%v) runs into section %v at %d, which is not under it", ch.Index, ch.Metadata, s.meta, s.start)
			}
		}
	}
}

// mdTestdata returns the Markdown test documents: the package's godebug.md and testdata/markdown.
func mdTestdata(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "markdown", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range append(files, filepath.Join("testdata", "godebug.md")) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(name)] = string(data)
	}
	return out
}

func mdCRLF(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func TestMarkdown_HeadingPathMetadata(t *testing.T) {
	t.Parallel()
	text := `Some words before the first heading, which belong to no section at all and carry no metadata.

# Guide

The guide begins with a paragraph long enough to make its section a chunk of its own, not a small one.

## Install

Installing takes a single command, and this paragraph is long enough to stand on its own as well.

### From source

Building from source needs a checkout and the Go toolchain, which this paragraph explains in words.

## Usage

Usage comes after installation; the third level is gone from the path now that a second level changed.

# Reference

A new first-level heading resets every level below it, so only the first level remains in the path.
`
	chunks := mdChunk(t, text, Options{ChunkSize: 40, NoOverlap: true})
	want := []struct {
		prefix string
		meta   map[string]string
	}{
		{"Some words", nil},
		{"# Guide", map[string]string{"h1": "Guide", "headings": "Guide"}},
		{"## Install", map[string]string{"h1": "Guide", "h2": "Install", "headings": "Guide > Install"}},
		{"### From source", map[string]string{"h1": "Guide", "h2": "Install", "h3": "From source", "headings": "Guide > Install > From source"}},
		{"## Usage", map[string]string{"h1": "Guide", "h2": "Usage", "headings": "Guide > Usage"}},
		{"# Reference", map[string]string{"h1": "Reference", "headings": "Reference"}},
	}
	if len(chunks) != len(want) {
		t.Fatalf("%d chunks, want one a section (%d): %+v", len(chunks), len(want), chunks)
	}
	for i, w := range want {
		if !strings.HasPrefix(chunks[i].Content, w.prefix) || !reflect.DeepEqual(chunks[i].Metadata, w.meta) {
			t.Errorf("chunk %d = %q %v, want it to start with %q and carry %v", i, clip(chunks[i].Content), chunks[i].Metadata, w.prefix, w.meta)
		}
	}
}

func TestMarkdown_SmallSectionTakesInOnlyItsSubsections(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		text string
		want []map[string]string // each chunk's metadata
	}{
		{
			"title over its subsections",
			"# Title\n\n## One\n\nShort.\n\n## Two\n\nShort too.\n",
			[]map[string]string{{"h1": "Title", "headings": "Title"}},
		},
		{
			"siblings stay apart",
			"## A\n\nShort.\n\n## B\n\nShort.\n",
			[]map[string]string{{"h2": "A", "headings": "A"}, {"h2": "B", "headings": "B"}},
		},
		{
			"a higher section stays apart",
			"### Deep\n\nShort.\n\n## Higher\n\nShort.\n",
			[]map[string]string{{"h3": "Deep", "headings": "Deep"}, {"h2": "Higher", "headings": "Higher"}},
		},
		{
			"text before the first heading stays apart",
			"A line.\n\n# Title\n\nShort.\n",
			[]map[string]string{nil, {"h1": "Title", "headings": "Title"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			chunks := mdChunk(t, tc.text, Options{ChunkSize: 512})
			var got []map[string]string
			for _, ch := range chunks {
				got = append(got, ch.Metadata)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("metadata %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMarkdown_HashInFenceIsNotAHeading(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text string
		want       []string
	}{
		{"backtick fence", "# A\n\n```sh\n# comment\n## not a heading\n```\n\n## B\n", []string{"1:A", "2:B"}},
		{"tilde fence", "~~~\n# x\n~~~\n# B\n", []string{"1:B"}},
		{"backticks inside tildes", "~~~\n```\n# x\n```\n~~~\n# B\n", []string{"1:B"}},
		{"shorter fence inside a longer one", "````\n```\n# x\n```\n````\n# B\n", []string{"1:B"}},
		{"indented fence", "  ```\n# x\n  ```\n# B\n", []string{"1:B"}},
		{"three-space tilde fence", "   ~~~~\n# x\n   ~~~~\n# B\n", []string{"1:B"}},
		{"indented closing fence", "```\n# x\n   ```\n# B\n", []string{"1:B"}},
		{"four-space closing fence does not close", "```\n# x\n    ```\n# y\n```\n# B\n", []string{"1:B"}},
		{"shorter closing fence does not close", "````\n# x\n```\n# y\n````\n# B\n", []string{"1:B"}},
		{"closing fence with an info string does not close", "```\n# x\n```go\n# y\n```\n# B\n", []string{"1:B"}},
		{"four-space fence is indented code", "    ```\n# B\n", []string{"1:B"}},
		{"backtick in the info string is not a fence", "``` a`b\n# B\n", []string{"1:B"}},
		{"unclosed fence", "# A\n```\n# x\n## y\n", []string{"1:A"}},
		{"fence in a list item", "1. Run:\n\n   ```sh\n   # install\n   ```\n\n# B\n", []string{"1:B"}},
		{"HTML comment", "<!--\n# x\n-->\n# B\n", []string{"1:B"}},
		{"one-line HTML comment", "<!-- x -->\n# B\n", []string{"1:B"}},
		{"script block", "<SCRIPT>\n# x\n\n# y\n</script>\n# B\n", []string{"1:B"}},
		{"HTML block to a blank line", "<details>\n# x\n\n# B\n", []string{"1:B"}},
		{"pre block", "<pre>\n# x\n</pre>\n# B\n", []string{"1:B"}},
		{"indented code", "    # code\n\n# B\n", []string{"1:B"}},
		{"heading in a list item", "- item\n\n  # inside\n\n# B\n", []string{"1:B"}},
		{"heading in a block quote", "> # quoted\n\n# B\n", []string{"1:B"}},
		{"no space after the hashes", "#hashtag\n#5\n####### seven\n# B\n", []string{"1:B"}},
		{"closing sequences", "## B ##\n### C #\n# D#\n", []string{"2:B", "3:C", "1:D#"}},
		{"attribute block", "## Intro {#intro}\n## Setup {.tabbed}\n", []string{"2:Intro", "2:Setup"}},
		{"three spaces of indentation", "   # B\n", []string{"1:B"}},
		{"heading after a list", "- a\n# B\n", []string{"1:B"}},
		{"lazy line in a list item", "- a\nlazy\n# B\n", []string{"1:B"}},
		{"heading in a nested list item", "- a\n  - b\n\n    ## inside\n\n## B\n", []string{"2:B"}},
		{"less indented line leaves a list item's fence", "- a\n\n  ```\n# B\n", []string{"1:B"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, text := range []string{tc.text, mdCRLF(tc.text)} {
				if got := mdHeadings(text); !slices.Equal(got, tc.want) {
					t.Errorf("headings of %q = %q, want %q", text, got, tc.want)
				}
				for _, ch := range mdChunk(t, text, Options{ChunkSize: 512}) {
					for key, v := range ch.Metadata {
						if key != "headings" && !slices.Contains(tc.want, key[1:]+":"+v) {
							t.Errorf("chunk %d has metadata %v from a line that is not a heading", ch.Index, ch.Metadata)
						}
					}
				}
			}
		})
	}
}

func TestMarkdown_SetextHeadings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text string
		want       []string
	}{
		{"both levels", "Title\n=====\n\nText.\n\nSub\n---\n\nMore.\n", []string{"1:Title", "2:Sub"}},
		{"two-line paragraph", "Foo\n  bar\n===\n", []string{"1:Foo bar"}},
		{"one-character underline", "Foo\n-\n", []string{"2:Foo"}},
		{"after an ATX heading", "# A\nB\n---\n", []string{"1:A", "2:B"}},
		{"thematic break after a blank line", "Text.\n\n---\n\nMore.\n", nil},
		{"thematic break after a list item", "- item\n---\n", nil},
		{"lazy line in a block quote", "> quote\n===\n", nil},
		{"underline indented four spaces", "Foo\n    ===\n", nil},
		{"spaced underline", "Foo\n= =\n", nil},
		{"table delimiter row", "a | b\n--- | ---\n1 | 2\n", nil},
		{"in a list item", "- item\n\n  Foo\n  ---\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, text := range []string{tc.text, mdCRLF(tc.text)} {
				if got := mdHeadings(text); !slices.Equal(got, tc.want) {
					t.Errorf("headings of %q = %q, want %q", text, got, tc.want)
				}
			}
		})
	}
	chunks := mdChunk(t, "Title\n=====\n\nText of the title section.\n", Options{ChunkSize: 64})
	if want := (map[string]string{"h1": "Title", "headings": "Title"}); len(chunks) != 1 || !reflect.DeepEqual(chunks[0].Metadata, want) {
		t.Errorf("setext chunk: %+v, want one with %v", chunks, want)
	}
}

func TestMarkdown_FrontMatter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text, front, format string // front: the front matter's chunk, "" for none
	}{
		{"yaml", "---\ntitle: x\n---\n\n# A\n\nText.\n", "---\ntitle: x\n---\n\n", "yaml"},
		{"yaml closed by dots", "---\na: 1\n...\nText.\n", "---\na: 1\n...\n", "yaml"},
		{"toml", "+++\ntitle = \"x\"\n+++\n# A\n", "+++\ntitle = \"x\"\n+++\n", "toml"},
		{"empty", "---\n---\n# A\n", "---\n---\n", "yaml"},
		{"after a byte order mark", "\ufeff---\na: 1\n---\n# A\n", "\ufeff---\na: 1\n---\n", "yaml"},
		{"unclosed", "---\ntitle: x\n# A\n", "", ""},
		{"blank line after the opening", "---\n\n# A\n\n---\n", "", ""},
		{"not at the start", "\n---\na: 1\n---\n# A\n", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, text := range []string{tc.text, mdCRLF(tc.text)} {
				front := tc.front
				if text != tc.text {
					front = mdCRLF(front)
				}
				chunks := mdChunk(t, text, Options{ChunkSize: 512})
				isFront := chunks[0].Metadata["front_matter"] != ""
				if front == "" {
					if isFront {
						t.Errorf("%q: front matter %q, want none", text, chunks[0].Content)
					}
					if got := mdHeadings(text); !slices.Contains(got, "1:A") {
						t.Errorf("%q: headings %q, want # A among them", text, got)
					}
					continue
				}
				want := map[string]string{"front_matter": tc.format}
				if chunks[0].Content != front || !reflect.DeepEqual(chunks[0].Metadata, want) {
					t.Errorf("%q: first chunk %q %v, want %q %v", text, chunks[0].Content, chunks[0].Metadata, front, want)
				}
				for _, ch := range chunks[1:] {
					if ch.Metadata["front_matter"] != "" {
						t.Errorf("%q: chunk %d %q is marked front matter too", text, ch.Index, ch.Content)
					}
				}
			}
		})
	}
}

// mdSpan returns the byte range of the first occurrence of part in text.
func mdSpan(t *testing.T, text, part string) (int, int) {
	t.Helper()
	i := strings.Index(text, part)
	if i < 0 {
		t.Fatalf("%q not in the text", part)
	}
	return i, i + len(part)
}

// mdTestSection is a section with prose around a fenced block and a table of the given lines and rows.
func mdTestSection(fenceLines, tableRows int) (text, fence, table string) {
	var f, tb strings.Builder
	f.WriteString("```python\n")
	for i := range fenceLines {
		fmt.Fprintf(&f, "# step %d\nvalue_%d = compute(%d)\n", i, i, i)
	}
	f.WriteString("```\n")
	tb.WriteString("| name | value | note |\n|---|:---:|---|\n")
	for i := range tableRows {
		fmt.Fprintf(&tb, "| row %d | %d | a note about row %d |\n", i, i*i, i)
	}
	prose := "This paragraph is ordinary prose. It sits between the blocks to give the packer something to pack.\n\n"
	text = "## Data\n\n" + prose + f.String() + "\n" + prose + tb.String() + "\n" + prose
	return text, f.String(), tb.String()
}

func TestMarkdown_FencesAndTablesStayWholeWhenTheyFit(t *testing.T) {
	t.Parallel()
	text, fence, table := mdTestSection(3, 3)
	fs, fe := mdSpan(t, text, fence)
	ts, te := mdSpan(t, text, table)
	enc := tokenizer.CL100K()
	size := max(enc.Count(fence), enc.Count(table)) + 10
	if enc.Count(text) <= size {
		t.Fatalf("the section (%d tokens) must not fit in %d", enc.Count(text), size)
	}
	for _, overlap := range []int{0, 5, size / 3} {
		chunks := mdChunk(t, text, Options{ChunkSize: size, ChunkOverlap: overlap, NoOverlap: overlap == 0})
		for _, span := range [][2]int{{fs, fe}, {ts, te}} {
			whole := false
			for _, ch := range chunks {
				for _, off := range []int{ch.StartOffset, ch.EndOffset} {
					if span[0] < off && off < span[1] {
						t.Errorf("overlap %d: chunk %d [%d, %d) cuts the block [%d, %d) that fits", overlap, ch.Index, ch.StartOffset, ch.EndOffset, span[0], span[1])
					}
				}
				whole = whole || ch.StartOffset <= span[0] && span[1] <= ch.EndOffset
			}
			if !whole {
				t.Errorf("overlap %d: no chunk holds the block %q", overlap, clip(text[span[0]:span[1]]))
			}
		}
	}
}

func TestMarkdown_OversizedFencesAndTablesAreCutBetweenLines(t *testing.T) {
	t.Parallel()
	text, fence, table := mdTestSection(40, 40)
	fs, fe := mdSpan(t, text, fence)
	ts, te := mdSpan(t, text, table)
	for _, sz := range []struct{ size, overlap int }{{48, 0}, {48, 12}, {100, 30}} {
		chunks := mdChunk(t, text, Options{ChunkSize: sz.size, ChunkOverlap: sz.overlap, NoOverlap: sz.overlap == 0})
		for _, span := range [][2]int{{fs, fe}, {ts, te}} {
			inside := 0
			for _, ch := range chunks {
				for _, off := range []int{ch.StartOffset, ch.EndOffset} {
					if span[0] < off && off < span[1] {
						inside++
						if text[off-1] != '\n' {
							t.Errorf("size %d: chunk %d boundary %d is inside a line of the block: %q", sz.size, ch.Index, off, text[max(off-20, 0):off])
						}
					}
				}
			}
			if inside < 4 {
				t.Errorf("size %d: the oversized block was cut %d times", sz.size, inside)
			}
		}
		if sz.overlap > 0 {
			shared := 0
			for i := 1; i < len(chunks); i++ {
				if chunks[i].StartOffset < chunks[i-1].EndOffset {
					shared++
				}
			}
			if shared < len(chunks)/2 {
				t.Errorf("size %d overlap %d: only %d of %d neighbours share lines", sz.size, sz.overlap, shared, len(chunks)-1)
			}
		}
	}
}

func TestMarkdown_CRLF(t *testing.T) {
	t.Parallel()
	for name, text := range mdTestdata(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dos := mdCRLF(text)
			lf, cr := scanMarkdown(text), scanMarkdown(dos)
			if len(lf) != len(cr) {
				t.Fatalf("%d blocks with LF, %d with CRLF", len(lf), len(cr))
			}
			for i := range lf {
				if lf[i].kind != cr[i].kind || lf[i].level != cr[i].level || lf[i].title != cr[i].title ||
					cr[i].start != lf[i].start+strings.Count(text[:lf[i].start], "\n") {
					t.Fatalf("block %d: %+v with LF, %+v with CRLF", i, lf[i], cr[i])
				}
			}
			for _, sz := range []struct{ size, overlap int }{{32, 8}, {256, 0}} {
				for _, ch := range mdChunk(t, dos, Options{ChunkSize: sz.size, ChunkOverlap: sz.overlap, NoOverlap: sz.overlap == 0}) {
					for _, v := range ch.Metadata {
						if strings.ContainsAny(v, "\r\n") {
							t.Errorf("metadata %q holds a line ending", v)
						}
					}
				}
			}
		})
	}
}

func TestMarkdown_UnclosedFenceRunsToTheEnd(t *testing.T) {
	t.Parallel()
	text := "# A\n\nIntro.\n\n```go\nfunc main() {\n# not a heading\n\n## nor this\n}\n"
	blocks := scanMarkdown(text)
	if last := blocks[len(blocks)-1]; last.kind != mdFence || text[last.start:] != text[strings.Index(text, "```"):] {
		t.Fatalf("last block %+v, want the fence to the end", last)
	}
	for _, size := range []int{8, 16, 512} {
		for _, ch := range mdChunk(t, text, Options{ChunkSize: size, NoOverlap: true}) {
			if ch.Metadata["headings"] != "A" {
				t.Errorf("size %d: chunk %d %q has metadata %v", size, ch.Index, ch.Content, ch.Metadata)
			}
		}
	}
}

func TestMarkdown_OverlapStaysInsideASection(t *testing.T) {
	t.Parallel()
	para := strings.Repeat("Words make sentences. ", 6) + "\n\n"
	text := "# One\n\n" + strings.Repeat(para, 8) + "# Two\n\n" + strings.Repeat(para, 8)
	chunks := mdChunk(t, text, Options{ChunkSize: 80, ChunkOverlap: 40})
	two := strings.Index(text, "# Two")
	shared := 0
	for i := 1; i < len(chunks); i++ {
		prev, ch := chunks[i-1], chunks[i]
		if ch.StartOffset < prev.EndOffset {
			shared++
		}
		if ch.StartOffset < two && two < ch.EndOffset {
			t.Errorf("chunk %d [%d, %d) runs across the section boundary at %d", i, ch.StartOffset, ch.EndOffset, two)
		}
		if ch.StartOffset == two && !strings.HasPrefix(ch.Content, "# Two") {
			t.Errorf("chunk %d does not start at the heading", i)
		}
	}
	if shared < len(chunks)/2 {
		t.Errorf("only %d of %d neighbours overlap", shared, len(chunks)-1)
	}
	if !slices.ContainsFunc(chunks, func(ch ChunkResult) bool { return ch.StartOffset == two }) {
		t.Errorf("no chunk starts at the second section")
	}
}

func TestMarkdown_InvariantsOnDocuments(t *testing.T) {
	t.Parallel()
	docs := mdTestdata(t)
	for name, text := range docs {
		docs[name+" (CRLF)"] = mdCRLF(text)
	}
	for name, text := range docs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, sz := range []struct{ size, overlap int }{{8, 0}, {8, 3}, {16, 4}, {32, 8}, {64, 0}, {100, 20}, {256, 50}, {512, 0}, {4096, 100}} {
				mdChunk(t, text, Options{ChunkSize: sz.size, ChunkOverlap: sz.overlap, NoOverlap: sz.overlap == 0})
			}
		})
	}
}

func TestMarkdown_GuideSections(t *testing.T) {
	t.Parallel()
	text := mdTestdata(t)["guide.md"]
	want := []string{"1:Loom", "2:Installation", "3:Platform notes", "2:Chunking", "3:Options", "2:Strategies compared",
		"2:Embedding", "4:A fourth-level heading", "5:And a fifth", "6:And a sixth", "1:Appendix", "2:Glossary"}
	if got := mdHeadings(text); !slices.Equal(got, want) {
		t.Errorf("headings %q, want %q", got, want)
	}
	var paths []string
	for _, ch := range mdChunk(t, text, Options{ChunkSize: 128, NoOverlap: true}) {
		if p := ch.Metadata["headings"]; !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
		// The appendix is small: it takes in its glossary.
		if p := ch.Metadata["headings"]; p == "Appendix" && !strings.Contains(ch.Content, "## Glossary") {
			t.Errorf("the appendix's chunk %q does not hold its glossary", ch.Content)
		}
	}
	for _, p := range []string{"Loom > Installation > Platform notes", "Loom > Chunking > Options", "Loom > Embedding > A fourth-level heading", "Appendix"} {
		if !slices.Contains(paths, p) {
			t.Errorf("no chunk has the path %q; paths: %q", p, paths)
		}
	}
}

func TestMarkdown_MetadataMapsAreTheirOwn(t *testing.T) {
	t.Parallel()
	text := "# A\n\n" + strings.Repeat("A sentence of the section. ", 40)
	chunks := mdChunk(t, text, Options{ChunkSize: 32, NoOverlap: true})
	if len(chunks) < 2 {
		t.Fatalf("%d chunks", len(chunks))
	}
	chunks[0].Metadata["h1"] = "changed"
	if chunks[1].Metadata["h1"] != "A" {
		t.Errorf("changing one chunk's metadata changed another's: %v", chunks[1].Metadata)
	}
}

func TestMarkdown_Errors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts Options
		want error
	}{
		{"language", Options{Language: "go"}, ErrNotApplicable},
		{"percentile", Options{BreakpointPercentile: 90}, ErrNotApplicable},
		{"other strategy", Options{Strategy: Recursive}, ErrStrategyMismatch},
		{"overlap too large", Options{ChunkSize: 10, ChunkOverlap: 10}, ErrOverlapTooLarge},
		{"negative size", Options{ChunkSize: -1}, ErrNegativeSize},
	}
	for _, tc := range cases {
		if _, err := NewMarkdown().Chunk(context.Background(), "# A\n", &tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
	if chunks, err := NewMarkdown().Chunk(context.Background(), " \r\n\t\n", nil); err != nil || len(chunks) != 0 {
		t.Errorf("whitespace: %v, %v; want no chunks and no error", chunks, err)
	}
	chunks, err := Default().Chunk(context.Background(), "# A\n\nText.\n", &Options{Strategy: Markdown})
	if err != nil || len(chunks) != 1 || chunks[0].Metadata["h1"] != "A" {
		t.Errorf("Default with Strategy markdown: %+v, %v", chunks, err)
	}
}

func TestMarkdown_HonoursCancellation(t *testing.T) {
	t.Parallel()
	text := mdTestdata(t)["godebug.md"]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewMarkdown().Chunk(ctx, text, &Options{ChunkSize: 64}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before the call: error %v", err)
	}
	// Cancelled during the call: a counter that cancels after some counts.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	enc, calls := tokenizer.CL100K(), 0
	counter := tokenizer.CounterFunc(func(s string) int {
		if calls++; calls == 30 {
			cancel()
		}
		return enc.Count(s)
	})
	if _, err := NewMarkdown().Chunk(ctx, text, &Options{ChunkSize: 64, Counter: counter}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during the call (%d counts): error %v", calls, err)
	}
}

// FuzzMarkdown checks the invariants, and that chunks stay under their heading path, on Markdown-like text.
func FuzzMarkdown(f *testing.F) {
	for _, text := range mdTestdata(f) {
		f.Add(text, uint8(40), uint8(10))
	}
	for _, s := range []string{
		"# A\n```\n# x\n```\n## B\n", "Title\n===\n", "---\na: 1\n---\n", "| a | b |\n|---|---|\n| 1 | 2 |\n",
		"- a\n  ```\n# x\n  ```\n", "<!--\n# x\n", "> q\n---\n", "\r\n# A\r\n\r\n```\r\n# x\r\n```\r\n",
	} {
		f.Add(s, uint8(8), uint8(2))
	}
	f.Fuzz(func(t *testing.T, text string, size, overlap uint8) {
		if len(text) > 6000 {
			text = text[:6000]
		}
		sz := 4 + int(size)%200
		opts := Options{ChunkSize: sz, ChunkOverlap: int(overlap) % sz}
		opts.NoOverlap = opts.ChunkOverlap == 0
		chunks, err := NewMarkdown().Chunk(context.Background(), text, &opts)
		if errors.Is(err, ErrSizeTooSmall) && sz < 8 {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, Markdown, text, opts, chunks)
		if strings.TrimSpace(text) != "" {
			checkMarkdownPaths(t, text, chunks)
		}
	})
}

func BenchmarkMarkdown(b *testing.B) {
	text := strings.Repeat(mdTestdata(b)["godebug.md"]+"\n", 20)
	c := NewMarkdown()
	opts := &Options{ChunkSize: 512, ChunkOverlap: 50}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Chunk(context.Background(), text, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleMarkdownChunker() {
	doc := `# Guide

Loom splits documents into chunks.

## Install

` + "```sh\n# not a heading: a comment in a fence\ngo install github.com/context-loom/loom/cmd/loom@latest\n```" + `

## Usage

Run loom chunk on a file.
`
	chunks, err := NewMarkdown().Chunk(context.Background(), doc, &Options{ChunkSize: 40, NoOverlap: true})
	if err != nil {
		panic(err)
	}
	for _, ch := range chunks {
		fmt.Printf("%d %q: %s\n", ch.Index, ch.Metadata["headings"], strings.SplitN(ch.Content, "\n", 2)[0])
	}
	// Output:
	// 0 "Guide": # Guide
	// 1 "Guide > Install": ## Install
	// 2 "Guide > Usage": ## Usage
}

// mdMetaBytes returns the bytes of a chunk's metadata, keys and values.
func mdMetaBytes(meta map[string]string) int {
	n := 0
	for k, v := range meta {
		n += len(k) + len(v)
	}
	return n
}

// mdMaxMetaBytes bounds a markdown chunk's metadata: the path twice (in "headings" and in its levels' keys)
// and the keys.
const mdMaxMetaBytes = 2*MaxHeadingPathBytes + 64

func TestMarkdown_HeadingPathIsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 4000) // 20 KB
	text := "# " + long + "\n\n## Second " + strings.Repeat("é", 300) + "\n\n### " + strings.Repeat("x", 150) + "\n\n" +
		"#### " + strings.Repeat("y", 150) + "\n\n##### " + strings.Repeat("z", 150) + "\n\ntext\n\n" +
		long + "\n" + strings.Repeat("=", 10) + "\n\nbody " + long
	opts := Options{ChunkSize: 64}
	chunks := mdChunk(t, text, opts)
	for _, ch := range chunks {
		if n := mdMetaBytes(ch.Metadata); n > mdMaxMetaBytes {
			t.Fatalf("chunk %d has %d bytes of metadata: %v", ch.Index, n, ch.Metadata)
		}
		for k, v := range ch.Metadata {
			if k != "headings" && len(v) > MaxHeadingBytes {
				t.Errorf("chunk %d: %s has %d bytes", ch.Index, k, len(v))
			}
			if !utf8.ValidString(v) {
				t.Errorf("chunk %d: %s = %q is cut inside a character", ch.Index, k, v)
			}
		}
	}
	first := chunks[0].Metadata
	if want := mdBoundHeading(strings.TrimSpace(long)); first["h1"] != want || !strings.HasSuffix(want, "…") || len(want) > MaxHeadingBytes {
		t.Errorf("h1 %q, want the first %d bytes and an ellipsis", first["h1"], MaxHeadingBytes)
	}
	// The deepest section's path keeps the innermost headings within the bound.
	var deep map[string]string
	for _, ch := range chunks {
		if ch.Metadata["h5"] != "" {
			deep = ch.Metadata
			break
		}
	}
	if deep == nil || deep["h1"] != "" || deep["h4"] == "" || len(deep["headings"]) > MaxHeadingPathBytes ||
		!strings.HasSuffix(deep["headings"], HeadingSeparator+deep["h5"]) {
		t.Errorf("deepest path %v: want the innermost levels within %d bytes", deep, MaxHeadingPathBytes)
	}
}

// FuzzMarkdownMetadata checks that a chunk's metadata is bounded whatever the text.
func FuzzMarkdownMetadata(f *testing.F) {
	f.Add("# "+strings.Repeat("long heading ", 100)+"\n\ntext\n", uint8(3))
	f.Add(strings.Repeat("para line\n", 50)+"===\n\ntext", uint8(2))
	f.Add("# a\n## b\n### c\n#### d\n##### e\n###### f\ntext", uint8(50))
	f.Fuzz(func(t *testing.T, text string, repeat uint8) {
		if len(text) > 4000 {
			text = text[:4000]
		}
		// Repeating a heading's text makes long headings out of short inputs.
		text = strings.Replace(text, "\n", strings.Repeat(" x", int(repeat))+"\n", 1)
		opts := Options{ChunkSize: 32}
		chunks, err := NewMarkdown().Chunk(context.Background(), text, &opts)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, Markdown, text, opts, chunks)
		for _, ch := range chunks {
			if n := mdMetaBytes(ch.Metadata); n > mdMaxMetaBytes {
				t.Fatalf("chunk %d has %d bytes of metadata", ch.Index, n)
			}
		}
	})
}

// markdownSections groups blocks into sections with the metadata of their heading path, all at once: the
// oracle of the paths the chunker gives.
func markdownSections(text string, blocks []mdBlock) []mdSection {
	var sections []mdSection
	var path [7]string // path[l]: the current heading of level l
	for i, blk := range blocks {
		switch {
		case blk.kind == mdFrontMatter:
			sections = append(sections, mdSection{start: blk.start, meta: map[string]string{"front_matter": blk.title}})
		case blk.kind == mdHeading:
			path[blk.level] = blk.title
			clear(path[blk.level+1:])
			sections = append(sections, mdSection{start: blk.start, level: blk.level, meta: mdHeadingMeta(path)})
		case i == 0 || blocks[i-1].kind == mdFrontMatter: // text before the first heading
			sections = append(sections, mdSection{start: blk.start})
		}
		s := &sections[len(sections)-1]
		s.blocks = append(s.blocks, blk)
	}
	for i := range sections {
		sections[i].end = len(text)
		if i+1 < len(sections) {
			sections[i].end = sections[i+1].start
		}
	}
	return sections
}
