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
// A [Meter] counts a text made of parts exactly from the parts' counts, where the counter can vouch that
// they add up (see [Splitter]).
//
// Every type in this package is safe for concurrent use, but for [Meter], which holds the counts of one
// task.
package tokenizer

// Counter counts the tokens of a text. It is Weave's TokenCounter: assembler.TokenCounter is this
// interface. [*Encoding], [Estimator] and [CounterFunc] implement it. Count must be deterministic: the
// same text, the same count.
//
// Count is all a Counter needs. A counter that can do more says so by implementing the upgrades named
// below, as an io.Writer says it can do more by being an io.WriterTo; the chunkers, the assemblers and
// [Meter] look for them and take the fast path where they find one:
//
//   - [UpToCounter]: stop counting a text that cannot fit (CountUpTo).
//   - [Splitter]: vouch that counts add up across a join (SplitsAt), so that a text made of counted parts
//     is not counted again.
//   - [LowerBounder]: a lower bound from a byte scan (LowerBound), so that a text plainly too long is not
//     counted at all.
//   - [Truncater]: the longest prefix within a budget (Truncate).
//   - [TokenEnder]: where each token ends (TokenEnds), which exact token windows need.
//
// [*Encoding] implements all of them. A counter that wraps another (to record or cache counts) keeps the
// fast paths only by implementing the upgrades itself, forwarding them with their contracts: a method that
// breaks its contract makes counts inexact, where a missing one only makes them slower.
type Counter interface {
	Count(text string) int
}

// UpToCounter is implemented by counters that can stop counting once a text is known to exceed a limit.
//
// CountUpTo(text, limit) returns (Count(text), true) when the counter's Count(text) <= limit, and otherwise
// some n > limit with false; a negative limit means no limit. [CountUpTo] gives that answer for any
// counter.
type UpToCounter interface {
	CountUpTo(text string, limit int) (n int, within bool)
}

// Splitter is implemented by counters that can tell where the counts of two parts of a text add up to the
// count of the text.
//
// SplitsAt(text, p) reports true only if the tokens of text are those of text[:p] followed by those of
// text[p:], so that the counter's Count(text) == Count(text[:p]) + Count(text[p:]) (and TokenEnds, if the counter has it,
// is that of the two parts); false means not known. It is true for p == 0 and p == len(text).
//
// For exactness the answer must also be local, for callers ask about a window of a text around a join,
// and about a text that holds the window: it may depend only on the character that ends text[:p] and on
// text[p:] through its first character that is not whitespace (all of text[p:] if it is whitespace), and
// where it is true, it must be true for every text that agrees with text there, and for every such text
// cut short after p within the whitespace. [Meter.Adds] asks it about parts joined this way.
type Splitter interface {
	SplitsAt(text string, p int) bool
}

// LowerBounder is implemented by counters that can bound a count from below more cheaply than by
// counting.
//
// LowerBound(parts, limit) returns a lower bound on the counter's Count of the parts' texts joined (see
// [JoinText]): a number no greater than it, whatever the parts' Tokens say. The limit (negative: none) is
// the question asked, whether the count exceeds limit: LowerBound may stop once its bound exceeds limit,
// and return any lower bound (0) when it cannot cheaply tell that it does.
type LowerBounder interface {
	LowerBound(parts []Part, limit int) int
}

// Truncater is implemented by counters that can cut a text to a budget.
//
// Truncate(text, maxTokens) returns a prefix of text that ends at a character boundary and counts at most
// maxTokens (the counter's Count(prefix) <= maxTokens), the longest it can find: text itself when it fits, "" when
// maxTokens <= 0.
type Truncater interface {
	Truncate(text string, maxTokens int) string
}

// TokenEnder is implemented by counters that can say where each token of a text ends.
//
// TokenEnds(text) returns as many ascending byte offsets as the counter's Count(text) in text, the last one len(text): token i is
// text[ends[i-1]:ends[i]] (from 0 for the first). An offset may fall inside a character, for a character
// of several tokens.
type TokenEnder interface {
	TokenEnds(text string) []int
}

// CountUpTo counts text with c, but stops once the count exceeds limit where c can (an [UpToCounter]):
// within reports whether text has at most limit tokens, and n is then its exact count; otherwise n is a
// count greater than limit. A negative limit means no limit.
func CountUpTo(c Counter, text string, limit int) (n int, within bool) {
	if limit < 0 {
		return c.Count(text), true
	}
	if u, ok := c.(UpToCounter); ok {
		return u.CountUpTo(text, limit)
	}
	n = c.Count(text)
	return n, n <= limit
}

// CounterFunc adapts a function to the [Counter] interface.
type CounterFunc func(text string) int

// Count returns f(text).
func (f CounterFunc) Count(text string) int { return f(text) }

var (
	_ Counter = (*Encoding)(nil)
	_ Counter = CounterFunc(nil)
	_ Counter = Estimator{}

	_ UpToCounter  = (*Encoding)(nil)
	_ Splitter     = (*Encoding)(nil)
	_ LowerBounder = (*Encoding)(nil)
	_ Truncater    = (*Encoding)(nil)
	_ TokenEnder   = (*Encoding)(nil)
)
