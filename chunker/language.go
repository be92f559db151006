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

// languageAliases maps the names [Options.Language] accepts, lower-cased, to the code strategy's names.
// "text" is the plain-lines fallback, the same as "".
var languageAliases = map[string]string{
	"go":         "go",
	"golang":     "go",
	"python":     "python",
	"python3":    "python",
	"py":         "python",
	"javascript": "javascript",
	"js":         "javascript",
	"jsx":        "javascript",
	"node":       "javascript",
	"typescript": "typescript",
	"ts":         "typescript",
	"tsx":        "tsx",
	"rust":       "rust",
	"rs":         "rust",
	"java":       "java",
	"text":       "",
}

// normalizeLanguage returns the code strategy's name for a language name or alias ("golang" is "go", "ts" is
// "typescript"), case-insensitively; "" for the plain-lines fallback ("" or "text"); and false when the name
// is not known.
func normalizeLanguage(name string) (string, bool) {
	if name == "" {
		return "", true
	}
	lang, ok := languageAliases[strings.ToLower(strings.TrimSpace(name))]
	return lang, ok
}

// LanguageForFile returns the code strategy's language for a file name by its extension, or "" when the
// extension is not one of a supported language.
func LanguageForFile(name string) string {
	return languageExtensions[strings.ToLower(filepath.Ext(name))]
}
