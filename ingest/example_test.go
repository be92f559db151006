package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/context-loom/loom/ingest"
)

func ExampleRead() {
	page := `<!doctype html>
<html><head><title>Setup guide</title><script>track()</script></head>
<body>
  <h1>Setup</h1>
  <p>Install the <a href="/cli">command</a>, then run:</p>
  <pre>loom serve --addr :8080</pre>
  <h2>Options</h2>
  <ul><li>--addr: where to listen</li><li>--store: sqlite or valkey</li></ul>
</body></html>`
	doc, err := ingest.Read("guide.html", []byte(page))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(doc.ContentType, doc.Metadata["format"], doc.Metadata["title"])
	fmt.Print(doc.Text)
	// Output:
	// html markdown Setup guide
	// # Setup
	//
	// Install the command, then run:
	//
	// ```
	// loom serve --addr :8080
	// ```
	//
	// ## Options
	//
	// - --addr: where to listen
	// - --store: sqlite or valkey
}

func ExampleRead_binary() {
	_, err := ingest.Read("logo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	fmt.Println(errors.Is(err, ingest.ErrBinary))
	// Output: true
}

// ReadAs keeps the content type it is given: a note named like Markdown, given as text, stays text.
func ExampleReadAs() {
	doc, err := ingest.ReadAs("notes.md", ingest.TypeText, []byte("# not a heading\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(doc.ContentType, doc.Metadata["format"])
	// Output: text text
}

func ExampleWalk() {
	root, err := os.MkdirTemp("", "ingest-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	for name, text := range map[string]string{
		"README.md":      "# Loom\n",
		"src/main.go":    "package main\n",
		"docs/logo.png":  "\x89PNG\x00",
		".git/HEAD":      "ref: refs/heads/main\n",
		"docs/index.htm": "<title>Docs</title><p>Welcome</p>",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(text), 0o644)
	}

	opts := ingest.WalkOptions{Skipped: func(path string, err error) {
		rel, _ := filepath.Rel(root, path)
		fmt.Println("skipped", filepath.ToSlash(rel), errors.Is(err, ingest.ErrBinary))
	}}
	err = ingest.Walk(context.Background(), root, opts, func(d ingest.Document) error {
		fmt.Println(d.ID, d.ContentType, d.Metadata["format"], d.Hash[:8])
		return nil
	})
	fmt.Println(err)
	// Output:
	// README.md markdown markdown 28683d03
	// docs/index.htm html markdown 3884f043
	// skipped docs/logo.png true
	// src/main.go code code df1d036c
	// <nil>
}
