package chunker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

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

// codeLanguages are the code strategy's language names, sorted.
var codeLanguages = func() []string {
	var names []string
	for _, name := range slices.Sorted(maps.Values(languageAliases)) {
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}()

// CodeLanguages returns the names of the code strategy's languages, sorted: those the tree-sitter chunker of
// package chunker/code parses. [Options.Language] also takes common aliases ("golang", "py", "js", "ts",
// "rs").
func CodeLanguages() []string { return slices.Clone(codeLanguages) }

// CodeLanguage returns the code strategy's name for a language name or alias ("golang" is "go", "ts" is
// "typescript"), case-insensitively, and "" for plain text ("" or "text"). It returns an error wrapping
// [ErrUnknownLanguage], listing the known names, for any other.
func CodeLanguage(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	if lang, ok := languageAliases[strings.ToLower(strings.TrimSpace(name))]; ok {
		return lang, nil
	}
	return "", fmt.Errorf("%w %q (known: %s)", ErrUnknownLanguage, name, strings.Join(codeLanguages, ", "))
}
