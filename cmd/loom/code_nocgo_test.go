//go:build !cgo

package main

// parsesCode says the build's code strategy parses (tree-sitter, with cgo).
const parsesCode = false
