// Package chunker splits documents into chunks for embedding and retrieval, without losing a byte.
//
// Every strategy keeps these promises, for any input:
//
//  1. text[StartOffset:EndOffset] == Content: byte offsets into the original, untrimmed text.
//  2. TokenCount == the counter's count of Content, and never more than ChunkSize.
//  3. Chunks are in order, Index runs 0..n-1, and every non-whitespace byte lies in some chunk.
//  4. No chunk starts or ends inside a UTF-8 sequence, nor inside a grapheme cluster unless one cluster alone
//     is larger than ChunkSize.
//  5. With an overlap, neighbours share up to ChunkOverlap tokens, never more: exactly ChunkOverlap tokens
//     for the fixed and sliding strategies; close to it for the recursive strategy, whose overlap is the
//     last whole units of a chunk and, where they leave room, the end of the unit before them cut at
//     sentences, then words; whole units (blocks, sentences, declarations) for the others.
//  6. Bad options are an error naming the problem; empty or whitespace-only text gives no chunks.
//  7. Results are deterministic, and text is counted a bounded number of times per byte.
//  8. Memory is linear and small: beside the text and the chunks it returns, a call holds the pieces of
//     about one chunk (and the code strategy one parse window, see [MaxParseBytes]); time is bounded too
//     (see [ParseTimeout]). [Options.MaxChunks] stops a call as soon as a text makes too many chunks.
//
// Use [New] for a strategy by name, or [Default] to pick one per call from [Options.Strategy]. A type of
// your own that implements [Chunker] works wherever a chunker is expected.
package chunker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// Chunker splits text into chunks.
type Chunker interface {
	Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error)
}

// Defaults for zero option values.
const (
	DefaultChunkSize    = 512 // tokens
	DefaultChunkOverlap = 50  // tokens, or a fifth of ChunkSize when that is smaller
	DefaultStrategy     = "recursive"
)

// Strategy names.
const (
	Recursive = "recursive"
	Fixed     = "fixed"
	Sliding   = "sliding"
	Semantic  = "semantic"
	Code      = "code"
	Markdown  = "markdown"
)

// Errors returned by the chunkers.
var (
	ErrNegativeSize     = loom.NewError(loom.ErrInvalid, "chunker: chunk size must not be negative")
	ErrNegativeOverlap  = loom.NewError(loom.ErrInvalid, "chunker: overlap must not be negative")
	ErrOverlapTooLarge  = loom.NewError(loom.ErrInvalid, "chunker: overlap must be smaller than the chunk size")
	ErrUnknownStrategy  = loom.NewError(loom.ErrInvalid, "chunker: unknown strategy")
	ErrUnknownLanguage  = loom.NewError(loom.ErrInvalid, "chunker: unknown language")
	ErrNotApplicable    = loom.NewError(loom.ErrInvalid, "chunker: option does not apply to this strategy")
	ErrStrategyMismatch = loom.NewError(loom.ErrInvalid, "chunker: options name another strategy")
	ErrSizeTooSmall     = loom.NewError(loom.ErrInvalid, "chunker: chunk size is smaller than the tokens of one character")
	ErrNoTokenOffsets   = loom.NewError(loom.ErrInvalid, "chunker: strategy needs a counter that reports token offsets")
	ErrBadPercentile    = loom.NewError(loom.ErrInvalid, "chunker: breakpoint percentile must be in (0, 100]")
	ErrNegativeLimit    = loom.NewError(loom.ErrInvalid, "chunker: MaxChunks must not be negative")
	// ErrTooManyChunks is returned as soon as a text makes more chunks than [Options.MaxChunks], before the
	// rest of the text is chunked. It is not an option error: the text is too large for the limit.
	ErrTooManyChunks = loom.NewError(loom.ErrTooLarge, "chunker: too many chunks")
)

// Options configure a call. Zero values mean the documented defaults. Options that belong to one strategy
// (Language, Embedder, BreakpointPercentile) are an error with any other: nothing is silently ignored.
type Options struct {
	// ChunkSize is the most tokens a chunk may have (a hard cap); 0 means DefaultChunkSize.
	ChunkSize int
	// ChunkOverlap is how many tokens neighbouring chunks share; 0 means DefaultChunkOverlap (or a fifth of
	// ChunkSize when that is smaller). Set NoOverlap for none.
	ChunkOverlap int
	// NoOverlap asks for chunks that share nothing (ChunkOverlap must then be 0).
	NoOverlap bool
	// Strategy names the strategy for [Default]: "recursive" (the default), "fixed", "sliding", "semantic",
	// "code" or "markdown". A strategy's own chunker accepts "" or its own name.
	Strategy string
	// Counter sizes chunks; nil means the exact cl100k_base encoding. The fixed and sliding strategies need
	// one that reports token offsets, such as a [*tokenizer.Encoding].
	Counter tokenizer.Counter

	// Language is the code strategy's language ("go", "python", "javascript", "typescript", "rust", "java",
	// ...), or "" to treat the text as plain lines. See [LanguageForFile].
	Language string
	// Embedder is the semantic strategy's sentence embedder; nil means the offline lexical embedder.
	Embedder Embedder
	// BreakpointPercentile is the semantic strategy's threshold: a break goes where the distance between
	// neighbouring sentences exceeds this percentile of all such distances. 0 means 95.
	BreakpointPercentile float64

	// MaxChunks, when positive, is the most chunks a text may make: every strategy of this package stops as
	// soon as one more chunk would be made and returns an error wrapping [ErrTooManyChunks]. 0 means no
	// limit.
	MaxChunks int
}

// ChunkResult is one chunk of a text.
type ChunkResult struct {
	Content     string            // text[StartOffset:EndOffset], untrimmed
	Index       int               // zero-based position in the document
	StartOffset int               // byte offset of the chunk's start in the original text
	EndOffset   int               // byte offset of the chunk's end in the original text
	TokenCount  int               // the counter's exact count of Content
	Metadata    map[string]string // strategy-specific: headings, language, symbols, lines, ...
}

// config is Options resolved: defaults applied, validated.
type config struct {
	size, overlap int
	maxChunks     int // MaxChunks, or math.MaxInt for no limit
	counter       tokenizer.Counter
	opts          *Options
}

// resolve validates opts for the strategy called name and applies defaults.
func resolve(name string, opts *Options) (config, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.Strategy != "" && opts.Strategy != name {
		return config{}, fmt.Errorf("%w: %q given to the %s chunker", ErrStrategyMismatch, opts.Strategy, name)
	}
	c := config{size: opts.ChunkSize, overlap: opts.ChunkOverlap, counter: opts.Counter, opts: opts}
	switch {
	case c.size < 0:
		return config{}, fmt.Errorf("%w (got %d)", ErrNegativeSize, c.size)
	case c.overlap < 0:
		return config{}, fmt.Errorf("%w (got %d)", ErrNegativeOverlap, c.overlap)
	case opts.MaxChunks < 0:
		return config{}, fmt.Errorf("%w (got %d)", ErrNegativeLimit, opts.MaxChunks)
	case opts.NoOverlap && c.overlap != 0:
		return config{}, fmt.Errorf("%w: NoOverlap with ChunkOverlap %d", ErrOverlapTooLarge, c.overlap)
	}
	if c.size == 0 {
		c.size = DefaultChunkSize
	}
	c.maxChunks = opts.MaxChunks
	if c.maxChunks == 0 {
		c.maxChunks = math.MaxInt
	}
	if c.overlap == 0 && !opts.NoOverlap {
		c.overlap = min(DefaultChunkOverlap, c.size/5)
	}
	if c.overlap >= c.size {
		return config{}, fmt.Errorf("%w (overlap %d, size %d)", ErrOverlapTooLarge, c.overlap, c.size)
	}
	if opts.Language != "" && name != Code {
		return config{}, fmt.Errorf("%w: Language is for the code strategy, not %s", ErrNotApplicable, name)
	}
	if (opts.Embedder != nil || opts.BreakpointPercentile != 0) && name != Semantic {
		return config{}, fmt.Errorf("%w: Embedder and BreakpointPercentile are for the semantic strategy, not %s",
			ErrNotApplicable, name)
	}
	if c.counter == nil {
		c.counter = tokenizer.CL100K()
	}
	return c, nil
}

// registry of strategies by name.
var (
	registryMu sync.RWMutex
	registry   = map[string]Chunker{}
)

// Register makes a chunker available under name to [New] and [Default], replacing any before it.
func Register(name string, c Chunker) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[name] = c
}

// New returns the chunker of the named strategy, or an error wrapping [ErrUnknownStrategy] that lists the
// known ones.
func New(strategy string) (Chunker, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if c, ok := registry[strategy]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownStrategy, strategy, strings.Join(strategiesLocked(), ", "))
}

// Strategies returns the names of the registered strategies, sorted.
func Strategies() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return strategiesLocked()
}

func strategiesLocked() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Default returns a chunker that runs the strategy named by each call's Options.Strategy, recursive when
// it is empty.
func Default() Chunker { return dispatcher{} }

type dispatcher struct{}

func (dispatcher) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	name := DefaultStrategy
	if opts != nil && opts.Strategy != "" {
		name = opts.Strategy
	}
	c, err := New(name)
	if err != nil {
		return nil, err
	}
	return c.Chunk(ctx, text, opts)
}

func init() {
	Register(Recursive, NewRecursive())
	Register(Fixed, NewFixed())
	Register(Sliding, NewSliding())
}

// IsOptionError reports whether err comes from options a strategy cannot use (a bad size or overlap, an
// unknown strategy or language, an option of another strategy) rather than from the text or the context.
func IsOptionError(err error) bool {
	for _, target := range []error{ErrNegativeSize, ErrNegativeOverlap, ErrOverlapTooLarge, ErrUnknownStrategy,
		ErrUnknownLanguage, ErrNotApplicable, ErrStrategyMismatch, ErrSizeTooSmall, ErrNoTokenOffsets, ErrBadPercentile, ErrNegativeLimit} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
