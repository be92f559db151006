package engine_test

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/store"
)

// dimsServer speaks the OpenAI embeddings API with vectors of dims components, made from the texts' words.
func dimsServer(t *testing.T, dims int) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]datum, len(req.Input))
		for i, text := range req.Input {
			v := make([]float32, dims)
			for _, word := range strings.Fields(strings.ToLower(text)) {
				h := fnv.New32a()
				h.Write([]byte(word))
				v[h.Sum32()%uint32(dims)]++
			}
			data[i] = datum{Index: i, Embedding: v}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

// TestEmbedderMismatch_Refused: a collection records the embedder and the dimensions it was built with, in
// every store, and an engine with another embedder, or the same model answering with other dimensions, is
// refused a vector query and an ingest with an *EmbedderMismatchError naming both, not given scores that
// compare vectors of two spaces. Keyword retrieval, which compares no vectors, still works.
func TestEmbedderMismatch_Refused(t *testing.T) {
	t.Parallel()
	alpha3, alpha8 := dimsServer(t, 3), dimsServer(t, 8)
	openAI := func(t *testing.T, url, model string) engine.Option {
		emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: url, Model: model, APIKey: "sk-secret-key"})
		if err != nil {
			t.Fatal(err)
		}
		return engine.WithEmbedder(emb)
	}
	for _, b := range append([]backend{{name: "memory", open: func(testing.TB) *store.Store { return newMemory() }}}, backends...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			ctx := loom.WithTenant(t.Context(), "acme")
			newEngine := func(opts ...engine.Option) *engine.Engine {
				eng, err := testEngine(st, opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { eng.Close() })
				return eng
			}
			doc := func(id, text string) ingest.Document {
				return ingest.Document{ID: id, ContentType: ingest.TypeText, Text: text}
			}
			built := newEngine(openAI(t, alpha3, "alpha"))
			if _, err := built.CreateCollection(ctx, loom.Collection{Name: "docs"}); err != nil {
				t.Fatal(err)
			}
			if _, err := built.Ingest(ctx, "docs", doc("a.txt", "Rivers carry water to the sea.")); err != nil {
				t.Fatal(err)
			}
			// What the store recorded, read by an engine that did not build it.
			coll, err := newEngine().Collection(ctx, "docs")
			if err != nil {
				t.Fatal(err)
			}
			if coll.Embedder != "openai:alpha" || coll.Dimensions != 3 {
				t.Fatalf("the collection records embedder %q, %d dimensions; want openai:alpha, 3", coll.Embedder, coll.Dimensions)
			}
			for _, tc := range []struct {
				name     string
				eng      *engine.Engine
				got      string
				gotDims  int
				inGotten string
			}{
				{"the offline default", newEngine(), "lexical2-384", 384, `"lexical2-384" (384 dimensions)`},
				{"another model", newEngine(openAI(t, alpha3, "beta")), "openai:beta", 0, `"openai:beta"`},
				{"other dimensions", newEngine(openAI(t, alpha8, "alpha")), "openai:alpha", 8, `"openai:alpha" (8 dimensions)`},
			} {
				check := func(what string, err error) {
					t.Helper()
					var me *engine.EmbedderMismatchError
					if !errors.As(err, &me) || !errors.Is(err, engine.ErrEmbedderMismatch) || !errors.Is(err, loom.ErrInvalid) {
						t.Fatalf("%s, %s: err = %v, want an *EmbedderMismatchError", tc.name, what, err)
					}
					if me.Collection != "docs" || me.Embedder != "openai:alpha" || me.Dimensions != 3 || me.GotEmbedder != tc.got || me.GotDimensions != tc.gotDims {
						t.Errorf("%s, %s: %+v", tc.name, what, *me)
					}
					msg := err.Error()
					if !strings.Contains(msg, `"openai:alpha" (3 dimensions)`) || !strings.Contains(msg, tc.inGotten) || strings.Contains(msg, "sk-secret-key") {
						t.Errorf("%s, %s: the message %q does not name both embedders (or shows the key)", tc.name, what, msg)
					}
				}
				for _, mode := range []string{engine.ModeHybrid, engine.ModeVector, engine.ModeMMR} {
					_, err := tc.eng.Retrieve(ctx, "rivers", engine.WithCollection("docs"), engine.WithMode(mode))
					check("retrieve "+mode, err)
				}
				_, err := tc.eng.Ingest(ctx, "docs", doc("b.txt", "Hills are green in spring."))
				check("ingest", err)
				// Ingesting the unchanged document again is refused too: nothing is done with the wrong embedder.
				_, err = tc.eng.Ingest(ctx, "docs", doc("a.txt", "Rivers carry water to the sea."))
				check("ingest unchanged", err)
				if res, err := tc.eng.Retrieve(ctx, "rivers", engine.WithCollection("docs"), engine.WithMode(engine.ModeKeyword)); err != nil || len(res) != 1 {
					t.Errorf("%s: keyword retrieval = %d results, %v; want 1", tc.name, len(res), err)
				}
			}
			if docs, err := built.Documents(ctx, "docs"); err != nil || len(docs) != 1 {
				t.Fatalf("documents after the refused ingests = %v, %v; want a.txt alone", docs, err)
			}
			if res, err := built.Retrieve(ctx, "rivers", engine.WithCollection("docs"), engine.WithMode(engine.ModeVector)); err != nil || len(res) != 1 {
				t.Errorf("the embedder it was built with: %d results, %v; want 1", len(res), err)
			}
		})
	}
}
