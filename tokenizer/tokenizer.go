// Package tokenizer counts, encodes and truncates text in the token units of language models, exactly.
//
// The byte-pair encoders for OpenAI's cl100k_base and o200k_base produce the same token ids as OpenAI's
// tiktoken for every valid UTF-8 input: the vocabularies are embedded in the binary (compressed, decoded on
// first use), the pre-tokenizer is a hand-written equivalent of tiktoken's regular expressions over Unicode
// 16.0 character classes, and the merge loop is tiktoken's, in linear-logarithmic time on long runs. Nothing
// is downloaded and no file is read at run time.
//
// Invalid UTF-8 is never an error: each maximal ill-formed subsequence (the Unicode "maximal subpart"
// practice, as Python's bytes.decode(errors="replace") applies it) is encoded as U+FFFD, which is what
// tiktoken sees when text is decoded that way before encoding.
//
// For models whose tokenizer is not public, [Estimate] gives an approximate count; [ForModel] says which
// models are counted exactly.
//
// Every type in this package is safe for concurrent use.
package tokenizer

// Counter counts the tokens of a text. It is Weave's TokenCounter: assembler.TokenCounter is this
// interface. [*Encoding], [Estimator] and [CounterFunc] implement it.
type Counter interface {
	Count(text string) int
}

// CounterFunc adapts a function to the [Counter] interface.
type CounterFunc func(text string) int

// Count returns f(text).
func (f CounterFunc) Count(text string) int { return f(text) }

var (
	_ Counter = (*Encoding)(nil)
	_ Counter = CounterFunc(nil)
	_ Counter = Estimator{}
)
