package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// jsonLines decodes each line of out into a map.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// documentIDs runs loom document list and returns the ids, in order.
func documentIDs(t *testing.T, db, coll string) []string {
	t.Helper()
	out, errOut, code := runLoom(t, "", "document", "list", "--store", db, "--collection", coll)
	if code != 0 {
		t.Fatalf("document list: exit %d %s", code, errOut)
	}
	var ids []string
	for _, d := range jsonLines(t, out) {
		ids = append(ids, d["id"].(string))
	}
	return ids
}

// TestCollectionAndDocumentCommands: list, show and delete collections and documents, and ingest --prune,
// which deletes the documents of files that are gone (a plain re-ingest kept them).
func TestCollectionAndDocumentCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "docs")
	paths := map[string]string{"a.md": "# A\n\nAlpha text.\n", "b.md": "# B\n\nBeta text.\n", "sub/c.txt": "Gamma text.\n"}
	for rel, text := range paths {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := func(rel string) string { return filepath.ToSlash(filepath.Join(root, rel)) }
	db := "sqlite:" + filepath.Join(dir, "loom.db")
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, errOut, code := runLoom(t, "", args...)
		if code != wantCode {
			t.Fatalf("loom %q: exit %d, want %d: %s%s", args, code, wantCode, errOut, out)
		}
		return out + errOut
	}
	run(0, "ingest", "--store", db, "--collection", "kb", root)
	run(0, "ingest", "--store", db, "--collection", "other", filepath.Join(root, "b.md"))

	cs := jsonLines(t, run(0, "collection", "list", "--store", db))
	if len(cs) != 2 || cs[0]["name"] != "kb" || cs[1]["name"] != "other" || cs[0]["chunk_strategy"] == nil {
		t.Errorf("collection list: %v", cs)
	}
	var show struct {
		ID, Name                 string
		Documents, Chunks, Bytes int
	}
	if err := json.Unmarshal([]byte(run(0, "collection", "show", "--store", db, "--collection", "kb")), &show); err != nil {
		t.Fatal(err)
	}
	if show.Name != "kb" || show.ID == "" || show.Documents != 3 || show.Chunks < 3 || show.Bytes == 0 {
		t.Errorf("collection show: %+v", show)
	}
	if ids, want := documentIDs(t, db, "kb"), []string{id("a.md"), id("b.md"), id("sub/c.txt")}; !slices.Equal(ids, want) {
		t.Errorf("document list: %q, want %q", ids, want)
	}

	// A deleted file: a plain re-ingest keeps its document; --prune removes it, and says so.
	if err := os.Remove(filepath.Join(root, "b.md")); err != nil {
		t.Fatal(err)
	}
	run(0, "ingest", "--store", db, "--collection", "kb", root)
	if ids := documentIDs(t, db, "kb"); len(ids) != 3 {
		t.Fatalf("re-ingest without --prune: %q", ids)
	}
	var sum struct {
		Files   int
		Removed []string
	}
	out := run(0, "ingest", "--store", db, "--collection", "kb", root, "--prune", "--json")
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Files != 2 || !slices.Equal(sum.Removed, []string{id("b.md")}) {
		t.Errorf("ingest --prune --json: %q (%v)", out, err)
	}
	if ids, want := documentIDs(t, db, "kb"), []string{id("a.md"), id("sub/c.txt")}; !slices.Equal(ids, want) {
		t.Errorf("after --prune: %q, want %q", ids, want)
	}
	if out := run(0, "ingest", "--store", db, "--collection", "kb", "--prune", root); !strings.Contains(out, "removed 0 documents whose files are gone") {
		t.Errorf("ingest --prune with nothing gone: %q", out)
	}
	if out := run(0, "ingest", "--store", db, "--collection", "kb", "--json", root); strings.Contains(out, "removed") {
		t.Errorf("ingest --json without --prune says removed: %q", out)
	}
	// Another collection's document of the same file is not pruned with kb's.
	if ids := documentIDs(t, db, "other"); !slices.Equal(ids, []string{id("b.md")}) {
		t.Errorf("other: %q", ids)
	}

	run(0, "document", "delete", "--store", db, "--collection", "kb", "--document", id("a.md"))
	if ids := documentIDs(t, db, "kb"); !slices.Equal(ids, []string{id("sub/c.txt")}) {
		t.Errorf("after document delete: %q", ids)
	}
	if out := run(1, "document", "delete", "--store", db, "--collection", "kb", "--document", id("a.md")); !strings.Contains(out, "no document") {
		t.Errorf("deleting a deleted document: %q", out)
	}
	// Fusion weights: set, left alone when not given, put back with "default", refused when bad; loom
	// retrieve takes weights of its own.
	if c := jsonLines(t, run(0, "collection", "weights", "--store", db, "--collection", "kb", "--vector-weight", "0.5"))[0]; c["vector_weight"] != 0.5 || c["keyword_weight"] != nil {
		t.Errorf("weights --vector-weight 0.5: %v", c)
	}
	if c := jsonLines(t, run(0, "collection", "weights", "--store", db, "--collection", "kb", "--keyword-weight", "2"))[0]; c["vector_weight"] != 0.5 || c["keyword_weight"] != float64(2) {
		t.Errorf("weights --keyword-weight 2: %v", c)
	}
	if c := jsonLines(t, run(0, "collection", "weights", "--store", db, "--collection", "kb", "--vector-weight", "default"))[0]; c["vector_weight"] != nil || c["keyword_weight"] != float64(2) {
		t.Errorf("weights --vector-weight default: %v", c)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"collection", "weights", "--store", db, "--collection", "kb", "--keyword-weight", "-1"}, "keyword weight is -1"},
		{[]string{"collection", "weights", "--store", db, "--collection", "kb", "--keyword-weight", "heavy"}, "want a number"},
		{[]string{"collection", "weights", "--store", db, "--collection", "kb", "--keyword-weight", "0", "--vector-weight", "0"}, "both 0"},
		{[]string{"retrieve", "--store", db, "--collection", "kb", "--keyword-weight", "0", "--vector-weight", "0", "text"}, "both 0"},
		{[]string{"retrieve", "--store", db, "--collection", "kb", "--vector-weight", "NaN", "text"}, "vector weight is NaN"},
	} {
		if out := run(2, tt.args...); !strings.Contains(out, tt.want) {
			t.Errorf("loom %q: %q, want %q", tt.args, out, tt.want)
		}
	}
	if hits := jsonLines(t, run(0, "retrieve", "--store", db, "--collection", "kb", "--keyword-weight", "1", "--vector-weight", "0", "gamma text")); len(hits) == 0 || hits[0]["kind"] != "fused" {
		t.Errorf("retrieve with weights: %v", hits)
	}

	run(0, "collection", "delete", "--store", db, "--collection", "kb")
	if out := run(1, "collection", "show", "--store", db, "--collection", "kb"); !strings.Contains(out, "not found") {
		t.Errorf("show of a deleted collection: %q", out)
	}
	if cs := jsonLines(t, run(0, "collection", "list", "--store", db)); len(cs) != 1 || cs[0]["name"] != "other" {
		t.Errorf("collection list after delete: %v", cs)
	}
	for _, tt := range []struct {
		code int
		args []string
		want string
	}{
		{2, []string{"collection", "show", "--store", db}, "--collection is required"},
		{2, []string{"collection", "list", "--store", db, "extra"}, "unexpected arguments"},
		{2, []string{"collection", "rename"}, "unknown verb"},
		{2, []string{"collection"}, "Usage"},
		{2, []string{"document", "delete", "--store", db, "--collection", "other"}, "--document is required"},
		{1, []string{"document", "list", "--store", db, "--collection", "kb"}, "not found"},
		{1, []string{"collection", "delete", "--store", db, "--collection", "kb"}, "not found"},
	} {
		if out := run(tt.code, tt.args...); !strings.Contains(out, tt.want) {
			t.Errorf("loom %q: %q, want %q", tt.args, out, tt.want)
		}
	}
	if out := run(0, "collection", "list", "--store", "memory:"); out != "" {
		t.Errorf("collection list of an empty store: %q", out)
	}
}

// TestIngestPrune_RelativeRoot: ids are the paths as given; pruning a relative root from the same directory
// finds them, however the root is spelled.
func TestIngestPrune_RelativeRoot(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, rel := range []string{"docs/keep.md", "docs/gone.md"} {
		if err := os.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(rel, []byte("# "+rel+"\n\ntext\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, errOut, code := runLoom(t, "", "ingest", "--store", "sqlite:loom.db", "--collection", "kb", "docs"); code != 0 {
		t.Fatal(errOut)
	}
	if err := os.Remove("docs/gone.md"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runLoom(t, "", "ingest", "--store", "sqlite:loom.db", "--collection", "kb", "--prune", "./docs/")
	if code != 0 || !strings.Contains(out, "removed docs/gone.md\n") || !strings.Contains(out, "removed 1 documents") {
		t.Errorf("ingest --prune ./docs/: exit %d %q %s", code, out, errOut)
	}
	if ids := documentIDs(t, "sqlite:loom.db", "kb"); !slices.Equal(ids, []string{"docs/keep.md"}) {
		t.Errorf("left %q", ids)
	}
}
