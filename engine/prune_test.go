package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/ingest"
)

// TestPruneDocuments_RemovesOnlyGoneFilesUnderTheRoots: after files are deleted, pruning with the roots
// that were ingested deletes their documents and nothing else: not the documents of files that are still
// there (ingested or left out by a pattern), of another root, or put under an id of their own.
func TestPruneDocuments_RemovesOnlyGoneFilesUnderTheRoots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	write := func(rel, text string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	docs, other := filepath.Join(dir, "docs"), filepath.Join(dir, "docs-other")
	keep := write("docs/keep.md", "# Keep\n\nStill here.\n")
	gone := write("docs/sub/gone.md", "# Gone\n\nDeleted after ingest.\n")
	excluded := write("docs/notes.txt", "Left out by a pattern next time.\n")
	otherGone := write("docs-other/gone.md", "# Other\n\nAnother root's file.\n")
	single := write("single.md", "# Single\n\nA root that is a file.\n")
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	coll, err := eng.CreateCollection(ctx, loom.Collection{Name: "kb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.IngestPaths(ctx, coll.ID, []string{docs, other, single}, engine.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	// A document put under an id of its own, with a source under the root that does not exist.
	if _, err := eng.IngestText(ctx, coll.ID, "custom", filepath.Join(docs, "never.md"), "", "# Never\n\nNot a file.\n", nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{gone, otherGone, single} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	// Ingest again with a pattern that leaves notes.txt out, then prune the docs root and the gone file.
	if _, err := eng.IngestPaths(ctx, coll.ID, []string{docs}, engine.IngestOptions{Walk: ingest.WalkOptions{Exclude: []string{"*.txt"}}}); err != nil {
		t.Fatal(err)
	}
	pruned, err := eng.PruneDocuments(ctx, "kb", []string{docs, single})
	if err != nil {
		t.Fatal(err)
	}
	id := func(p string) string { return filepath.ToSlash(filepath.Clean(p)) }
	if want := []string{id(gone), id(single)}; !slices.Equal(pruned, want) {
		t.Errorf("pruned %q, want %q", pruned, want)
	}
	left, err := eng.Documents(ctx, "kb")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range left {
		ids = append(ids, d.ID)
	}
	if want := []string{"custom", id(otherGone), id(keep), id(excluded)}; !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want))) {
		t.Errorf("left %q, want %q", ids, want)
	}
	// The pruned chunks are out of the search index too.
	res, err := eng.Retrieve(ctx, "Deleted after ingest", engine.WithCollection("kb"), engine.WithTopK(10))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Chunk.DocumentID == id(gone) {
			t.Errorf("a pruned document is still retrieved: %+v", r.Chunk)
		}
	}
	// Pruning again removes nothing.
	if again, err := eng.PruneDocuments(ctx, "kb", []string{docs}); err != nil || len(again) != 0 {
		t.Errorf("second prune: %q, %v", again, err)
	}
}
