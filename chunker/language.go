package chunker

import (
	"path/filepath"
	"strings"
)

// languageExtensions maps file extensions to the code strategy's language names.
var languageExtensions = map[string]string{
	".go":   "go",
	".py":   "python",
	".pyi":  "python",
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

// LanguageForFile returns the code strategy's language for a file name by its extension, or "" when the
// extension is not one of a supported language.
func LanguageForFile(name string) string {
	return languageExtensions[strings.ToLower(filepath.Ext(name))]
}
