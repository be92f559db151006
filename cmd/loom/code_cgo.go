//go:build cgo

package main

import (
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/chunker/code"
)

// codeParsed says how this build chunks code, for loom chunk's help.
const codeParsed = "parsed with tree-sitter"

// registerCode registers the tree-sitter code chunker, which needs cgo, in r.
func registerCode(r *chunker.Registry) {
	if err := r.Register(chunker.Code, code.New()); err != nil {
		panic(err) // a name and a chunker are given: Register cannot fail
	}
}
