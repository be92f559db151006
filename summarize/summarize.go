// Package summarize writes summaries of conversation turns with a model: the [Summarizer] interface that
// compaction uses, and [OpenAI], a client for the Chat Completions API as OpenAI, Ollama (at /v1), vLLM,
// LM Studio and other compatible servers speak it, with timeouts, retries and checks of what the model
// answers.
//
// The package sends what it is given: the request (the instructions, the previous summary and the turns to
// add to it) is assembled by the caller, within the model's window (engine's compaction does so).
package summarize

import (
	"context"

	"github.com/context-loom/loom"
)

// Summarizer writes a summary from a request. Summarize returns the summary's text, which is never blank,
// or an error; it stops as soon as ctx is done. Implementations must be safe for concurrent use.
type Summarizer interface {
	Summarize(ctx context.Context, req Request) (string, error)
}

// Request is what a summarizer is asked: the instructions (the system message), the text to summarize (the
// user message: the previous summary and the new turns, as the caller lays them out), and the most tokens
// the answer may have.
type Request struct {
	Instructions string
	Text         string
	// MaxOutputTokens bounds the summary's length in the model's tokens; 0 leaves it to the model.
	MaxOutputTokens int
}

// Func adapts a function to a [Summarizer].
type Func func(ctx context.Context, req Request) (string, error)

// Summarize calls f.
func (f Func) Summarize(ctx context.Context, req Request) (string, error) { return f(ctx, req) }

var (
	_ Summarizer = Func(nil)
	_ Summarizer = (*OpenAI)(nil)
)

// Errors of the package.
var (
	// ErrInvalidConfig is returned by [NewOpenAI] for a configuration it cannot use.
	ErrInvalidConfig = loom.NewError(loom.ErrInvalid, "summarize: invalid configuration")
	// ErrResponse is returned for an answer that is no usable summary: a body that is not a Chat
	// Completions response, or larger than the limit; a summary that is empty or only white space, not
	// a string, not valid UTF-8 or holding control characters other than tab and line breaks, cut at
	// the output limit, or longer than MaxSummaryBytes.
	ErrResponse = loom.NewError(loom.ErrUnavailable, "summarize: unusable answer")
	// ErrUnavailable is returned, wrapping the cause, when the server cannot be reached or does not
	// answer in time.
	ErrUnavailable = loom.NewError(loom.ErrUnavailable, "summarize: the summarizer is unavailable")
)
