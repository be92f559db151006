module github.com/context-loom/loom

go 1.26
