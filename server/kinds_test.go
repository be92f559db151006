package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
