// Package loom is the root of Loom, a context-assembly engine for LLM applications. Before every model call,
// Loom gathers the instructions, tool definitions, user memory, retrieved knowledge, conversation history
// and tool outputs, fits them exactly into the model's token budget, and returns provider-ready messages with
// citations and a report of what was left out; as a Go library, an HTTP service and a command-line tool.
//
// The packages: [github.com/context-loom/loom/tokenizer] (exact counts), chunker and embed (documents),
// assembler (fitting a request into the budget), store and its backends (state), engine (assembly from
// stored state) and server (the HTTP API). Collections and retrieval are planned.
package loom

// Version is the version of Loom.
const Version = "0.1.0-dev"
