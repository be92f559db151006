package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// WalkOptions configure [Walk]. The zero value reads every file that is not hidden, up to DefaultMaxBytes.
type WalkOptions struct {
	// Limits bound each file; a larger one is skipped with ErrTooLarge.
	Limits
	// Include, when not empty, keeps only the files that match one of its patterns. Exclude leaves out the
	// files and directories that match one of its. A pattern has the syntax of [path.Match]; one without a
	// "/" matches a file's (or directory's) name, one with a "/" its whole path relative to the root, with
	// forward slashes: "*.md", "docs/*.html".
	Include, Exclude []string
	// Skipped, when not nil, is told about every file Walk skips for a reason of the file's own: binary
	// content (ErrBinary), too large (ErrTooLarge), a symbolic link or other file that is not a regular file
	// (ErrNotRegular), or an error reading it or its directory. path is the file's path as opened. With
	// Skipped nil, Walk returns these errors, joined, after visiting everything else. Hidden files and the
	// files the patterns leave out are not reported.
	Skipped func(path string, err error)
}

// Walk reads the files under root in lexical order and calls fn with each as a Document. A root that is a
// file is read as the only one; a root that is a symbolic link is followed.
//
// Under root, names that start with "." (".git", ".env") are hidden and left out, directories with all
// they hold; symbolic links are not followed (a link could lead out of root, or round in a circle), and are
// reported to Skipped with the other files that are not read (see [WalkOptions.Skipped]).
//
// A Document's ID is its path relative to root with forward slashes ("docs/intro.md"; for a root that is
// a file, its name), the same wherever root is; its Source is its path as opened, root joined with the
// relative path, so that it is absolute when root is.
//
// Walk stops at the first error fn returns and returns it as it is. It returns an error for a root it
// cannot read, an invalid pattern (wrapping [path.ErrBadPattern]) or ctx's error when ctx is done.
func Walk(ctx context.Context, root string, opts WalkOptions, fn func(Document) error) error {
	for _, p := range append(append([]string(nil), opts.Include...), opts.Exclude...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("ingest: pattern %q: %w", p, err)
		}
	}
	info, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	w := &walker{opts: opts, fn: fn}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%w: %s", ErrNotRegular, root)
		}
		if err := w.file(root, filepath.Base(root), info); err != nil {
			return err
		}
		return w.result()
	}
	if l, err := os.Lstat(root); err == nil && l.Mode()&fs.ModeSymlink != 0 {
		root += string(filepath.Separator) // so that WalkDir follows the link
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if p == root {
			if err != nil {
				return fmt.Errorf("ingest: %w", err)
			}
			return nil
		}
		rel, relErr := filepath.Rel(root, p)
		if relErr != nil {
			return fmt.Errorf("ingest: %w", relErr)
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(d.Name(), ".") || w.match(opts.Exclude, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if err != nil { // a directory that cannot be read
			w.skip(p, err)
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if len(opts.Include) > 0 && !w.match(opts.Include, rel) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			w.skip(p, fmt.Errorf("%w: symbolic link (not followed)", ErrNotRegular))
			return nil
		}
		if !d.Type().IsRegular() {
			w.skip(p, fmt.Errorf("%w: %s", ErrNotRegular, d.Type()))
			return nil
		}
		info, err := d.Info()
		if err != nil {
			w.skip(p, err)
			return nil
		}
		return w.file(p, rel, info)
	})
	if err != nil {
		return err
	}
	return w.result()
}

type walker struct {
	opts  WalkOptions
	fn    func(Document) error
	skips []error
}

// match reports whether rel (or its last element, for a pattern without a slash) matches a pattern.
func (w *walker) match(patterns []string, rel string) bool {
	for _, p := range patterns {
		name := rel
		if !strings.Contains(p, "/") {
			name = path.Base(rel)
		}
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func (w *walker) skip(p string, err error) {
	if w.opts.Skipped != nil {
		w.opts.Skipped(p, err)
		return
	}
	w.skips = append(w.skips, fmt.Errorf("skipped %s: %w", p, err))
}

func (w *walker) result() error {
	if len(w.skips) == 0 {
		return nil
	}
	return fmt.Errorf("ingest: %d files skipped: %w", len(w.skips), errors.Join(w.skips...))
}

// file reads the file at p and calls fn with it, or reports why it cannot.
func (w *walker) file(p, rel string, info fs.FileInfo) error {
	limit := w.opts.maxBytes()
	if limit >= 0 && info.Size() > limit {
		w.skip(p, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, info.Size(), limit))
		return nil
	}
	raw, err := readFile(p, limit)
	if err != nil {
		w.skip(p, err)
		return nil
	}
	doc, err := w.opts.Limits.Read(rel, raw)
	if err != nil {
		w.skip(p, err)
		return nil
	}
	doc.Source = p
	doc.Metadata["source"] = p
	return w.fn(doc)
}

// readFile reads the file at p, failing with ErrTooLarge if it grew past limit (when limit >= 0).
func readFile(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if limit >= 0 {
		r = io.LimitReader(f, limit+1)
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit >= 0 && int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return raw, nil
}
