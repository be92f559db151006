package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestAndRetrieve ingests a directory of mixed documents into an SQLite file and retrieves from it.
func TestIngestAndRetrieve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"docs/billing.md":    "# Billing\n\nPremium costs twenty dollars a month.\n",
		"docs/security.html": "<html><head><title>Security</title><script>var secret = 1;</script></head><body><h1>Passwords</h1><p>Reset links expire after thirty minutes.</p></body></html>",
		"docs/code/util.go":  "package util\n\n// Add adds two numbers.\nfunc Add(a, b int) int { return a + b }\n",
		"docs/notes.txt":     "The office closes at six on Fridays.\n",
		"docs/.git/config":   "[core]\n",
		"docs/blob.bin":      "\x00\x01\x02",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := "sqlite:" + filepath.Join(dir, "loom.db")
	root := filepath.Join(dir, "docs")
	out, errOut, code := runLoom(t, "", "ingest", "--store", db, "--collection", "kb", "--json", root)
	if code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, errOut)
	}
	var sum struct {
		Files, Changed, Unchanged, Chunks int
		Skipped                           []string
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Files != 4 || sum.Changed != 4 || len(sum.Skipped) != 1 || !strings.Contains(sum.Skipped[0], "blob.bin") || !strings.Contains(errOut, `created collection "kb"`) {
		t.Fatalf("first ingest: %+v, stderr %q", sum, errOut)
	}
	out, _, code = runLoom(t, "", "ingest", "--store", db, "--collection", "kb", "--json", root)
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.Unchanged != 4 || sum.Changed != 0 {
		t.Fatalf("second ingest: exit %d %+v", code, sum)
	}
	for _, tc := range []struct{ query, mode, doc string }{
		{"how long until a password reset link expires", "hybrid", "security.html"},
		{"premium price per month", "keyword", "billing.md"},
		{"function that adds two numbers", "vector", "util.go"},
		{"when does the office close", "mmr", "notes.txt"},
	} {
		out, errOut, code := runLoom(t, "", "retrieve", "--store", db, "--collection", "kb", "--mode", tc.mode, "--top-k", "2", tc.query)
		if code != 0 {
			t.Fatalf("retrieve: exit %d: %s", code, errOut)
		}
		var first struct {
			Rank       int    `json:"rank"`
			Kind       string `json:"kind"`
			ChunkID    string `json:"chunk_id"`
			DocumentID string `json:"document_id"`
			Text       string `json:"text"`
			Source     string `json:"source"`
			Start      int    `json:"start"`
			End        int    `json:"end"`
		}
		line, _, _ := strings.Cut(out, "\n")
		if err := json.Unmarshal([]byte(line), &first); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		if first.Rank != 1 || !strings.HasSuffix(first.DocumentID, tc.doc) || first.Source == "" || first.Kind == "" || first.End <= first.Start ||
			!strings.HasPrefix(first.ChunkID, first.DocumentID+"#") {
			t.Errorf("%s %q: first result %+v", tc.mode, tc.query, first)
		}
		if strings.Contains(out, "secret = 1") {
			t.Error("a script's text was ingested")
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"retrieve", "--store", db, "--collection", "nope", "x"}, 1, "not found"},
		{[]string{"retrieve", "--store", db, "--collection", "kb", "--mode", "psychic", "x"}, exitUsage, "mode"},
		{[]string{"retrieve", "--store", db, "--collection", "kb"}, exitUsage, "QUERY"},
		{[]string{"retrieve", "--store", db, "--collection", "kb", "--filter", "novalue", "x"}, exitUsage, "KEY=VALUE"},
		{[]string{"ingest", "--store", db, "--collection", "kb", "--chunk-size", "100", root}, exitUsage, "cannot change"},
		{[]string{"ingest", "--store", db, "--collection", "new", "--chunk-size", "20", "--chunk-overlap", "30", root}, exitUsage, "overlap"},
		{[]string{"ingest", "--store", db, "--collection", "kb"}, exitUsage, "PATH"},
		{[]string{"ingest", "--store", db, "--collection", "ghost", filepath.Join(root, "missing.md")}, 1, "no such file"},
		// The failed ingest above created nothing.
		{[]string{"retrieve", "--store", db, "--collection", "ghost", "x"}, 1, "not found"},
	} {
		_, errOut, code := runLoom(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("loom %q: exit %d %q; want %d with %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
