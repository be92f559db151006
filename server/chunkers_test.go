package server_test

import (
	"context"
	"testing"

	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/server"
)

// markingChunker stands for a parsing code chunker: one chunk, marked.
type markingChunker struct{}

func (markingChunker) Chunk(_ context.Context, text string, _ *chunker.Options) ([]chunker.ChunkResult, error) {
	return []chunker.ChunkResult{{Content: text, EndOffset: len(text), TokenCount: 1, Metadata: map[string]string{"by": "marking"}}}, nil
}

// TestChunk_CodeWithoutAParserSaysSo: /v1/chunk with strategy code on a server whose engine has no parsing
// code chunker (a build without cgo) answers with plain-text chunks whose metadata says why.
func TestChunk_CodeWithoutAParserSaysSo(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	out := ts.must("POST", "/v1/chunk", keyAcme, map[string]any{"text": "package p\n\nfunc F() {}\n", "strategy": "code", "language": "go"}, 200)
	chunks := out["chunks"].([]any)
	if len(chunks) == 0 {
		t.Fatal("no chunks")
	}
	for _, c := range chunks {
		md := c.(map[string]any)["metadata"].(map[string]any)
		if md[chunker.MetaParse] != chunker.ParseFallback || md[chunker.MetaParseReason] != chunker.FallbackUnavailable {
			t.Errorf("chunk metadata %v, want parse fallback, reason unavailable", md)
		}
	}
}

// TestChunk_UsesTheEnginesChunkers: /v1/chunk resolves the strategy in the engine's registry.
func TestChunk_UsesTheEnginesChunkers(t *testing.T) {
	t.Parallel()
	reg := chunker.NewRegistry()
	if err := reg.Register(chunker.Code, markingChunker{}); err != nil {
		t.Fatal(err)
	}
	eng, err := testEngine(newMemory(), engine.WithChunkers(reg))
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerFor(t, eng, server.Limits{})
	out := ts.must("POST", "/v1/chunk", keyAcme, map[string]any{"text": "package p\n", "strategy": "code", "language": "go"}, 200)
	chunks := out["chunks"].([]any)
	if len(chunks) != 1 || chunks[0].(map[string]any)["metadata"].(map[string]any)["by"] != "marking" {
		t.Errorf("chunks %v, not the registered code chunker's", chunks)
	}
}
