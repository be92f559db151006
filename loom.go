// Package loom is the root of Loom, a context-assembly engine for LLM applications. Before every model call,
// Loom is to gather the instructions, tool definitions, user memory, retrieved knowledge, conversation history
// and tool outputs, fit them exactly into the model's token budget, and return provider-ready messages with
// citations and a report of what was left out; as a Go library, an HTTP service and a command-line tool.
// Today the exact token counter exists (package [github.com/context-loom/loom/tokenizer] and the
// `loom tokens` command); the rest of the system is planned.
package loom

// Version is the version of Loom.
const Version = "0.1.0-dev"
