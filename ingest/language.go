package ingest

import (
	"path/filepath"
	"strings"
)

// languageExtensions maps file extensions to the names of languages that the code strategy of package
// chunker takes as its Options.Language.
var languageExtensions = map[string]string{
	".go":   "go",
	".py":   "python",
	".pyi":  "python",
	".pyw":  "python",
	".js":   "javascript",
	".mjs":  "javascript",
	".cjs":  "javascript",
	".jsx":  "javascript",
	".ts":   "typescript",
	".mts":  "typescript",
	".cts":  "typescript",
	".tsx":  "tsx",
	".rs":   "rust",
	".java": "java",
}

// LanguageForFile returns the language of a source file by its name's extension, case-insensitively ("go",
// "python", "javascript", "typescript", "tsx", "rust" or "java", names the chunker's code strategy takes),
// or "" when the extension is none of theirs. A file with a language is code ([TypeCode]).
func LanguageForFile(name string) string {
	return languageExtensions[strings.ToLower(filepath.Ext(name))]
}
