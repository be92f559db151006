package chunker

import (
	"context"
	"strconv"
	"strings"
	"unicode"
)

// Metadata of the code strategy's chunks (see package chunker/code), which [CodeTextChunker]'s chunks have
// too.
const (
	// MetaLanguage is the language's name ("go", "python", ...), or "text" for plain text.
	MetaLanguage = "language"
	// MetaSymbols is the comma-separated names of the declarations a chunk holds or is part of.
	MetaSymbols = "symbols"
	// MetaKind is the kind of what a chunk holds ("function", "class", ..., "mixed"), "text" for text.
	MetaKind = "kind"
	// MetaStartLine and MetaEndLine are the 1-based numbers of the first and last lines that hold a
	// chunk's non-space text.
	MetaStartLine = "start_line"
	MetaEndLine   = "end_line"

	// MetaParse is set to ParseFallback on the chunks of code that was chunked as plain text rather than
	// parsed; parsed chunks, and those of text asked for as plain text, do not have it.
	MetaParse = "parse"
	// MetaParseReason says why: FallbackUnavailable, FallbackTimeout or FallbackTooLarge.
	MetaParseReason = "parse_reason"

	// ParseFallback is MetaParse's value.
	ParseFallback = "fallback"
	// FallbackUnavailable: no parser is there. The code strategy of this package ([CodeTextChunker]) has
	// none; the tree-sitter chunker of package chunker/code, which needs cgo, parses.
	FallbackUnavailable = "unavailable"
	// FallbackTimeout: the parse took longer than its bound (see package chunker/code).
	FallbackTimeout = "timeout"
	// FallbackTooLarge: a line is longer than the most one parse reads (see package chunker/code).
	FallbackTooLarge = "too_large"
)

// kindText is MetaKind's value for text.
const kindText = "text"

// CodeTextChunker is the code strategy without a parser: what [New] and [NewRegistry] have for "code". A
// program that wants code parsed registers the tree-sitter chunker of package chunker/code in its
// [Registry] in place of it (that package needs cgo; a build without cgo keeps this one).
//
// It takes the code strategy's options (a Language of [CodeLanguages], an alias, or "" or "text" for plain
// text; another is an error wrapping [ErrUnknownLanguage]) and chunks the text as the tree-sitter chunker
// chunks what it cannot parse: at blank lines, then lines, then words. Its chunks have the code strategy's
// metadata keys ([MetaLanguage], [MetaSymbols], [MetaKind], [MetaStartLine], [MetaEndLine]), with the kind
// "text" and no symbols; and when Language names a language, [MetaParse] is [ParseFallback] and
// [MetaParseReason] is [FallbackUnavailable], so that a caller sees the code was not parsed.
//
// A CodeTextChunker is safe for concurrent use.
type CodeTextChunker struct{}

var _ Chunker = (*CodeTextChunker)(nil)

// NewCodeText returns the code strategy without a parser.
func NewCodeText() *CodeTextChunker { return &CodeTextChunker{} }

// Chunk splits text. It returns an error for invalid options (see [Options]), one wrapping
// [ErrUnknownLanguage] for a Language it does not know, one wrapping [ErrTooManyChunks] past
// [Options.MaxChunks], and ctx's error when ctx is done.
func (*CodeTextChunker) Chunk(ctx context.Context, text string, opts *Options) ([]ChunkResult, error) {
	b, err := NewBuilder(ctx, Code, text, opts)
	if err != nil {
		return nil, err
	}
	lang, err := CodeLanguage(b.b.opts.Language)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	reason := ""
	if lang != "" {
		reason = FallbackUnavailable
	}
	if err := ChunkCodeText(b, lang, reason); err != nil {
		return nil, err
	}
	return b.Result()
}

// codeTextLevels are the levels at which the code strategy splits text it does not parse: blank lines,
// then lines, then words.
var codeTextLevels = []SplitFunc{SplitParagraphs, SplitLines, SplitWords}

// ChunkCodeText chunks the text of b, which has made no chunk yet, as the code strategy chunks text it does
// not parse (see [CodeTextChunker]), and sets the chunks' metadata: language (or "text" for ""), no
// symbols, the kind "text", their lines, and, when reason is not "", [MetaParse] [ParseFallback] with
// [MetaParseReason] reason. It returns [Builder.Split]'s error.
func ChunkCodeText(b *Builder, language, reason string) error {
	if err := b.Split(0, len(b.b.text), codeTextLevels...); err != nil {
		return err
	}
	if language == "" {
		language = kindText
	}
	for i := range b.b.chunks {
		ch := &b.b.chunks[i]
		first, last := spanOfText(ch)
		ch.Metadata = map[string]string{
			MetaLanguage:  language,
			MetaSymbols:   "",
			MetaKind:      kindText,
			MetaStartLine: strconv.Itoa(b.Line(first)),
			MetaEndLine:   strconv.Itoa(b.Line(last)),
		}
		if reason != "" {
			ch.Metadata[MetaParse], ch.Metadata[MetaParseReason] = ParseFallback, reason
		}
	}
	return nil
}

// spanOfText returns the offsets of the first and last bytes of ch that are not white space (every chunk
// has some).
func spanOfText(ch *ChunkResult) (first, last int) {
	notSpace := func(r rune) bool { return !unicode.IsSpace(r) }
	return ch.StartOffset + strings.IndexFunc(ch.Content, notSpace), ch.StartOffset + strings.LastIndexFunc(ch.Content, notSpace)
}
