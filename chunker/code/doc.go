// Package code is the code strategy of package chunker: it chunks source code along its syntax, parsed with
// tree-sitter. Tree-sitter is C, so this package needs cgo; package chunker does not, and its own "code"
// strategy ([github.com/context-loom/loom/chunker.CodeTextChunker]) chunks code as plain text. A program that wants code parsed registers
// this package's chunker where it chunks by name:
//
//	reg := chunker.NewRegistry()
//	reg.Register(chunker.Code, code.New())
//
// Every file of this package but this one is built only with cgo: with CGO_ENABLED=0 the package is empty,
// and a program that uses it does not build, rather than chunk code in a way it did not ask for. A
// program that should build either way registers it in a file of its own with the constraint
// "//go:build cgo", as the loom command does; without cgo, its "code" strategy stays the plain-text one,
// whose chunks say "parse": "fallback", "parse_reason": "unavailable".
package code
