module github.com/context-loom/loom

go 1.26

require github.com/rivo/uniseg v0.4.7
