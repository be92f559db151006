module github.com/context-loom/loom

go 1.26

require (
	github.com/rivo/uniseg v0.4.7
	github.com/smacker/go-tree-sitter v0.0.0-20240827094217-dd81d9e9be82
)
