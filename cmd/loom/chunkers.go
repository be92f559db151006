package main

import (
	"github.com/context-loom/loom/chunker"
)

// newChunkers returns the command's registry of chunkers, which loom chunk and the engines of loom ingest,
// retrieve and serve resolve strategies with: the built-in strategies, and in place of the plain-text code
// strategy the tree-sitter one where the build has cgo (code_cgo.go).
func newChunkers() *chunker.Registry {
	r := chunker.NewRegistry()
	registerCode(r)
	return r
}
