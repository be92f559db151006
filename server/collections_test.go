package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
)

// RunCollectionsAPI checks the collection routes on a store that keeps collections.
func RunCollectionsAPI(t *testing.T, st *store.Store) {
	ts := newTestServer(t, st, server.Limits{})
	c := ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "manual", "chunk_size": 64}, 201)
	id, _ := c["id"].(string)
	if id == "" || c["chunk_strategy"] != "auto" || c["chunk_overlap"] != float64(12) {
		t.Fatalf("created %v", c)
	}
	if out := ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "manual"}, 409); errorCode(out) != "conflict" {
		t.Errorf("a second collection named manual: %v", out)
	}
	ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "x", "chunk_strategy": "magic"}, 400)
	doc := map[string]any{"id": "guides/passwords.md", "source": "guides/passwords.md",
		"text": "# Passwords\n\nA reset link expires after thirty minutes.\n\n# Billing\n\nPremium costs twenty dollars a month.\n"}
	if r := ts.must("POST", "/v1/collections/manual/documents", keyAcme, doc, 201); r["changed"] != true || r["chunks"] == float64(0) {
		t.Errorf("ingest: %v", r)
	}
	if r := ts.must("POST", "/v1/collections/"+id+"/documents", keyAcme, doc, 200); r["changed"] != false {
		t.Errorf("ingesting the same document again: %v", r)
	}
	ts.must("POST", "/v1/collections/manual/documents", keyAcme, map[string]any{"id": "page", "content_type": "html",
		"text": "<html><body><h1>Storage</h1><p>Fifty gigabytes per account.</p><script>leak()</script></body></html>"}, 201)
	ts.must("POST", "/v1/collections/manual/documents", keyAcme, map[string]any{"id": "bad", "text": "a\u0000b"}, 400)
	res := ts.must("POST", "/v1/retrieve", keyAcme, map[string]any{"collection": "manual", "query": "when does a reset link expire", "top_k": 2}, 200)
	results, _ := res["results"].([]any)
	if len(results) == 0 {
		t.Fatalf("retrieve: %v", res)
	}
	first := results[0].(map[string]any)
	if first["document_id"] != "guides/passwords.md" || first["source"] != "guides/passwords.md" || first["kind"] != "fused" ||
		!strings.HasPrefix(first["chunk_id"].(string), "guides/passwords.md#") || !strings.Contains(first["text"].(string), "thirty minutes") {
		t.Errorf("the first result: %v", first)
	}
	if out := ts.must("POST", "/v1/retrieve", keyAcme, map[string]any{"collection": "manual", "query": "storage", "mode": "keyword"}, 200); strings.Contains(jsonString(out), "leak()") {
		t.Error("a script's text was ingested")
	}
	// Assembly with retrieval cites the document.
	a := ts.must("POST", "/v1/assemble", keyAcme, map[string]any{"message": "How much is premium?", "max_tokens": 1000,
		"retrieve": map[string]any{"collection": "manual", "top_k": 3}}, 200)
	if !strings.Contains(jsonString(a["citations"]), "guides/passwords.md") {
		t.Errorf("assembly citations: %v", a["citations"])
	}
	// Another tenant sees nothing of it.
	ts.must("GET", "/v1/collections/"+id, keyGlobex, nil, 404)
	ts.must("POST", "/v1/retrieve", keyGlobex, map[string]any{"collection": id, "query": "reset"}, 404)
	ts.must("DELETE", "/v1/collections/"+id+"/documents/guides/passwords.md", keyGlobex, nil, 404)
	if l := ts.must("GET", "/v1/collections", keyGlobex, nil, 200); len(l["collections"].([]any)) != 0 {
		t.Errorf("globex lists %v", l)
	}
	// Errors.
	for _, tc := range []struct {
		body   any
		status int
	}{
		{map[string]any{"query": "x"}, 400},
		{map[string]any{"collection": "manual", "query": "x", "mode": "psychic"}, 400},
		{map[string]any{"collection": "manual", "query": "x", "top_k": -1}, 400},
		{map[string]any{"collection": "nope", "query": "x"}, 404},
		{`{"collection": "manual", "query": "x", "bogus": 1}`, 400},
	} {
		if code, out, _ := ts.call("POST", "/v1/retrieve", keyAcme, tc.body); code != tc.status {
			t.Errorf("retrieve %v: %d %v, want %d", tc.body, code, out, tc.status)
		}
	}
	// Fusion weights: set at creation, changed by PATCH (absent left alone, null back to the default),
	// overridden per query, refused when they fuse nothing.
	w := ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "weighted", "vector_weight": 0.5}, 201)
	if w["vector_weight"] != 0.5 || w["keyword_weight"] != nil {
		t.Errorf("created with weights: %v", w)
	}
	if w := ts.must("PATCH", "/v1/collections/weighted", keyAcme, map[string]any{"keyword_weight": 2}, 200); w["keyword_weight"] != float64(2) || w["vector_weight"] != 0.5 {
		t.Errorf("PATCH keyword_weight: %v", w)
	}
	if w := ts.must("PATCH", "/v1/collections/weighted", keyAcme, map[string]any{"vector_weight": nil}, 200); w["keyword_weight"] != float64(2) || w["vector_weight"] != nil {
		t.Errorf("PATCH vector_weight null: %v", w)
	}
	if w := ts.must("GET", "/v1/collections/weighted", keyAcme, nil, 200); w["keyword_weight"] != float64(2) || w["vector_weight"] != nil {
		t.Errorf("GET after PATCH: %v", w)
	}
	ts.must("PATCH", "/v1/collections/weighted", keyGlobex, map[string]any{"keyword_weight": 1}, 404)
	for _, body := range []any{
		map[string]any{"keyword_weight": -1},
		map[string]any{"keyword_weight": "heavy"},
		map[string]any{"keyword_weight": 0, "vector_weight": 0},
		map[string]any{"chunk_size": 100}, // not a setting that may change
	} {
		if code, out, _ := ts.call("PATCH", "/v1/collections/weighted", keyAcme, body); code != 400 {
			t.Errorf("PATCH %v: %d %v, want 400", body, code, out)
		}
	}
	ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "bad", "keyword_weight": -0.5}, 400)
	for _, tc := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{map[string]any{"collection": "manual", "query": "x", "keyword_weight": -1}, 400, "keyword weight is -1"},
		{map[string]any{"collection": "manual", "query": "x", "keyword_weight": 0, "vector_weight": 0}, 400, "both 0"},
		{map[string]any{"collection": "manual", "query": "reset link", "keyword_weight": 1, "vector_weight": 0}, 200, ""},
	} {
		code, out, _ := ts.call("POST", "/v1/retrieve", keyAcme, tc.body)
		if code != tc.status || !strings.Contains(jsonString(out), tc.msg) {
			t.Errorf("retrieve %v: %d %v, want %d saying %q", tc.body, code, out, tc.status, tc.msg)
		}
	}
	if docs := ts.must("GET", "/v1/collections/manual/documents", keyAcme, nil, 200); len(docs["documents"].([]any)) != 2 {
		t.Errorf("documents: %v", docs)
	}
	ts.must("DELETE", "/v1/collections/manual/documents/guides/passwords.md", keyAcme, nil, 204)
	ts.must("DELETE", "/v1/collections/manual/documents/guides/passwords.md", keyAcme, nil, 404)
	ts.must("DELETE", "/v1/collections/manual", keyAcme, nil, 204)
	ts.must("GET", "/v1/collections/manual", keyAcme, nil, 404)
}

func TestCollectionsAPI_Memory(t *testing.T) {
	t.Parallel()
	RunCollectionsAPI(t, newMemory())
}

// TestAPI_IndexMetrics: /metrics shows the search indexes: none loaded before a retrieval, one after,
// with its memory and its build.
func TestAPI_IndexMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "manual"}, 201)
	ts.must("POST", "/v1/collections/manual/documents", keyAcme, map[string]any{"id": "a", "text": "A reset link expires after thirty minutes."}, 201)
	metrics := func() string {
		t.Helper()
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	for _, want := range []string{"loom_indexes_loaded 0\n", "loom_index_memory_bytes 0\n", "loom_index_builds_total 0\n", "loom_index_memory_limit_bytes 0\n"} {
		if m := metrics(); !strings.Contains(m, want) {
			t.Errorf("before any retrieval, /metrics lacks %q", want)
		}
	}
	ts.must("POST", "/v1/retrieve", keyAcme, map[string]any{"collection": "manual", "query": "reset link"}, 200)
	m := metrics()
	for _, want := range []string{"loom_indexes_loaded 1\n", "loom_index_builds_total 1\n", "loom_index_build_failures_total 0\n", "loom_index_evictions_total 0\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("after a retrieval, /metrics lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^loom_index_memory_bytes [1-9]`).MatchString(m) {
		t.Errorf("after a retrieval, the index's memory is not shown:\n%s", m)
	}
}
