package ingest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestHTML_Golden extracts realistic pages and compares the Markdown with testdata/*.golden.md.
func TestHTML_Golden(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("testdata/*.html")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in testdata: %v", err)
	}
	for _, page := range pages {
		t.Run(filepath.Base(page), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := Read(filepath.Base(page), raw)
			if err != nil {
				t.Fatal(err)
			}
			golden := page[:len(page)-len(".html")] + ".golden.md"
			if *update {
				if err := os.WriteFile(golden, []byte(doc.Text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if doc.Text != string(want) {
				t.Errorf("%s: extracted text differs from %s (run with -update after checking):\n%s", page, golden, doc.Text)
			}
		})
	}
}
