package ingest

import "testing"

func TestLanguageForFile(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"main.go": "go", "x/y/z.GO": "go", "a.py": "python", "stubs.pyi": "python", "gui.pyw": "python",
		"app.js": "javascript", "mod.mjs": "javascript", "cfg.cjs": "javascript", "view.jsx": "javascript",
		"a.ts": "typescript", "a.mts": "typescript", "a.cts": "typescript", "App.tsx": "tsx",
		"lib.rs": "rust", "Main.java": "java", "README.md": "", "Makefile": "", "code.go.txt": "", "": "",
		"archive.tar.gz": "", ".go": "go",
	} {
		if got := LanguageForFile(name); got != want {
			t.Errorf("LanguageForFile(%q) = %q, want %q", name, got, want)
		}
	}
}
