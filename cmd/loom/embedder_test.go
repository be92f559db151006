package main

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// embeddingsAPI speaks the OpenAI embeddings API with 16-dimensional vectors hashed from the texts' words,
// for requests that bear the key; it counts the requests it answered.
func embeddingsAPI(t *testing.T, key string) (url string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"bad key or path"}}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		requests.Add(1)
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]datum, len(req.Input))
		for i, text := range req.Input {
			v := make([]float32, 16)
			for _, w := range strings.Fields(strings.ToLower(text)) {
				h := fnv.New32a()
				h.Write([]byte(strings.Trim(w, ".,?")))
				v[h.Sum32()%16]++
			}
			data[i] = datum{Index: i, Embedding: v}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "model": req.Model})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", requests
}

// TestEmbedderFlags_IngestAndRetrieve: loom ingest and loom retrieve embed with the API that --embedder-url
// and --embedder-model (or LOOM_EMBEDDER_URL and LOOM_EMBEDDER_MODEL) name, with the key of
// LOOM_EMBEDDER_API_KEY; the collection records "openai:MODEL" and 16 dimensions; a retrieval or an ingest with
// another embedder (the offline default, another model) exits 2 with an error naming both and never the key.
func TestEmbedderFlags_IngestAndRetrieve(t *testing.T) {
	// Not parallel: it sets LOOM_EMBEDDER_API_KEY.
	const key = "sk-embedder-secret"
	t.Setenv("LOOM_EMBEDDER_API_KEY", key)
	url, requests := embeddingsAPI(t, key)
	db := "sqlite:" + filepath.Join(t.TempDir(), "loom.db")
	files := writeFiles(t, "Rivers carry water to the sea.", "Hills are green in spring.")
	flags := []string{"--embedder-url", url, "--embedder-model", "hash-16"}
	if _, errOut, code := runLoom(t, "", append(append([]string{"ingest", "--store", db, "--collection", "kb"}, flags...), files...)...); code != 0 ||
		!strings.Contains(errOut, "embedder openai:hash-16") {
		t.Fatalf("ingest: exit %d: %s", code, errOut)
	}
	if requests.Load() == 0 {
		t.Fatal("ingest sent no request to the embeddings API")
	}
	out, errOut, code := runLoom(t, "", "collection", "show", "--store", db, "--collection", "kb")
	if code != 0 || !strings.Contains(out, `"embedder":"openai:hash-16"`) || !strings.Contains(out, `"dimensions":16`) {
		t.Fatalf("collection show: exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code = runLoom(t, "", append(append([]string{"retrieve", "--store", db, "--collection", "kb", "--mode", "vector", "--top-k", "1"}, flags...), "rivers and the sea")...)
	if code != 0 || !strings.Contains(out, "Rivers carry water") {
		t.Fatalf("retrieve: exit %d: %s%s", code, out, errOut)
	}
	// The environment names the embedder as well as the flags do.
	t.Setenv("LOOM_EMBEDDER_URL", url)
	t.Setenv("LOOM_EMBEDDER_MODEL", "hash-16")
	if out, errOut, code := runLoom(t, "", "retrieve", "--store", db, "--collection", "kb", "--mode", "hybrid", "--top-k", "1", "green hills"); code != 0 || !strings.Contains(out, "Hills are green") {
		t.Fatalf("retrieve from the environment: exit %d: %s%s", code, out, errOut)
	}
	t.Setenv("LOOM_EMBEDDER_URL", "")
	t.Setenv("LOOM_EMBEDDER_MODEL", "")
	for _, c := range []struct {
		name  string
		args  []string
		other string
	}{
		{"retrieve, offline default", []string{"retrieve", "--store", db, "--collection", "kb", "rivers"}, `"lexical2-384" (384 dimensions)`},
		{"retrieve, other model", []string{"retrieve", "--store", db, "--collection", "kb", "--embedder-url", url, "--embedder-model", "other", "rivers"}, `"openai:other"`},
		{"ingest, offline default", append([]string{"ingest", "--store", db, "--collection", "kb"}, files...), `"lexical2-384" (384 dimensions)`},
	} {
		_, errOut, code := runLoom(t, "", c.args...)
		if code != exitUsage || !strings.Contains(errOut, `was built with embedder "openai:hash-16" (16 dimensions)`) || !strings.Contains(errOut, c.other) ||
			!strings.Contains(errOut, "--embedder-url") || strings.Contains(errOut, key) {
			t.Errorf("%s: exit %d: %s", c.name, code, errOut)
		}
	}
	// Keyword retrieval compares no vectors: it needs no embedder.
	if out, errOut, code := runLoom(t, "", "retrieve", "--store", db, "--collection", "kb", "--mode", "keyword", "rivers"); code != 0 || !strings.Contains(out, "Rivers") {
		t.Errorf("keyword retrieve: exit %d: %s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"--embedder-url", url}, {"--embedder-model", "m"}, {"--embedder-dimensions", "8"}, {"--embedder-url", "ftp://x", "--embedder-model", "m"}} {
		if _, errOut, code := runLoom(t, "", append(append([]string{"retrieve", "--store", db, "--collection", "kb"}, args...), "q")...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errOut)
		}
	}
}

// TestServe_WithAnEmbedder: loom serve embeds with the API the environment names, logs that it has one (never
// its key), and answers a query on a collection of another embedder with 409 embedder_mismatch.
func TestServe_WithAnEmbedder(t *testing.T) {
	const key = "sk-serve-embedder-secret"
	url, requests := embeddingsAPI(t, key)
	t.Setenv("LOOM_EMBEDDER_URL", url)
	t.Setenv("LOOM_EMBEDDER_MODEL", "hash-16")
	t.Setenv("LOOM_EMBEDDER_API_KEY", key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--log-format", "json"},
			strings.NewReader(""), &bytes.Buffer{}, logs)
	}()
	base := listening(t, logs, done)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/v1/collections", `{"name":"kb"}`); code != http.StatusCreated || !strings.Contains(body, `"embedder":"openai:hash-16"`) {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := post("/v1/collections/kb/documents", `{"id":"a","text":"Rivers carry water to the sea."}`); code != http.StatusCreated {
		t.Fatalf("put: %d %s", code, body)
	}
	if code, body := post("/v1/retrieve", `{"collection":"kb","query":"rivers","mode":"vector"}`); code != http.StatusOK || !strings.Contains(body, "Rivers carry") {
		t.Fatalf("retrieve: %d %s", code, body)
	}
	if requests.Load() < 2 {
		t.Errorf("%d requests to the embeddings API, want the document's and the query's", requests.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "embedder configured") || !strings.Contains(logs.String(), `"api_key":true`) || strings.Contains(logs.String(), key) {
		t.Errorf("logs:\n%s", logs)
	}
}

// TestRetrieve_MinScoreMeansTheSameInEveryMode: with the offline embedder, whose cosine similarities are
// low, --min-score 0.5 keeps the best result and those at least half as relevant in every mode, each line's
// "relevance" at least 0.5 (--mode vector --min-score 0.5 kept nothing while hybrid kept results of that
// cosine).
func TestRetrieve_MinScoreMeansTheSameInEveryMode(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "loom.db")
	files := writeFiles(t, "The password reset link is valid for thirty minutes.", "Invoices are sent monthly by email.",
		"A reset of the router needs the admin password.", "Thirty days of history are kept.")
	if _, errOut, code := runLoom(t, "", append([]string{"ingest", "--store", db, "--collection", "kb"}, files...)...); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, errOut)
	}
	for _, mode := range []string{"keyword", "vector", "hybrid", "mmr"} {
		out, errOut, code := runLoom(t, "", "retrieve", "--store", db, "--collection", "kb", "--mode", mode, "--min-score", "0.5", "tell me how many minutes pass before my customer account password reset link expires, and whether support can send another one today")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", mode, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var first struct {
			Text      string  `json:"text"`
			Vector    float64 `json:"vector"`
			Relevance float64 `json:"relevance"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || !strings.Contains(first.Text, "password reset link") || first.Relevance != 1 {
			t.Fatalf("%s: %v; first line %s", mode, err, lines[0])
		}
		if mode == "vector" && first.Vector >= 0.5 {
			t.Fatalf("the best cosine is %v: the test needs one under the min-score", first.Vector)
		}
		for _, l := range lines {
			var h struct {
				Relevance float64 `json:"relevance"`
			}
			if err := json.Unmarshal([]byte(l), &h); err != nil || h.Relevance < 0.5 {
				t.Errorf("%s: %v: %s", mode, err, l)
			}
		}
	}
}
