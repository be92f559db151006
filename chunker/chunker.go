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
//     about one chunk (and the tree-sitter code strategy one parse window, bounded in time too: see package
//     chunker/code). [Options.MaxChunks] stops a call as soon as a text makes too many chunks.
//
// Use [New] for a built-in strategy by name, or [Default] to pick one per call from [Options.Strategy]; a
// [Registry] holds a program's strategies, its own beside the built-in ones. A type of your own that
// implements [Chunker] works wherever a chunker is expected, and [Builder] lends it this package's
// machinery.
//
// The code strategy parses source code with tree-sitter, which needs cgo, so it lives in package
// chunker/code, and a program registers it where it wants it. Without it, the "code" strategy of this
// package is [CodeTextChunker]: the code is chunked as plain text, and each chunk says so
// ([MetaParse] "fallback", [MetaParseReason] "unavailable"). This package builds with CGO_ENABLED=0.
package chunker

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	ErrNoChunker        = loom.NewError(loom.ErrInvalid, "chunker: a strategy needs a name and a chunker")
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
	// one that reports token offsets (a [tokenizer.TokenEnder]), such as a [*tokenizer.Encoding]. Every
	// strategy counts faster with a [tokenizer.UpToCounter] and a [tokenizer.Splitter].
	Counter tokenizer.Counter

	// Language is the code strategy's language ("go", "python", "javascript", "typescript", "rust", "java",
	// ...; see [CodeLanguages] and [CodeLanguage]), or "" to treat the text as plain lines. Package ingest's
	// LanguageForFile tells it from a file name.
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

// A Registry resolves strategy names to chunkers: the one place a program keeps its strategies, the
// built-in ones and its own. [NewRegistry] has the built-in strategies; a program registers others, or its
// own chunker under a built-in name (the tree-sitter chunker of package chunker/code under [Code], say), and
// hands the registry to what chunks by name (engine.WithChunkers). A Registry is also a [Chunker] that runs
// the strategy each call's [Options.Strategy] names, recursive when it is empty.
//
// The zero value is an empty registry. A Registry is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Chunker
}

var _ Chunker = (*Registry)(nil)

// NewRegistry returns a registry of the built-in strategies: recursive, fixed, sliding, semantic, markdown,
// and code, which is [CodeTextChunker] (code chunked as plain text, and its chunks saying so) until a
// parsing chunker is registered in its place.
func NewRegistry() *Registry {
	return &Registry{m: map[string]Chunker{
		Recursive: NewRecursive(),
		Fixed:     NewFixed(),
		Sliding:   NewSliding(),
		Semantic:  NewSemantic(),
		Markdown:  NewMarkdown(),
		Code:      NewCodeText(),
	}}
}

// Register makes c the chunker of the strategy called name, replacing any before it. It returns an error
// wrapping [ErrNoChunker] for an empty name or a nil chunker.
func (r *Registry) Register(name string, c Chunker) error {
	if name == "" || c == nil {
		return fmt.Errorf("%w (name %q)", ErrNoChunker, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]Chunker{}
	}
	r.m[name] = c
	return nil
}

// Lookup returns the chunker of the named strategy, or an error wrapping [ErrUnknownStrategy] that lists the
// known ones.
func (r *Registry) Lookup(strategy string) (Chunker, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if c, ok := r.m[strategy]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownStrategy, strategy, strings.Join(r.strategiesLocked(), ", "))
}

// Strategies returns the names of the registered strategies, sorted.
func (r *Registry) Strategies() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.strategiesLocked()
}

func (r *Registry) strategiesLocked() []string {
	return slices.Sorted(maps.Keys(r.m))
}

// Chunk runs the strategy named by opts.Strategy (recursive when it is empty) on text. It returns
// [Registry.Lookup]'s error for an unknown strategy, and the chunker's errors.
func (r *Registry) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	name := DefaultStrategy
	if opts != nil && opts.Strategy != "" {
		name = opts.Strategy
	}
	c, err := r.Lookup(name)
	if err != nil {
		return nil, err
	}
	return c.Chunk(ctx, text, opts)
}

// builtins are the built-in strategies of New, Strategies and Default; nothing registers in it.
var builtins = NewRegistry()

// New returns the chunker of the named built-in strategy (see [NewRegistry]), or an error wrapping
// [ErrUnknownStrategy] that lists them. Its code strategy is [CodeTextChunker]; for parsed code, use
// package chunker/code.
func New(strategy string) (Chunker, error) { return builtins.Lookup(strategy) }

// Strategies returns the names of the built-in strategies, sorted.
func Strategies() []string { return builtins.Strategies() }

// Default returns a chunker that runs the built-in strategy named by each call's Options.Strategy,
// recursive when it is empty.
func Default() Chunker { return dispatcher{} }

// dispatcher is Default: builtins, which no caller may register in.
type dispatcher struct{}

func (dispatcher) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	return builtins.Chunk(ctx, text, opts)
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
