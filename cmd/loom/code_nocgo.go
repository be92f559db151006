//go:build !cgo

package main

import "github.com/context-loom/loom/chunker"

// codeParsed says how this build chunks code, for loom chunk's help.
const codeParsed = "chunked as plain text: this build has no tree-sitter (it was built without cgo), so its chunks say \"parse\": \"fallback\", \"parse_reason\": \"unavailable\""

// registerCode leaves r's plain-text code strategy: tree-sitter needs cgo.
func registerCode(*chunker.Registry) {}
