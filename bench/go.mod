module github.com/context-loom/loom/bench

go 1.26

require (
	github.com/context-loom/loom v0.0.0
	github.com/tiktoken-go/tokenizer v0.10.0
)

require github.com/dlclark/regexp2/v2 v2.5.1 // indirect

replace github.com/context-loom/loom => ../
