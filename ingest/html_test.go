package ingest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/context-loom/loom/chunker"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestHTML_Golden extracts realistic pages and compares the Markdown with testdata/*.golden.md.
func TestHTML_Golden(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("testdata/*.html")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in testdata: %v", err)
	}
	for _, page := range pages {
		t.Run(filepath.Base(page), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := Read(filepath.Base(page), raw)
			if err != nil {
				t.Fatal(err)
			}
			golden := page[:len(page)-len(".html")] + ".golden.md"
			if *update {
				if err := os.WriteFile(golden, []byte(doc.Text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if doc.Text != string(want) {
				t.Errorf("%s: extracted text differs from %s (run with -update after checking):\n%s", page, golden, doc.Text)
			}
		})
	}
}

func TestHTML_Structure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, html, want string
	}{
		{"whitespace collapses", "<p>  a \n\t b  </p>", "a b\n"},
		{"inline elements join without spaces", "<p><b>bo</b><i>ld</i> x</p>", "bold x\n"},
		{"paragraphs", "<p>a</p><p>b</p>", "a\n\nb\n"},
		{"headings", "<h1>One</h1><h3> Three <br> lines </h3>x", "# One\n\n### Three lines\n\nx\n"},
		{"empty heading is dropped", "<h2> </h2><p>x</p>", "x\n"},
		{"br", "a<br>b<br><br>c", "a\nb\n\nc\n"},
		{"nested lists", "<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>", "- a\n  - b\n- c\n"},
		{"ordered list with start", "<ol start=9><li>a<li>b</ol>", "9. a\n10. b\n"},
		{"list item holding paragraphs", "<ul><li><p>a</p><p>b</p></li></ul>", "- a\n\n  b\n"},
		{"quote in a list item", "<ul><li><blockquote>q<p>r</p></blockquote></li></ul>", "- > q\n  >\n  > r\n"},
		{"deep lists stop indenting", strings.Repeat("<ul><li>", 10) + "x", strings.Repeat("  ", maxNesting) + "- x\n"},
		{"empty list item", "<ul><li></li><li>x</li></ul>", "- x\n"},
		{"blockquote", "<blockquote><p>a</p><p>b</p></blockquote><p>c</p>", "> a\n>\n> b\n\nc\n"},
		{"pre kept verbatim", "<p>x</p><pre>  a  b\n\n\tc &lt;d&gt;\n</pre>", "x\n\n```\n  a  b\n\n\tc <d>\n```\n"},
		{"pre with backticks", "<pre class='lang-sh'>```\nx</pre>", "````sh\n```\nx\n````\n"},
		{"pre in a list", "<ul><li>a<pre>x\n\ny</pre></li></ul>", "- a\n\n  ```\n  x\n\n  y\n  ```\n"},
		{"table", "<table><tr><td>a</td><td>b|c</td></tr><tr><td>d</td></tr></table>", "| a | b\\|c |\n| --- | --- |\n| d |  |\n"},
		{"table cell flattened", "<table><tr><th><p>a</p><ul><li>b</li></ul></th></tr></table>", "| a b |\n| --- |\n"},
		{"entities", "<p>&lt;a&gt; &amp;&#x41;&#66;&eacute;&nbsp;</p>", "<a> &AB\u00e9\u00a0\n"},
		{"links are their text", "<a href='http://x'>the <b>link</b></a>", "the link\n"},
		{"dropped elements", "<script>s</script><style>t</style><noscript>n</noscript><template>u</template><svg><text>v</text></svg><iframe>w</iframe><p hidden>h</p>ok", "ok\n"},
		{"heading-like text is escaped", "<p># no</p><p>```no</p><p>~~~no</p><p>a # b</p>", "\\# no\n\n\\```no\n\n\\~~~no\n\na # b\n"},
		{"nothing visible", "<html><head><title>T</title></head><body> </body></html>", ""},
		{"image alt", "<p>see <img alt='the map'> here</p>", "see the map here\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _ := htmlToMarkdown(tt.html)
			if got != tt.want {
				t.Errorf("htmlToMarkdown(%q) =\n%q\nwant\n%q", tt.html, got, tt.want)
			}
		})
	}
}

func TestHTML_TooDeepFallsBackToTokens(t *testing.T) {
	t.Parallel()
	page := "<title>Deep</title><h1>Top</h1>" + strings.Repeat("<div>", 600) + "<p>inner text</p><script>SECRET</script>" +
		strings.Repeat("</div>", 600) + "<p>after</p>"
	got, title := htmlToMarkdown(page)
	if title != "Deep" {
		t.Errorf("title = %q", title)
	}
	for _, want := range []string{"# Top\n", "inner text", "after"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q is missing from %q", want, got)
		}
	}
	if strings.Contains(got, "SECRET") {
		t.Errorf("script text in %q", got)
	}
}

// TestHTML_MarkdownChunkerSeesTheSections chunks the golden page with the markdown strategy, as the engine
// does with an HTML document, and finds the page's headings in the chunks' heading paths.
func TestHTML_MarkdownChunkerSeesTheSections(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/page.html")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Read("page.html", raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := chunker.New(chunker.Markdown)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := c.Chunk(context.Background(), doc.Text, &chunker.Options{ChunkSize: 40, NoOverlap: true})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, ch := range chunks {
		paths[ch.Metadata["headings"]] = true
	}
	for _, want := range []string{"Widget Manual", "Widget Manual > Installing", "Widget Manual > Installing > Options",
		"Widget Manual > Troubleshooting"} {
		if !paths[want] {
			t.Errorf("no chunk under %q; heading paths: %v", want, paths)
		}
	}
}

// genHTML builds an HTML document from data: visible words w0, w1, ... among tags, and script, style and
// comment content holding "zzsecret". It returns the document and its visible words.
func genHTML(data []byte) (string, []string) {
	tags := []string{"div", "p", "span", "b", "a", "ul", "ol", "li", "blockquote", "pre", "code", "h1", "h2", "h3",
		"table", "tr", "td", "th", "em", "section", "nav", "dl", "dt", "dd"}
	spaces := []string{"", " ", "\n", "\t ", "  \n  "}
	var b strings.Builder
	var words, open []string
	for i := 0; i+1 < len(data); i += 2 {
		op, arg := data[i], int(data[i+1])
		switch op % 8 {
		case 0, 1:
			w := "w" + strconv.Itoa(len(words))
			words = append(words, w)
			b.WriteString(spaces[arg%len(spaces)] + w + spaces[(arg/8)%len(spaces)])
		case 2:
			tag := tags[arg%len(tags)]
			open = append(open, tag)
			b.WriteString("<" + tag + ">")
		case 3:
			if len(open) > 0 {
				b.WriteString("</" + open[len(open)-1] + ">")
				open = open[:len(open)-1]
			}
		case 4:
			b.WriteString("<script>var x = 'zzsecret' < 3 && '<p>zzsecret</p>';</script>")
		case 5:
			b.WriteString("<style>p::before { content: 'zzsecret'; }</style><!-- zzsecret -->")
		case 6:
			w := "w" + strconv.Itoa(len(words))
			words = append(words, w)
			switch arg % 3 {
			case 0:
				b.WriteString("<br>&amp;" + w)
			case 1:
				b.WriteString("<hr><img alt='" + w + "'>")
			default:
				b.WriteString("&lt;" + w + "&gt;")
			}
		case 7:
			b.WriteString("<p hidden>zzsecret</p><template>zzsecret</template><noscript>zzsecret</noscript>")
		}
	}
	return b.String(), words
}

// FuzzHTML checks the extraction's invariants: it never panics, its output is valid UTF-8 of bounded size,
// no text from <script>, <style>, comments or hidden elements appears, and every visible word of a
// generated document does.
func FuzzHTML(f *testing.F) {
	raw, err := os.ReadFile("testdata/page.html")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte("<table><tr><td><ul><li><pre>x</pre></ul></td></tr></table>"))
	f.Add([]byte{2, 5, 0, 1, 2, 7, 0, 2, 3, 0, 4, 0, 2, 9, 0, 3, 6, 0, 6, 1, 6, 2, 5, 0, 7, 0, 2, 14, 2, 15, 2, 16, 0, 0})
	f.Add([]byte(strings.Repeat("<ul><li>", 300) + "x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Any input, as Read gives it: valid UTF-8.
		in := strings.ToValidUTF8(string(data), "\uFFFD")
		out, title := htmlToMarkdown(in)
		if !utf8.ValidString(out) || !utf8.ValidString(title) {
			t.Fatalf("invalid UTF-8 from %q", in)
		}
		if len(out) > 64*len(in)+64 {
			t.Fatalf("%d bytes of output from %d of input", len(out), len(in))
		}

		// A generated document.
		page, words := genHTML(data)
		out, _ = htmlToMarkdown(page)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", page)
		}
		if strings.Contains(out, "zzsecret") {
			t.Fatalf("hidden text in the output of %q:\n%s", page, out)
		}
		for _, w := range words {
			if !containsWord(out, w) {
				t.Fatalf("visible word %s missing from the output of %q:\n%s", w, page, out)
			}
		}
	})
}

// containsWord reports whether w appears in s, not followed by a digit (so w1 is not found in w12).
func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		end := i + j + len(w)
		if end == len(s) || s[end] < '0' || s[end] > '9' {
			return true
		}
		i = end
	}
}

// genPage builds an HTML page of about n bytes, of the kinds of content documentation has.
func genPage(n int) string {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><title>Generated</title><style>body{margin:0}</style></head><body>\n")
	b.WriteString("<nav><ul><li><a href='/'>Home</a></li><li><a href='/docs'>Docs</a></li></ul></nav><main>\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "<h2 id='s%d'>Section %d</h2>\n", i, i)
		fmt.Fprintf(&b, "<p>The <b>quick</b> brown fox &amp; the <a href='/x%d'>lazy dog</a> jumped over\n"+
			"the fence %d times, and Caf&eacute; owners &mdash; all of them &mdash; watched.</p>\n", i, i)
		b.WriteString("<ul><li>first point</li><li>second point with <code>code</code></li><li>third</li></ul>\n")
		b.WriteString("<pre><code class='language-go'>func main() {\n\tfmt.Println(\"hello &lt;world&gt;\")\n}\n</code></pre>\n")
		b.WriteString("<table><tr><th>Key</th><th>Value</th></tr><tr><td>size</td><td>512</td></tr></table>\n")
		b.WriteString("<script>track('page', 1 < 2);</script>\n")
	}
	b.WriteString("</main></body></html>\n")
	return b.String()
}

func BenchmarkHTML(b *testing.B) {
	page := []byte(genPage(1 << 20))
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read("page.html", page); err != nil {
			b.Fatal(err)
		}
	}
}
