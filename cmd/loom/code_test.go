package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChunk_CodeIsParsedWhereTheBuildCan: with cgo, loom chunk parses code with tree-sitter; without, it
// chunks it as plain text and every chunk says why.
func TestChunk_CodeIsParsedWhereTheBuildCan(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "util.go")
	src := "package util\n\n// Add adds two numbers.\nfunc Add(a, b int) int { return a + b }\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runLoom(t, "", "chunk", "--strategy", "code", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var rec chunkRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		md := rec.Metadata
		if md["language"] != "go" {
			t.Errorf("language %q, want go from the file's extension", md["language"])
		}
		switch {
		case parsesCode && (md["parse"] != "" || !strings.Contains(md["symbols"], "Add")):
			t.Errorf("a build with cgo: metadata %v, want Add parsed", md)
		case !parsesCode && (md["parse"] != "fallback" || md["parse_reason"] != "unavailable"):
			t.Errorf("a build without cgo: metadata %v, want the plain-text fallback, reason unavailable", md)
		}
	}
	help, _, _ := runLoom(t, "", "help", "chunk")
	if !strings.Contains(help, "In this build, code is "+codeParsed) {
		t.Errorf("loom chunk --help does not say how this build chunks code:\n%s", help)
	}
}
