package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PruneDocuments deletes from the collection (by id or name) the documents that IngestPaths made from
// files under roots whose files no longer exist, and returns their ids in the collection's order. A
// document is IngestPaths's when its ID is its Source's clean path with forward slashes, and it is under
// a root when its Source is the root or lies inside it (a relative root matches the relative paths it
// made, as IngestPaths stored them). A file that exists keeps its document, even if IngestPaths left it
// out (a pattern, a hidden name, content that is not text); so does every document put by other means
// (Ingest, IngestText) under another id. Run it after IngestPaths with the same roots, from the same
// directory, to make the collection mirror the files.
func (e *Engine) PruneDocuments(ctx context.Context, collectionID string, roots []string) ([]string, error) {
	docs, err := e.Documents(ctx, collectionID)
	if err != nil {
		return nil, err
	}
	var pruned []string
	for _, d := range docs {
		if err := ctx.Err(); err != nil {
			return pruned, err
		}
		if d.Source == "" || d.ID != filepath.ToSlash(filepath.Clean(d.Source)) || !underAny(d.Source, roots) {
			continue
		}
		if _, err := os.Lstat(d.Source); !errors.Is(err, fs.ErrNotExist) {
			continue // there (or unreadable, which is not proof it is gone)
		}
		if err := e.DeleteDocument(ctx, collectionID, d.ID); err != nil {
			return pruned, err
		}
		pruned = append(pruned, d.ID)
	}
	return pruned, nil
}

// underAny reports whether path is one of roots or inside one.
func underAny(path string, roots []string) bool {
	path = filepath.Clean(path)
	for _, root := range roots {
		rel, err := filepath.Rel(filepath.Clean(root), path)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}
