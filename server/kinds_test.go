package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/server"
)

// TestIngest_EmbedderDownIs503: an embedding server that fails (an error status after the retries, or no
// server at all) is a service Loom depends on being unavailable: 503 "unavailable", with a message that
// names neither the server's address nor its answer, not a 500 "internal".
func TestIngest_EmbedderDownIs503(t *testing.T) {
	t.Parallel()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"upstream secret-ish detail","type":"server_error"}}`, http.StatusBadGateway)
	}))
	t.Cleanup(failing.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for name, url := range map[string]string{"error status": failing.URL, "no server": gone.URL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: url, Model: "m", Dimensions: 8, MaxRetries: 1, RetryDelay: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			eng, err := testEngine(newMemory(), engine.WithEmbedder(emb))
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.New(server.Config{Engine: eng, Keys: map[string]string{keyAcme: "acme"}})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(hs.Close)
			ts := &testServer{Server: hs, logs: &lockedBuffer{}, t: t}
			ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "c"}, 201)
			out := ts.must("POST", "/v1/collections/c/documents", keyAcme, map[string]any{"id": "d", "text": "some words to embed"}, 503)
			msg, _ := out["error"].(map[string]any)["message"].(string)
			if errorCode(out) != "unavailable" || strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "secret") {
				t.Errorf("got %v", out)
			}
		})
	}
}

// TestRetrieve_EmbedderMismatchIs409: a collection built with the offline embedder, served by a server
// configured with a model's embedder, answers a vector query and an ingest with 409 "embedder_mismatch" and a
// message naming both embedders, and so does an assembly that retrieves from it; keyword retrieval still
// answers.
func TestRetrieve_EmbedderMismatchIs409(t *testing.T) {
	t.Parallel()
	st := newMemory()
	built, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { built.Close() })
	if _, err := built.CreateCollection(loom.WithTenant(t.Context(), "acme"), loom.Collection{Name: "kb"}); err != nil {
		t.Fatal(err)
	}
	emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "text-embedding-3-small", Dimensions: 512})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := testEngine(st, engine.WithEmbedder(emb))
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerFor(t, eng, server.Limits{})
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/retrieve", map[string]any{"collection": "kb", "query": "rivers"}},
		{"/v1/retrieve", map[string]any{"collection": "kb", "query": "rivers", "mode": "vector"}},
		{"/v1/collections/kb/documents", map[string]any{"id": "d", "text": "rivers run"}},
		{"/v1/assemble", map[string]any{"message": "rivers", "max_tokens": 1000, "retrieve": map[string]any{"collection": "kb"}}},
	} {
		out := ts.must("POST", c.path, keyAcme, c.body, 409)
		msg, _ := out["error"].(map[string]any)["message"].(string)
		if errorCode(out) != "embedder_mismatch" || !strings.Contains(msg, `"lexical2-384"`) || !strings.Contains(msg, `"openai:text-embedding-3-small:512" (512 dimensions)`) {
			t.Errorf("%s %v: got %v", c.path, c.body, out)
		}
	}
	ts.must("POST", "/v1/retrieve", keyAcme, map[string]any{"collection": "kb", "query": "rivers", "mode": "keyword"}, 200)
}
