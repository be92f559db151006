package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/ingest"
)

const goSource = "package util\n\n// Add adds two numbers.\nfunc Add(a, b int) int { return a + b }\n"

func TestAutoStrategy_SuitsTheDocument(t *testing.T) {
	t.Parallel()
	for source, want := range map[string]string{
		"a.md": chunker.Markdown, "a.html": chunker.Markdown, "a.go": chunker.Code, "a.txt": chunker.Recursive,
	} {
		doc, err := ingest.Read(source, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if got := engine.AutoStrategy(doc); got != want {
			t.Errorf("%s: %q, want %q", source, got, want)
		}
		if _, err := chunker.New(want); err != nil {
			t.Errorf("%s: %v", source, err)
		}
	}
}

// TestIngest_LanguagesAreTheCodeStrategys: every language ingestion tells from a file name is one the code
// strategy takes.
func TestIngest_LanguagesAreTheCodeStrategys(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"a.go", "a.py", "a.pyi", "a.pyw", "a.js", "a.mjs", "a.cjs", "a.jsx", "a.ts", "a.mts", "a.cts", "a.tsx", "a.rs", "a.java"} {
		lang := ingest.LanguageForFile(file)
		if !slices.Contains(chunker.CodeLanguages(), lang) {
			t.Errorf("ingest.LanguageForFile(%q) = %q, not one of chunker.CodeLanguages() %v", file, lang, chunker.CodeLanguages())
		}
	}
}

// chunkMetadata returns the metadata of the chunks of a collection that a keyword query finds.
func chunkMetadata(t *testing.T, eng *engine.Engine, coll, query string) []map[string]string {
	t.Helper()
	res, err := eng.Retrieve(t.Context(), query, engine.WithCollection(coll), engine.WithMode(engine.ModeKeyword), engine.WithTopK(10))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range res {
		out = append(out, r.Chunk.Metadata)
	}
	return out
}

// TestIngest_CodeWithoutAParserSaysSo: an engine whose registry has no parsing code chunker (the default, and
// every build without cgo) ingests code as plain text rather than failing, and the chunks say so.
func TestIngest_CodeWithoutAParserSaysSo(t *testing.T) {
	t.Parallel()
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := t.Context()
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "code"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := eng.IngestText(ctx, c.ID, "util.go", "util.go", "", goSource, nil); err != nil || r.Chunks == 0 {
		t.Fatalf("ingest: %+v %v", r, err)
	}
	md := chunkMetadata(t, eng, c.ID, "adds numbers")
	if len(md) == 0 {
		t.Fatal("nothing retrieved")
	}
	for _, m := range md {
		if m[chunker.MetaParse] != chunker.ParseFallback || m[chunker.MetaParseReason] != chunker.FallbackUnavailable || m[chunker.MetaLanguage] != "go" {
			t.Errorf("chunk metadata %v, want a fallback for want of a parser", m)
		}
	}
}

// lineChunker stands for a parsing code chunker: one chunk per line, which says it was here.
type lineChunker struct{ sentenceChunker }

func (c lineChunker) Chunk(ctx context.Context, text string, opts *chunker.Options) ([]chunker.ChunkResult, error) {
	if opts.Language != "go" {
		return nil, errors.New("lineChunker: not given the document's language")
	}
	out, err := c.sentenceChunker.Chunk(ctx, text, opts)
	for i := range out {
		out[i].Metadata = map[string]string{"by": "lineChunker"}
	}
	return out, err
}

// TestWithChunkers_ReplacesTheCodeStrategy: the registry given to WithChunkers resolves the strategies, a
// chunker in place of the built-in "code" chunks the code documents of auto, and the same bytes ingested
// again by an engine with the other code chunker are chunked again, not kept.
func TestWithChunkers_ReplacesTheCodeStrategy(t *testing.T) {
	t.Parallel()
	st := newMemory()
	reg := chunker.NewRegistry()
	if err := reg.Register(chunker.Code, lineChunker{}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	plain, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	c, err := plain.CreateCollection(ctx, loom.Collection{Name: "code"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := plain.IngestText(ctx, c.ID, "util.go", "util.go", "", goSource, nil); err != nil || !r.Changed {
		t.Fatalf("ingest without a parser: %+v %v", r, err)
	}
	if r, err := plain.IngestText(ctx, c.ID, "util.go", "util.go", "", goSource, nil); err != nil || r.Changed {
		t.Fatalf("the same bytes again: %+v %v, want unchanged", r, err)
	}

	parsing, err := testEngine(st, engine.WithChunkers(reg), engine.WithNamedChunker("lines", sentenceChunker{}))
	if err != nil {
		t.Fatal(err)
	}
	defer parsing.Close()
	if parsing.Chunkers() != reg {
		t.Error("Chunkers() is not the registry WithChunkers gave")
	}
	if _, err := reg.Lookup("lines"); err != nil {
		t.Errorf("WithNamedChunker did not register in the given registry: %v", err)
	}
	r, err := parsing.IngestText(ctx, c.ID, "util.go", "util.go", "", goSource, nil)
	if err != nil || !r.Changed || r.Chunks != 4 {
		t.Fatalf("the same bytes with the other code chunker: %+v %v, want chunked again, a chunk a line", r, err)
	}
	for _, m := range chunkMetadata(t, parsing, c.ID, "adds numbers") {
		if m["by"] != "lineChunker" {
			t.Errorf("chunk metadata %v, not the registered code chunker's", m)
		}
	}
	if _, err := parsing.CreateCollection(ctx, loom.Collection{Name: "by-lines", ChunkStrategy: "lines"}); err != nil {
		t.Errorf("a collection of a strategy WithNamedChunker registered: %v", err)
	}
	if _, err := plain.CreateCollection(ctx, loom.Collection{Name: "by-lines", ChunkStrategy: "lines"}); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("another engine knows the strategy: %v", err)
	}
	if _, err := testEngine(st, engine.WithChunkers(nil)); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("WithChunkers(nil): %v", err)
	}
	if _, err := testEngine(st, engine.WithNamedChunker(chunker.Code, lineChunker{})); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("WithNamedChunker of a built-in name: %v", err)
	}
}
