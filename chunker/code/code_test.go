//go:build cgo

package code

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	sitter "github.com/smacker/go-tree-sitter"

	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/chunker/internal/chunktest"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/tokenizer"
)

// sizes are the sizes and overlaps the property tests chunk at.
var sizes = []struct{ size, overlap int }{
	{8, 0}, {8, 3}, {16, 5}, {50, 10}, {128, 0}, {128, 20}, {512, 50}, {4, 1},
}

// checkInvariants asserts the promises of package chunker's documentation for one call's result.
func checkInvariants(t testing.TB, text string, opts chunker.Options, chunks []chunker.ChunkResult) {
	t.Helper()
	b, err := chunker.NewBuilder(context.Background(), chunker.Code, text, &opts)
	if err != nil {
		t.Fatalf("options: %v", err)
	}
	// The overlap's default, as package chunker documents it.
	overlap := opts.ChunkOverlap
	if overlap == 0 && !opts.NoOverlap {
		overlap = min(chunker.DefaultChunkOverlap, b.Size()/5)
	}
	counter := opts.Counter
	if counter == nil {
		counter = tokenizer.CL100K()
	}
	chunktest.Check(t, chunktest.Spec{Strategy: chunker.Code, Size: b.Size(), Overlap: overlap, Counter: counter}, text, chunks)
}

// codeFiles returns the code testdata by file name: one realistic source file per language.
func codeFiles(t testing.TB) map[string]string {
	t.Helper()
	dir := filepath.Join("testdata", "code")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if ingest.LanguageForFile(e.Name()) == "" {
			continue // the README
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(data)
	}
	return files
}

func TestCode_TestdataHasEveryLanguage(t *testing.T) {
	t.Parallel()
	var langs []string
	for name := range codeFiles(t) {
		langs = append(langs, ingest.LanguageForFile(name))
	}
	slices.Sort(langs)
	if !slices.Equal(langs, chunker.CodeLanguages()) {
		t.Errorf("testdata/code languages %v, want one file for each of %v", langs, chunker.CodeLanguages())
	}
}

// TestCode_ParsesEveryLanguage checks that this package has a grammar for every language package chunker
// names, and so for every language package ingest tells from a file name.
func TestCode_ParsesEveryLanguage(t *testing.T) {
	t.Parallel()
	for _, name := range chunker.CodeLanguages() {
		if languages[name] == nil {
			t.Errorf("no grammar for %q", name)
		}
	}
	if len(languages) != len(chunker.CodeLanguages()) {
		t.Errorf("grammars for %d languages, package chunker names %d", len(languages), len(chunker.CodeLanguages()))
	}
	for _, file := range []string{"a.go", "a.py", "a.pyi", "a.pyw", "a.js", "a.mjs", "a.cjs", "a.jsx", "a.ts", "a.mts", "a.cts", "a.tsx", "a.rs", "a.java"} {
		if lang := ingest.LanguageForFile(file); languages[lang] == nil {
			t.Errorf("ingest.LanguageForFile(%q) = %q, which this package does not parse", file, lang)
		}
	}
}

// chunkCode chunks text as the file name's language.
func chunkCode(t testing.TB, name, text string, size, overlap int) []chunker.ChunkResult {
	t.Helper()
	opts := chunker.Options{ChunkSize: size, ChunkOverlap: overlap, NoOverlap: overlap == 0, Language: ingest.LanguageForFile(name)}
	chunks, err := New().Chunk(context.Background(), text, &opts)
	if err != nil {
		t.Fatalf("%s size %d overlap %d: %v", name, size, overlap, err)
	}
	checkInvariants(t, text, opts, chunks)
	return chunks
}

// parseTop returns the top-level nodes of text that are not comments (nor Rust attributes), with the byte
// where each one's leading comments start.
func parseTop(t testing.TB, lang, text string) (starts, nodeStarts, ends []int) {
	t.Helper()
	l := languages[lang]
	p := sitter.NewParser()
	defer p.Close()
	p.SetLanguage(l.grammar())
	tree, err := p.ParseCtx(context.Background(), nil, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	root := tree.RootNode()
	lead := -1
	for i := range int(root.ChildCount()) {
		n := root.Child(i)
		if strings.TrimSpace(n.Content([]byte(text))) == "" {
			continue
		}
		if l.leading[n.Type()] {
			if lead < 0 {
				lead = int(n.StartByte())
			}
			continue
		}
		s := int(n.StartByte())
		if lead >= 0 {
			s, lead = lead, -1
		}
		starts = append(starts, s)
		nodeStarts = append(nodeStarts, int(n.StartByte()))
		ends = append(ends, int(n.EndByte()))
	}
	return starts, nodeStarts, ends
}

func TestCode_DeclarationsThatFitStayWhole(t *testing.T) {
	t.Parallel()
	enc := tokenizer.CL100K()
	for name, text := range codeFiles(t) {
		for _, sz := range []struct{ size, overlap int }{{96, 0}, {160, 30}, {400, 0}} {
			t.Run(name+"/"+strconv.Itoa(sz.size), func(t *testing.T) {
				t.Parallel()
				chunks := chunkCode(t, name, text, sz.size, sz.overlap)
				starts, _, ends := parseTop(t, ingest.LanguageForFile(name), text)
				whole := 0
				for i := range starts {
					decl := text[starts[i]:ends[i]]
					if enc.Count(decl) > sz.size-2 { // room for the blank line after it
						continue
					}
					whole++
					in := false
					for _, ch := range chunks {
						if ch.StartOffset <= starts[i] && ends[i] <= ch.EndOffset {
							in = true
						}
						for _, b := range []int{ch.StartOffset, ch.EndOffset} {
							if starts[i] < b && b < ends[i] {
								t.Errorf("chunk %d [%d, %d) cuts the declaration that fits %q", ch.Index, ch.StartOffset, ch.EndOffset, chunktest.Clip(decl))
							}
						}
					}
					if !in {
						t.Errorf("no chunk holds the declaration %q", chunktest.Clip(decl))
					}
				}
				if whole == 0 {
					t.Fatalf("no declaration fits in %d tokens: the test tests nothing", sz.size)
				}
			})
		}
	}
}

// TestCode_SplitsOnlyWhereLinesStart checks that small sizes split oversized declarations between lines
// (statements, members, the brackets that close them), never inside one, unless a line alone is too big.
func TestCode_SplitsOnlyWhereLinesStart(t *testing.T) {
	t.Parallel()
	enc := tokenizer.CL100K()
	for name, text := range codeFiles(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, sz := range []struct{ size, overlap int }{{48, 0}, {64, 12}, {100, 0}} {
				chunks := chunkCode(t, name, text, sz.size, sz.overlap)
				inside := 0 // chunk boundaries inside top-level declarations
				starts, _, ends := parseTop(t, ingest.LanguageForFile(name), text)
				for _, ch := range chunks {
					for _, b := range []int{ch.StartOffset, ch.EndOffset} {
						if b == 0 || b == len(text) {
							continue
						}
						for i := range starts {
							if starts[i] < b && b < ends[i] {
								inside++
							}
						}
						if text[b-1] == '\n' {
							continue
						}
						lineStart := strings.LastIndexByte(text[:b], '\n') + 1
						lineEnd := len(text)
						if nl := strings.IndexByte(text[b:], '\n'); nl >= 0 {
							lineEnd = b + nl + 1
						}
						if enc.Count(text[lineStart:lineEnd]) <= sz.size {
							t.Errorf("size %d: chunk %d [%d, %d) has a boundary inside the line %q, which fits", sz.size, ch.Index, ch.StartOffset, ch.EndOffset, text[lineStart:lineEnd])
						}
					}
				}
				if inside == 0 {
					t.Errorf("size %d: no declaration was split: the test tests nothing", sz.size)
				}
			}
		})
	}
}

func TestCode_OversizedGoFunctionSplitsBetweenStatements(t *testing.T) {
	t.Parallel()
	text := codeFiles(t)["server.go"]
	start := strings.Index(text, "// ServeHTTP answers")
	end := strings.Index(text, "\nfunc main()")
	chunks := chunkCode(t, "server.go", text, 64, 0)
	// The cuts inside ServeHTTP: each one starts a statement or case, or the closing brace of a block.
	var cuts []string
	for _, ch := range chunks {
		if start < ch.StartOffset && ch.StartOffset < end {
			line, _, _ := strings.Cut(text[ch.StartOffset:], "\n")
			cuts = append(cuts, strings.TrimSpace(line))
		}
		if ch.Metadata["symbols"] == "Server.ServeHTTP" && ch.Metadata["kind"] != kindMethod {
			t.Errorf("chunk %d of ServeHTTP has kind %q", ch.Index, ch.Metadata["kind"])
		}
	}
	if len(cuts) < 3 {
		t.Fatalf("ServeHTTP is cut %d times at size 64, want several: %q", len(cuts), cuts)
	}
	statement := []string{"if ", "switch ", "case ", "default:", "var ", "now ", "key, ", "_, _ =", "w.", "value, ", "http.", "ttl ", "}", "return", "d, "}
	for _, c := range cuts {
		ok := false
		for _, p := range statement {
			ok = ok || strings.HasPrefix(c, p)
		}
		if !ok {
			t.Errorf("a chunk starts at %q, not a statement", c)
		}
	}
	// The first piece keeps the doc comment and the signature.
	for _, ch := range chunks {
		if ch.StartOffset <= start && start < ch.EndOffset && !strings.Contains(ch.Content, "func (srv *Server) ServeHTTP(") {
			t.Errorf("the chunk with ServeHTTP's doc comment lacks its signature: %q", ch.Content)
		}
	}
}

func TestCode_Symbols(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		size int
		want []string // every symbol named by some chunk, in order
	}{
		{"server.go", 512, []string{"MaxKeyLength", "MaxValueLength", "ErrNotFound", "Store", "entry", "NewStore", "Store.Get", "Store.Put", "Store.Sweep", "Server", "Server.ServeHTTP", "main"}},
		{"inventory.py", 150, []string{"LOW_STOCK", "CURRENCY", "InventoryError", "Item", "Move", "Inventory", "Inventory.__init__", "Inventory.add_item", "Inventory.receive", "Inventory.ship", "Inventory._apply", "Inventory.value", "Inventory.low_stock", "Inventory.history", "report", "_demo"}},
		{"router.js", 150, []string{"DEFAULT_TITLE", "compile", "Router", "Router.constructor", "Router.on", "Router.otherwise", "Router.navigate", "Router.resolve", "link", "segments", "start"}},
		{"cache.ts", 150, []string{"Key", "Clock", "CacheOptions", "EvictionReason", "Entry", "systemClock", "Cache", "Cache.constructor", "Cache.size", "Cache.get", "Cache.set", "Cache.delete", "Cache.evict", "Caches", "memoize"}},
		{"cache.ts", 60, []string{"Caches.registry", "Caches.named"}},
		{"TodoList.tsx", 150, []string{"Todo", "Filter", "FILTERS", "nextId", "TodoItem", "useTodos", "TodoList"}},
		{"queue.rs", 150, []string{"Priority", "DEFAULT_CAPACITY", "Job", "QueueError", "Metrics", "Queue", "Queue.new", "Queue.push", "Queue.pop", "Queue.len", "Queue.is_empty", "count_by_priority", "tests"}},
		{"queue.rs", 60, []string{"Job.cmp", "QueueError.fmt", "tests.NoMetrics", "tests.high_priority_first"}},
		{"LruCache.java", 150, []string{"LruCache", "LruCache.Node", "LruCache.LruCache", "LruCache.get", "LruCache.computeIfAbsent", "LruCache.put", "LruCache.size", "LruCache.hitRate", "LruCache.moveToHead", "LruCache.addHead", "LruCache.unlink", "LruCache.toString", "Loader", "Policy"}},
	}
	files := codeFiles(t)
	for _, tc := range cases {
		t.Run(tc.file+"/"+strconv.Itoa(tc.size), func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, ch := range chunkCode(t, tc.file, files[tc.file], tc.size, 0) {
				if ch.Metadata["language"] != ingest.LanguageForFile(tc.file) {
					t.Errorf("chunk %d language %q", ch.Index, ch.Metadata["language"])
				}
				for _, s := range strings.Split(ch.Metadata["symbols"], ",") {
					if s != "" && !slices.Contains(got, s) {
						got = append(got, s)
					}
				}
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("no chunk names %q; symbols: %q", w, got)
				}
			}
			if tc.size >= 150 && !slices.Equal(got, tc.want) {
				t.Errorf("symbols %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCode_MetadataOfEachChunk(t *testing.T) {
	t.Parallel()
	text := "package demo\n\n" + // 1-2
		"import \"fmt\"\n\n" + // 3-4
		"// Greeter greets.\ntype Greeter struct{ name string }\n\n" + // 5-7
		"// Greet prints a greeting.\nfunc (g *Greeter) Greet() {\n\tfmt.Println(\"hello,\", g.name)\n}\n\n" + // 8-12
		"func main() {\n\t(&Greeter{name: \"loom\"}).Greet()\n}\n" // 13-15
	chunks, err := New().Chunk(context.Background(), text, &chunker.Options{ChunkSize: 30, NoOverlap: true, Language: "golang"})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, text, chunker.Options{ChunkSize: 30, NoOverlap: true, Language: "go"}, chunks)
	want := []map[string]string{
		{"language": "go", "symbols": "Greeter", "kind": "mixed", "start_line": "1", "end_line": "6"},
		{"language": "go", "symbols": "Greeter.Greet", "kind": "method", "start_line": "8", "end_line": "11"},
		{"language": "go", "symbols": "main", "kind": "function", "start_line": "13", "end_line": "15"},
	}
	if len(chunks) != len(want) {
		t.Fatalf("%d chunks, want %d: %+v", len(chunks), len(want), chunks)
	}
	for i, ch := range chunks {
		for k, v := range want[i] {
			if ch.Metadata[k] != v {
				t.Errorf("chunk %d (%q) %s = %q, want %q", i, ch.Content, k, ch.Metadata[k], v)
			}
		}
	}
	// Lines are those of the chunk's first and last non-space text, on any input.
	for name, text := range codeFiles(t) {
		for _, ch := range chunkCode(t, name, text, 80, 16) {
			lo := ch.StartOffset + len(ch.Content) - len(strings.TrimLeft(ch.Content, " \t\r\n"))
			hi := ch.StartOffset + len(strings.TrimRight(ch.Content, " \t\r\n"))
			if got, want := ch.Metadata["start_line"], strconv.Itoa(1+strings.Count(text[:lo], "\n")); got != want {
				t.Errorf("%s chunk %d start_line %s, want %s", name, ch.Index, got, want)
			}
			if got, want := ch.Metadata["end_line"], strconv.Itoa(1+strings.Count(text[:hi-1], "\n")); got != want {
				t.Errorf("%s chunk %d end_line %s, want %s", name, ch.Index, got, want)
			}
		}
	}
}

func TestCode_Kinds(t *testing.T) {
	t.Parallel()
	cases := []struct{ lang, src, kind, symbols string }{
		{"go", "type S struct{ a int }\n", kindStruct, "S"},
		{"go", "type I interface{ M() }\n", kindInterface, "I"},
		{"go", "type N int\n", kindType, "N"},
		{"go", "const a, b = 1, 2\n", kindConst, "a,b"},
		{"go", "var x = 1\n", kindVar, "x"},
		{"go", "import \"os\"\n", kindImport, ""},
		{"go", "package p\n", kindPackage, ""},
		{"go", "func (l *List[T]) Push(v T) {}\n", kindMethod, "List.Push"},
		{"go", "// just a comment\n", kindComment, ""},
		{"python", "class A:\n    def f(self):\n        pass\n", kindClass, "A"},
		{"python", "@cache\ndef f():\n    return 1\n", kindFunction, "f"},
		{"python", "import os\nfrom x import y\n", kindImport, ""},
		{"python", "X = 1\n", kindVar, "X"},
		{"python", "print('hi')\n", kindStatement, ""},
		{"javascript", "export const f = (a) => a;\n", kindFunction, "f"},
		{"javascript", "class A { m() {} }\n", kindClass, "A"},
		{"javascript", "let a = 1, b = 2;\n", kindVar, "a,b"},
		{"typescript", "enum E { A, B }\n", kindEnum, "E"},
		{"typescript", "export interface I { a(): void }\n", kindInterface, "I"},
		{"typescript", "type T = string;\n", kindType, "T"},
		{"typescript", "declare function f(x: number): void;\n", kindFunction, "f"},
		{"tsx", "const App = () => <div>hi</div>;\n", kindFunction, "App"},
		{"rust", "impl<T> Display for Wrapper<T> {\n    fn fmt(&self) {}\n}\n", kindImpl, "Wrapper"},
		{"rust", "pub trait T { fn t(&self); }\n", kindTrait, "T"},
		{"rust", "#[derive(Debug)]\nstruct S;\n", kindStruct, "S"},
		{"rust", "use std::io;\n", kindImport, ""},
		{"rust", "mod m { fn f() {} }\n", kindModule, "m"},
		{"java", "interface I { void m(); }\n", kindInterface, "I"},
		{"java", "enum E { A; void q() {} }\n", kindEnum, "E"},
		{"java", "record R(int a) {}\n", kindClass, "R"},
		{"java", "import java.util.List;\n", kindImport, ""},
		{"go", "package p\n\nfunc f() {}\n", kindMixed, "f"},
	}
	for _, tc := range cases {
		t.Run(tc.lang+"/"+tc.src, func(t *testing.T) {
			t.Parallel()
			chunks, err := New().Chunk(context.Background(), tc.src, &chunker.Options{Language: tc.lang})
			if err != nil || len(chunks) != 1 {
				t.Fatalf("%d chunks, error %v", len(chunks), err)
			}
			if md := chunks[0].Metadata; md["kind"] != tc.kind || md["symbols"] != tc.symbols {
				t.Errorf("kind %q symbols %q, want %q %q", md["kind"], md["symbols"], tc.kind, tc.symbols)
			}
		})
	}
}

func TestCode_MembersOfASplitClassAreQualified(t *testing.T) {
	t.Parallel()
	text := codeFiles(t)["LruCache.java"]
	chunks := chunkCode(t, "LruCache.java", text, 120, 0)
	for _, ch := range chunks {
		if strings.Contains(ch.Content, "private void unlink(") {
			if !slices.Contains(strings.Split(ch.Metadata["symbols"], ","), "LruCache.unlink") {
				t.Errorf("the chunk with unlink names %q", ch.Metadata["symbols"])
			}
		}
		if strings.HasPrefix(strings.TrimSpace(ch.Content), "/**\n * A least-recently-used") &&
			!strings.HasPrefix(ch.Metadata["symbols"], "LruCache") {
			t.Errorf("the chunk with the class header names %q", ch.Metadata["symbols"])
		}
	}
}

// brokenSources are source files with syntax errors, which tree-sitter parses with ERROR and MISSING nodes.
var brokenSources = []struct{ lang, src string }{
	{"go", "package main\n\nfunc main() {\n\tif x := f(; x > 0 {\n\t\tprintln(\"unclosed\"\n\t}\n\nfunc g() int { return 1 }\n"},
	{"go", "}}}} func (( type struct {\n\n\n" + strings.Repeat("x := ", 200) + "\n// trailing comment"},
	{"go", "package p\n/* unterminated comment\nfunc f() {}\n"},
	{"python", "def f(:\n    return [1, 2\n\nclass A\n    x = 1\n  y = 2\n\tz = 3\n"},
	{"python", "if True:\n" + strings.Repeat("    x = '''\n", 30) + "print('é\u0301')\n"},
	{"javascript", "function f( {\n  return `unterminated ${x\n}\nclass { }\nconst = ;\n"},
	{"typescript", "interface I { a: ; }\nclass C implements { m(): { } }\nexport default\n"},
	{"tsx", "const x = <div><span>unclosed</div>;\nfunction f() { return <></> }\n"},
	{"rust", "fn main() {\n    let x = ;\n    match y {\n        1 => ,\n}\nimpl for {}\n#[derive(\n"},
	{"java", "public class A {\n  void m( {\n    int x = ;\n  }\n\n  class\n}\n}\n"},
	{"go", "package p\n\nvar s = \"\xff\xfe bad utf8 \xe2\x82\"\nfunc f() { println(\"中文👨‍👩‍👧‍👦e\u0301\") }\n"},
	{"go", "package p\nfunc f() {\n" + strings.Repeat("if x {\n", 300) + strings.Repeat("}\n", 300) + "}\n"},
	{"javascript", "x = " + strings.Repeat("[\n", 400) + strings.Repeat("]\n", 400)},
	{"javascript", strings.Repeat("function a(b){return b+1};var c=a(2);if(c){console.log(c)}", 60)},
}

func TestCode_SyntaxErrorsStillCoverEverything(t *testing.T) {
	t.Parallel()
	for i, tc := range brokenSources {
		t.Run(tc.lang+"/"+strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			for _, sz := range sizes {
				opts := chunker.Options{ChunkSize: sz.size, ChunkOverlap: sz.overlap, NoOverlap: sz.overlap == 0, Language: tc.lang}
				chunks, err := New().Chunk(context.Background(), tc.src, &opts)
				if errors.Is(err, chunker.ErrSizeTooSmall) && sz.size < 8 {
					continue
				}
				if err != nil {
					t.Fatalf("size %d: %v", sz.size, err)
				}
				checkInvariants(t, tc.src, opts, chunks)
			}
		})
	}
}

// TestCode_InvariantsHoldOnTestdata runs the package's invariants over the code testdata and the Go corpus
// file, whole and cut short or scrambled at random places (which makes syntax errors of every kind).
func TestCode_InvariantsHoldOnTestdata(t *testing.T) {
	t.Parallel()
	files := codeFiles(t)
	if data, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", "corpus", "code.go.txt")); err == nil {
		files["corpus.go"] = string(data)
	} else {
		t.Fatal(err)
	}
	for name, text := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(len(text)), 3))
			variants := []string{text, strings.ReplaceAll(text, "\n", "\r\n")}
			for range 4 {
				variants = append(variants, text[:chunktest.CharStart(text, r.IntN(len(text)))])
				a, b := chunktest.CharStart(text, r.IntN(len(text))), chunktest.CharStart(text, r.IntN(len(text)))
				variants = append(variants, text[:min(a, b)]+text[max(a, b):])
				junk := []string{"{", "}", "(", "\"", "'", "/*", "`", "\n\n", "é\u0301", "\xff", ")", "<div>", "def ", "\t"}[r.IntN(14)]
				variants = append(variants, text[:a]+junk+text[a:])
			}
			for i, v := range variants {
				for _, sz := range sizes {
					if len(v) > 20000 && (sz.size < 50 || i > 1) {
						continue // keep small sizes fast
					}
					opts := chunker.Options{ChunkSize: sz.size, ChunkOverlap: sz.overlap, NoOverlap: sz.overlap == 0, Language: ingest.LanguageForFile(name)}
					chunks, err := New().Chunk(context.Background(), v, &opts)
					if errors.Is(err, chunker.ErrSizeTooSmall) && sz.size < 8 {
						continue
					}
					if err != nil {
						t.Fatalf("variant %d size %d: %v", i, sz.size, err)
					}
					checkInvariants(t, v, opts, chunks)
				}
			}
		})
	}
}

func TestCode_UnknownLanguageFallsBackToLines(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("some configuration line = value\n", 40) + "\n\n" + strings.Repeat("word ", 300)
	for _, lang := range []string{"", "text", "TEXT"} {
		opts := chunker.Options{ChunkSize: 40, NoOverlap: true, Language: lang}
		chunks, err := New().Chunk(context.Background(), text, &opts)
		if err != nil {
			t.Fatalf("Language %q: %v", lang, err)
		}
		checkInvariants(t, text, opts, chunks)
		for _, ch := range chunks {
			if ch.Metadata["language"] != "text" || ch.Metadata["kind"] != kindText || ch.Metadata["symbols"] != "" {
				t.Fatalf("Language %q: chunk %d metadata %v", lang, ch.Index, ch.Metadata)
			}
			// The lines part is cut between lines, the words part between words.
			if ch.EndOffset < 40*32 && text[ch.EndOffset-1] != '\n' {
				t.Errorf("Language %q: chunk %d ends inside a line: %q", lang, ch.Index, ch.Content)
			}
		}
		if got := chunks[len(chunks)-1].Metadata["end_line"]; got != "43" {
			t.Errorf("Language %q: last chunk's end_line %s, want 43", lang, got)
		}
	}
}

func TestCode_LanguageNamesAndErrors(t *testing.T) {
	t.Parallel()
	for alias, want := range map[string]string{
		"go": "go", "golang": "go", "Go": "go", "py": "python", "python3": "python", "js": "javascript",
		"jsx": "javascript", "ts": "typescript", " TypeScript ": "typescript", "tsx": "tsx", "rs": "rust",
		"rust": "rust", "java": "java",
	} {
		chunks, err := New().Chunk(context.Background(), "x", &chunker.Options{Language: alias})
		if err != nil || len(chunks) != 1 || chunks[0].Metadata["language"] != want {
			t.Errorf("Language %q: %v, %v; want language %q", alias, chunks, err, want)
		}
	}
	for _, bad := range []string{"cobol", "c++", "golang2", "markdown"} {
		_, err := New().Chunk(context.Background(), "x", &chunker.Options{Language: bad})
		if !errors.Is(err, chunker.ErrUnknownLanguage) || !strings.Contains(err.Error(), "go, java, javascript, python, rust, tsx, typescript") {
			t.Errorf("Language %q: error %v, want chunker.ErrUnknownLanguage listing the known ones", bad, err)
		}
	}
	// A bad language is an error even with nothing to chunk; other options are checked too.
	if _, err := New().Chunk(context.Background(), "", &chunker.Options{Language: "cobol"}); !errors.Is(err, chunker.ErrUnknownLanguage) {
		t.Errorf("empty text, bad language: %v", err)
	}
	if _, err := New().Chunk(context.Background(), "x", &chunker.Options{Language: "go", ChunkOverlap: -1}); !errors.Is(err, chunker.ErrNegativeOverlap) {
		t.Errorf("negative overlap: %v", err)
	}
	if _, err := New().Chunk(context.Background(), "x", &chunker.Options{Strategy: chunker.Recursive}); !errors.Is(err, chunker.ErrStrategyMismatch) {
		t.Errorf("strategy mismatch: %v", err)
	}
	if chunks, err := New().Chunk(context.Background(), " \n\t\n", &chunker.Options{Language: "go"}); err != nil || chunks != nil {
		t.Errorf("whitespace: %v, %v", chunks, err)
	}
	if got := chunker.CodeLanguages(); !slices.Equal(got, []string{"go", "java", "javascript", "python", "rust", "tsx", "typescript"}) {
		t.Errorf("chunker.CodeLanguages() = %v", got)
	}
}

func TestCode_HonoursCancellation(t *testing.T) {
	t.Parallel()
	text := codeFiles(t)["server.go"]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, lang := range append(chunker.CodeLanguages(), "") {
		if _, err := New().Chunk(ctx, text, &chunker.Options{Language: lang}); !errors.Is(err, context.Canceled) {
			t.Errorf("Language %q, cancelled before: error %v", lang, err)
		}
	}
	// Cancelled while chunking: the counter cancels after a few counts.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := 0
	counter := tokenizer.CounterFunc(func(s string) int {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 5 {
			cancel()
		}
		return tokenizer.CL100K().Count(s)
	})
	if _, err := New().Chunk(ctx, text, &chunker.Options{ChunkSize: 30, Language: "go", Counter: counter}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while chunking: error %v", err)
	}
}

func TestCode_ConcurrentCallsAreIndependent(t *testing.T) {
	t.Parallel()
	files := codeFiles(t)
	c := New()
	want := map[string][]chunker.ChunkResult{}
	for name, text := range files {
		want[name] = chunkCode(t, name, text, 100, 20)
	}
	var wg sync.WaitGroup
	for range 4 {
		for name, text := range files {
			wg.Go(func() {
				got, err := c.Chunk(context.Background(), text, &chunker.Options{ChunkSize: 100, ChunkOverlap: 20, Language: ingest.LanguageForFile(name)})
				if err != nil || len(got) != len(want[name]) {
					t.Errorf("%s: %d chunks, %v; want %d", name, len(got), err, len(want[name]))
					return
				}
				for i := range got {
					if got[i].Content != want[name][i].Content || got[i].Metadata["symbols"] != want[name][i].Metadata["symbols"] {
						t.Errorf("%s: chunk %d differs between calls", name, i)
					}
				}
			})
		}
	}
	wg.Wait()
}

// TestCode_CountsEachByteABoundedNumberOfTimes checks invariant 7 with a counter that counts whole strings
// (no early stop): the bytes counted stay within a small multiple of the text.
func TestCode_CountsEachByteABoundedNumberOfTimes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", "corpus", "code.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, size := range []int{128, 512, 4096} {
		var counted int
		counter := tokenizer.CounterFunc(func(s string) int {
			counted += len(s)
			return tokenizer.CL100K().Count(s)
		})
		if _, err := New().Chunk(context.Background(), text, &chunker.Options{ChunkSize: size, Language: "go", Counter: counter}); err != nil {
			t.Fatal(err)
		}
		if ratio := float64(counted) / float64(len(text)); ratio > 8 {
			t.Errorf("size %d: counted %.1f bytes per byte of text", size, ratio)
		}
	}
}

// textwrap returns the Python file of package chunker's testdata.
func textwrap(t testing.TB) string {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "textwrap.py"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func BenchmarkCode(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", "corpus", "code.go.txt"))
	if err != nil {
		b.Fatal(err)
	}
	c := New()
	for _, bc := range []struct{ name, lang, text string }{
		{"go", "go", string(data)},
		{"text", "", string(data)},
		{"python", "python", textwrap(b)},
		{"nested", "go", "package p\nfunc f() {\n" + strings.Repeat("if x {\n", 2000) + strings.Repeat("}\n", 2000) + "}\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Chunk(context.Background(), bc.text, &chunker.Options{ChunkSize: 512, Language: bc.lang}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzCode checks the invariants on any text in any language, seeded with the code testdata and the broken
// sources.
func FuzzCode(f *testing.F) {
	langs := append(chunker.CodeLanguages(), "")
	for name, text := range codeFiles(f) {
		f.Add(text, uint8(40), uint8(8), uint8(slices.Index(langs, ingest.LanguageForFile(name))))
	}
	for i, tc := range brokenSources {
		f.Add(tc.src, uint8(8+i), uint8(i%4), uint8(slices.Index(langs, tc.lang)))
	}
	f.Fuzz(func(t *testing.T, text string, size, overlap, which uint8) {
		if len(text) > 8000 {
			text = text[:8000]
		}
		sz := 4 + int(size)%200
		opts := chunker.Options{ChunkSize: sz, ChunkOverlap: int(overlap) % sz, Language: langs[int(which)%len(langs)]}
		opts.NoOverlap = opts.ChunkOverlap == 0
		chunks, err := New().Chunk(context.Background(), text, &opts)
		if errors.Is(err, chunker.ErrSizeTooSmall) && sz < 8 {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", opts.Language, err)
		}
		checkInvariants(t, text, opts, chunks)
	})
}

// memoryInputs are the inputs BenchmarkChunkMemory measures.
var memoryInputs = []string{"go", "dense", "statements", "prose"}

// memoryCase returns the case of BenchmarkChunkMemory called input.
func memoryCase(input string) (string, chunktest.ChunkFunc, error) {
	text, lang, err := chunktest.MemoryInput(filepath.Join("..", ".."), input)
	if err != nil {
		return "", nil, err
	}
	opts := &chunker.Options{Language: lang}
	return text, func(ctx context.Context, text string) (int, error) {
		chunks, err := New().Chunk(ctx, text, opts)
		return len(chunks), err
	}, nil
}

func TestMain(m *testing.M) { chunktest.Main(m, memoryCase) }

// BenchmarkChunkMemory is package chunker's benchmark of the same name for the tree-sitter chunker: the peak
// memory of chunking per MB of input ("peakMB/MB"), tree-sitter's C allocations included (Go's memory
// statistics do not see them), measured in a fresh child process. Run it with -benchtime=1x.
func BenchmarkChunkMemory(b *testing.B) {
	for _, input := range memoryInputs {
		b.Run("code/"+input, func(b *testing.B) {
			peak, chunks := chunktest.MeasurePeak(b, input)
			text, chunk, err := memoryCase(input)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := chunk(context.Background(), text); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(peak)/float64(len(text)), "peakMB/MB")
			b.ReportMetric(float64(chunks)/(float64(len(text))/(1<<20)), "chunks/MB")
		})
	}
}
