package ingest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tree makes files under a temporary directory: name -> content, "->target" for a symbolic link.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type skip struct {
	path string
	err  error
}

func walkAll(t *testing.T, root string, opts WalkOptions) ([]Document, []skip, error) {
	t.Helper()
	var docs []Document
	var skips []skip
	if opts.Skipped == nil {
		opts.Skipped = func(p string, err error) { skips = append(skips, skip{p, err}) }
	}
	err := Walk(context.Background(), root, opts, func(d Document) error {
		docs = append(docs, d)
		return nil
	})
	return docs, skips, err
}

func ids(docs []Document) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.ID)
	}
	return out
}

var walkFiles = map[string]string{
	"b.md":             "# B\n",
	"a.txt":            "a",
	"Z.txt":            "upper case sorts first",
	"sub/c.go":         "package c\n",
	"sub/page.html":    "<title>P</title><p>page</p>",
	"sub/deeper/d.txt": "d",
	"sub.txt":          "after the sub directory",
	".git/config":      "[core]",
	".hidden.txt":      "hidden",
	"sub/.env":         "SECRET=1",
	"bin.dat":          "\x89PNG\r\n\x1a\n\x00\x00",
	"big.txt":          strings.Repeat("x", 200),
	"link.txt":         "->a.txt",
	"linkdir":          "->sub",
	"outside":          "->/etc/passwd",
}

func TestWalk_LexicalOrderAndRelativeIDs(t *testing.T) {
	t.Parallel()
	root := tree(t, walkFiles)
	docs, _, err := walkAll(t, root, WalkOptions{Limits: Limits{MaxBytes: 100}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Z.txt", "a.txt", "b.md", "sub/c.go", "sub/deeper/d.txt", "sub/page.html", "sub.txt"}
	if got := ids(docs); !slices.Equal(got, want) {
		t.Fatalf("IDs = %q, want %q", got, want)
	}
	for _, d := range docs {
		wantSource := filepath.Join(root, filepath.FromSlash(d.ID))
		if d.Source != wantSource || d.Metadata["source"] != wantSource {
			t.Errorf("%s: Source %q, source %q, want %q", d.ID, d.Source, d.Metadata["source"], wantSource)
		}
		raw, err := os.ReadFile(d.Source)
		if err != nil {
			t.Fatal(err)
		}
		same, err := Read(d.ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		if d.Hash != same.Hash || d.Text != same.Text || d.ContentType != same.ContentType {
			t.Errorf("%s: Walk and Read disagree", d.ID)
		}
	}
	if docs[5].ContentType != TypeHTML || docs[5].Metadata["title"] != "P" || docs[3].Metadata["language"] != "go" {
		t.Errorf("types not detected: %+v", docs)
	}
}

func TestWalk_ReportsWhatItSkips(t *testing.T) {
	t.Parallel()
	root := tree(t, walkFiles)
	_, skips, err := walkAll(t, root, WalkOptions{Limits: Limits{MaxBytes: 100}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]error{"big.txt": ErrTooLarge, "bin.dat": ErrBinary, "link.txt": ErrNotRegular,
		"linkdir": ErrNotRegular, "outside": ErrNotRegular}
	var got []string
	for _, s := range skips {
		rel, _ := filepath.Rel(root, s.path)
		got = append(got, rel)
		if !errors.Is(s.err, want[rel]) {
			t.Errorf("%s skipped with %v, want %v", rel, s.err, want[rel])
		}
	}
	if wantPaths := []string{"big.txt", "bin.dat", "link.txt", "linkdir", "outside"}; !slices.Equal(got, wantPaths) {
		t.Errorf("skipped %q, want %q (hidden files are not reported)", got, wantPaths)
	}
}

func TestWalk_WithoutSkippedReturnsTheSkipsAfterTheRest(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{"a.bin": "\x00", "b.txt": "b"})
	var seen []string
	err := Walk(context.Background(), root, WalkOptions{}, func(d Document) error {
		seen = append(seen, d.ID)
		return nil
	})
	if !errors.Is(err, ErrBinary) || !strings.Contains(err.Error(), "a.bin") {
		t.Errorf("err = %v, want one wrapping ErrBinary naming a.bin", err)
	}
	if !slices.Equal(seen, []string{"b.txt"}) {
		t.Errorf("visited %q", seen)
	}
}

func TestWalk_IncludeAndExclude(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{
		"a.md": "a", "b.txt": "b", "docs/c.md": "c", "docs/d.html": "d", "docs/drafts/e.md": "e", "vendor/f.md": "f",
	})
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"all", nil, nil, []string{"a.md", "b.txt", "docs/c.md", "docs/d.html", "docs/drafts/e.md", "vendor/f.md"}},
		{"by name", []string{"*.md"}, nil, []string{"a.md", "docs/c.md", "docs/drafts/e.md", "vendor/f.md"}},
		{"by path", []string{"docs/*"}, nil, []string{"docs/c.md", "docs/d.html"}},
		{"exclude a directory", []string{"*.md"}, []string{"vendor", "drafts"}, []string{"a.md", "docs/c.md"}},
		{"exclude by path", nil, []string{"docs/*.html", "b.*"}, []string{"a.md", "docs/c.md", "docs/drafts/e.md", "vendor/f.md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			docs, skips, err := walkAll(t, root, WalkOptions{Include: tt.include, Exclude: tt.exclude})
			if err != nil || len(skips) > 0 {
				t.Fatal(err, skips)
			}
			if got := ids(docs); !slices.Equal(got, tt.want) {
				t.Errorf("IDs = %q, want %q", got, tt.want)
			}
		})
	}
	err := Walk(context.Background(), root, WalkOptions{Exclude: []string{"[a-"}}, func(Document) error { return nil })
	if !errors.Is(err, path.ErrBadPattern) {
		t.Errorf("bad pattern: err = %v", err)
	}
}

func TestWalk_StopsAtTheFirstErrorOfFn(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"})
	stop := errors.New("stop")
	var seen []string
	err := Walk(context.Background(), root, WalkOptions{}, func(d Document) error {
		seen = append(seen, d.ID)
		if d.ID == "b.txt" {
			return stop
		}
		return nil
	})
	if err != stop || !slices.Equal(seen, []string{"a.txt", "b.txt"}) {
		t.Errorf("err %v, seen %q", err, seen)
	}
}

func TestWalk_HonoursCancellation(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{"a.txt": "a", "b.txt": "b"})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := Walk(ctx, root, WalkOptions{}, func(Document) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("err %v after %d documents", err, n)
	}
}

func TestWalk_RootIsAFileOrALink(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{"dir/a.md": "# A", "dir/.b.txt": "b", "link": "->dir", "file": "->dir/a.md"})
	docs, _, err := walkAll(t, filepath.Join(root, "dir", "a.md"), WalkOptions{})
	if err != nil || len(docs) != 1 || docs[0].ID != "a.md" || docs[0].ContentType != TypeMarkdown {
		t.Errorf("file root: %v %+v", err, docs)
	}
	// A root named explicitly is read even when hidden, or a link.
	docs, _, err = walkAll(t, filepath.Join(root, "dir", ".b.txt"), WalkOptions{})
	if err != nil || len(docs) != 1 || docs[0].ID != ".b.txt" {
		t.Errorf("hidden file root: %v %+v", err, docs)
	}
	docs, _, err = walkAll(t, filepath.Join(root, "link"), WalkOptions{})
	if err != nil || !slices.Equal(ids(docs), []string{"a.md"}) {
		t.Errorf("linked directory root: %v %q", err, ids(docs))
	}
	docs, _, err = walkAll(t, filepath.Join(root, "file"), WalkOptions{})
	if err != nil || !slices.Equal(ids(docs), []string{"file"}) {
		t.Errorf("linked file root: %v %q", err, ids(docs))
	}
	if _, _, err := walkAll(t, filepath.Join(root, "missing"), WalkOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: err = %v", err)
	}
}

func TestWalk_SameBytesSameHash(t *testing.T) {
	t.Parallel()
	root := tree(t, map[string]string{"one/x.md": "# Same\n", "two/y.md": "# Same\n", "three/z.md": "# Other\n"})
	docs, _, err := walkAll(t, root, WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[string]string{}
	for _, d := range docs {
		hashes[d.ID] = d.Hash
	}
	if hashes["one/x.md"] != hashes["two/y.md"] || hashes["one/x.md"] == hashes["three/z.md"] {
		t.Errorf("hashes %v", hashes)
	}
	again, _, _ := walkAll(t, root, WalkOptions{})
	for i := range docs {
		if docs[i].Hash != again[i].Hash || docs[i].Text != again[i].Text {
			t.Errorf("%s changed between walks", docs[i].ID)
		}
	}
}
