package engine_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
)

// embeddingsServer speaks the OpenAI embeddings API and records how many texts each request held.
type embeddingsServer struct {
	mu      sync.Mutex
	batches []int
}

func (s *embeddingsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input []string `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.batches = append(s.batches, len(req.Input))
	s.mu.Unlock()
	type datum struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]datum, len(req.Input))
	for i, text := range req.Input {
		data[i] = datum{Index: i, Embedding: []float32{1, float32(len(text))}}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// TestIngest_EmbedderOwnsItsBatching: the engine hands the embedder a document's chunks in one call, so an
// OpenAI-style embedder of BatchSize 200 sends requests of 200 texts (the engine cut them into 64s).
func TestIngest_EmbedderOwnsItsBatching(t *testing.T) {
	t.Parallel()
	srv := &embeddingsServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: ts.URL + "/v1", Model: "test-embed", BatchSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := testEngine(newMemory(), engine.WithEmbedder(emb))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "many", ChunkStrategy: "fixed", ChunkSize: engine.MinChunkSize, ChunkOverlap: -1})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i := range 3600 {
		fmt.Fprintf(&text, "word%d ", i%10)
	}
	r, err := eng.IngestText(ctx, c.ID, "many.txt", "", "", text.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Chunks <= 400 {
		t.Fatalf("%d chunks, want more than 400 for three requests", r.Chunks)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if want := []int{200, 200, r.Chunks - 400}; !slices.Equal(srv.batches, want) {
		t.Errorf("requests of %v texts, want %v", srv.batches, want)
	}
}
