package assembler

// Weave's chunk assembler (its Context Assembler): retrieved chunks in, one context string
// out, best score first, within a token budget, with citations. Its API is Weave's, name for name; what
// differs is the promise behind TotalTokens, which here is the exact count of the returned Context, separators
// and template text included, and never above the budget.

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/template"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/tokenizer"
)

// Defaults of the chunk assembler.
const (
	// DefaultMaxTokens is the token budget of an Assembler made without [WithMaxTokens].
	DefaultMaxTokens = 4096
	// DefaultSeparator is what the default format puts between two chunks (and what [AssembleSimple] puts
	// between all of them). It is counted against the budget like the chunks themselves.
	DefaultSeparator = "\n\n---\n\n"
)

// Errors of the chunk assembler, returned by [Assembler.Assemble] (and [Assembler.Err]) for an Assembler
// made with invalid options, and by [ParseTemplate].
var (
	// ErrInvalidMaxTokens: [WithMaxTokens] was given a budget of 0 or less.
	ErrInvalidMaxTokens = loom.NewError(loom.ErrInvalid, "assembler: max tokens must be positive")
	// ErrNilCounter: [WithTokenCounter] was given a nil counter (an untyped nil, or a nil pointer, func or
	// map in the interface).
	ErrNilCounter = loom.NewError(loom.ErrInvalid, "assembler: token counter is nil")
	// ErrTemplate: a template is nil, zero, failed to parse, or failed to execute for a chunk. The error
	// wraps text/template's error too, so errors.As finds a *template.ExecError.
	ErrTemplate = loom.NewError(loom.ErrInvalid, "assembler: invalid template")
)

// TokenCounter counts the tokens of a text: it is [tokenizer.Counter], under Weave's name.
// [*tokenizer.Encoding] (exact), [tokenizer.Estimator], [tokenizer.CounterFunc] and [SimpleTokenCounter]
// implement it.
type TokenCounter = tokenizer.Counter

// SimpleTokenCounter is Weave's default counter, kept for compatibility with code written for it. Its
// Count is [tokenizer.Estimate]: APPROXIMATE, never 0 for non-empty text, and meant to err high. (Weave's
// counter divided the length in bytes by four, which says "Hi!" is 0 tokens.)
//
// It is not the default. An Assembler counts with the exact cl100k_base encoding unless told otherwise,
// because a budget is a promise: a context said to fit must fit the model. Length divided by four
// undercounts Chinese, Japanese and Korean text (by about 40% in bytes, nearly four-fold in characters,
// against cl100k_base), emoji three-fold and short texts to nothing, so a context "within budget" can
// overflow the model's window. Even a careful estimate is only close to the encoding it was calibrated on:
// tokenizer.Estimate follows o200k_base, and falls short of cl100k_base's counts of CJK and Cyrillic text.
// Use SimpleTokenCounter (or [tokenizer.Estimator]) only for models whose tokenizer is not public; with it,
// TotalTokens is still exactly SimpleTokenCounter's count of the Context, but that count is an estimate.
type SimpleTokenCounter struct{}

// Count returns tokenizer.Estimate(text), an approximate count.
func (SimpleTokenCounter) Count(text string) int { return tokenizer.Estimate(text) }

var _ TokenCounter = SimpleTokenCounter{}

// Assembler builds a context string from retrieved chunks within a token budget. Make one with [New]; the
// zero value (and a nil *Assembler) behaves as New() with no options. An Assembler is immutable and safe for
// concurrent use.
type Assembler struct {
	maxTokens int          // 0: DefaultMaxTokens
	tmpl      *Template    // nil: contents joined with DefaultSeparator
	counter   TokenCounter // nil: tokenizer.CL100K()
	err       error        // the first invalid option, returned by Assemble
}

// Option configures an [Assembler].
type Option func(*Assembler)

// New returns an Assembler with the given options applied in order: by default a budget of
// [DefaultMaxTokens] tokens, counted exactly in cl100k_base, and chunks joined with [DefaultSeparator].
//
// New does not fail, as in Weave's API: an invalid option (see [WithMaxTokens], [WithTemplate],
// [WithTokenCounter]) is kept, and [Assembler.Assemble] returns it as an error, as does [Assembler.Err] for
// checking early. Nil options are ignored.
func New(opts ...Option) *Assembler {
	a := &Assembler{}
	for _, opt := range opts {
		if opt != nil {
			opt(a)
		}
	}
	return a
}

// Err returns the error [Assembler.Assemble] returns before looking at any result: the first invalid option
// given to [New] (wrapping [ErrInvalidMaxTokens], [ErrNilCounter] or [ErrTemplate]), or nil.
func (a *Assembler) Err() error {
	if a == nil {
		return nil
	}
	return a.err
}

func (a *Assembler) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// WithMaxTokens sets the token budget: the most tokens the whole Context may hold, separators and template
// text included. The default is [DefaultMaxTokens] (4096). A budget of 0 or less makes Assemble return an
// error wrapping [ErrInvalidMaxTokens].
func WithMaxTokens(n int) Option {
	return func(a *Assembler) {
		if n <= 0 {
			a.fail(fmt.Errorf("%w: got %d", ErrInvalidMaxTokens, n))
			return
		}
		a.maxTokens = n
	}
}

// WithTemplate formats each chunk with t (see [NewTemplate]); the renderings are concatenated as they are,
// so the template carries its own separators. The default, without a template, is each chunk's content,
// joined with [DefaultSeparator]. A nil or zero template, or one that failed to parse, makes Assemble return
// an error wrapping [ErrTemplate].
func WithTemplate(t *Template) Option {
	return func(a *Assembler) {
		switch {
		case t == nil:
			a.fail(fmt.Errorf("%w: template is nil", ErrTemplate))
		case t.err != nil:
			a.fail(t.err)
		case t.tmpl == nil:
			a.fail(fmt.Errorf("%w: zero Template; make one with NewTemplate or ParseTemplate", ErrTemplate))
		default:
			a.tmpl = t
		}
	}
}

// WithTokenCounter sets the counter the budget is counted in. The default is the exact cl100k_base encoding
// ([tokenizer.CL100K]); pass the encoding of your model (tokenizer.O200K() for GPT-4o and later, or
// tokenizer.ForModel(name) then Model.Counter()) to count in its tokens. A nil counter makes Assemble
// return an error wrapping [ErrNilCounter].
//
// The counter must be deterministic. TotalTokens is exact for any counter: each candidate context is counted
// as a whole, never as a sum of parts. A counter that also implements [tokenizer.UpToCounter] and
// [tokenizer.Splitter], with their contracts, as [*tokenizer.Encoding] does, is counted faster: the
// assembler then stops counting a chunk that cannot fit, and counts only the text after the last point
// where counts are known to add up, about one count of each chunk in all. Any other
// counter costs a count of the whole context so far for every chunk tried: fine for tens of results, slow
// for hundreds into a large budget (see BenchmarkAssemble).
func WithTokenCounter(tc TokenCounter) Option {
	return func(a *Assembler) {
		if isNilCounter(tc) {
			a.fail(ErrNilCounter)
			return
		}
		a.counter = tc
	}
}

// isNilCounter reports whether v is nil or holds a nil pointer, func, map, slice, channel or interface, whose
// methods could panic.
func isNilCounter(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Template formats one chunk of the context. Make one with [NewTemplate] or [ParseTemplate]. It is
// immutable and safe for concurrent use.
type Template struct {
	tmpl *template.Template
	err  error // the parse error, reported by Assemble
}

// TemplateData is what a [Template] is executed with, once per chunk: {{.Index}}, {{.Content}} and so on.
type TemplateData struct {
	// Index is the chunk's position in the Context among the included chunks, from 1: the n of "Source n".
	// It is the number its Citation has in AssembleResult.Citations, plus one.
	Index int
	// Content is the chunk's text.
	Content string
	// Score is the chunk's relevance score.
	Score float64
	// Source is the chunk's Metadata["source"] if that is not empty, else its DocumentID.
	Source string
	// Metadata is the chunk's metadata. A missing key gives "" ({{.Metadata.page}}).
	Metadata map[string]string
	// ChunkID and DocumentID are the chunk's and its document's ids.
	ChunkID    string
	DocumentID string
}

// NewTemplate returns a Template that formats each chunk with the text/template text, executed with a
// [TemplateData] value; a map key missing from Metadata gives "". For example
//
//	assembler.NewTemplate("--- Source {{.Index}} ---\n{{.Content}}\n")
//
// NewTemplate does not fail, as in Weave's API: if text does not parse, the Template keeps the error, and an
// Assembler made with it returns that error (wrapping [ErrTemplate]) from Assemble. Use [ParseTemplate] to
// get the error at once.
func NewTemplate(text string) *Template {
	t, err := ParseTemplate(text)
	if err != nil {
		return &Template{err: err}
	}
	return t
}

// ParseTemplate is [NewTemplate] that reports a template that does not parse: the error wraps
// [ErrTemplate] and text/template's error.
func ParseTemplate(text string) (*Template, error) {
	t, err := template.New("chunk").Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return &Template{tmpl: t}, nil
}

// AssembleResult is an assembled context.
type AssembleResult struct {
	// Context is the assembled context string for the LLM.
	Context string
	// Citations are the included chunks, in the order they appear in Context.
	Citations []Citation
	// TotalTokens is the EXACT token count of the whole Context in the Assembler's counter, separators and
	// template text included: counter.Count(Context). It never exceeds the budget. (Weave's was an
	// estimate of the chunks alone, so the real context could exceed the budget.)
	TotalTokens int
	// TruncatedCount is the number of chunks dropped because they did not fit the budget.
	TruncatedCount int
}

// Citation is an included chunk.
type Citation struct {
	ChunkIndex int               // position in the original results slice
	Content    string            // chunk text
	Score      float64           // relevance score
	Metadata   map[string]string // chunk metadata (source, document_id, etc.): the chunk's own map, not a copy
	ChunkID    string            // the chunk's ID
	DocumentID string            // the chunk's DocumentID
}

// Assemble formats results into a context string within the token budget.
//
// It takes results in descending score order (results of equal score in the order given; NaN scores last)
// and includes a chunk if and only if the whole context with it (its rendering, and the separator before it)
// still fits the budget; a chunk that does not fit is skipped and counted in TruncatedCount, and later,
// smaller chunks are still tried. A result whose Chunk is nil has no text: it is skipped, neither cited nor
// counted in TruncatedCount, so len(Citations) + TruncatedCount is the number of results with a chunk.
//
// TotalTokens is the exact count of the returned Context in the Assembler's counter, never above the budget.
//
// Assemble returns an error, and no result, if the Assembler has an invalid option (see [Assembler.Err]):
// one wrapping [ErrInvalidMaxTokens], [ErrNilCounter] or [ErrTemplate]; if the template fails to execute
// for a chunk (wrapping [ErrTemplate] and text/template's error); or if ctx is done, which it checks before
// each chunk (wrapping ctx.Err()).
func (a *Assembler) Assemble(ctx context.Context, results []retriever.Result) (*AssembleResult, error) {
	if a == nil {
		a = &Assembler{}
	}
	if a.err != nil {
		return nil, a.err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	counter := a.counter
	if counter == nil {
		counter = tokenizer.CL100K()
	}
	budget := a.maxTokens
	if budget == 0 {
		budget = DefaultMaxTokens
	}
	sep := DefaultSeparator
	if a.tmpl != nil {
		sep = ""
	}
	f := newChunkFit(counter, budget, sep)
	res := &AssembleResult{Citations: []Citation{}}
	var rendered bytes.Buffer
	for _, i := range fitOrder(results) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("assembler: %w", err)
		}
		r := results[i]
		c := r.Chunk
		if c == nil {
			continue
		}
		text := c.Content
		if a.tmpl != nil {
			source := c.Metadata["source"]
			if source == "" {
				source = c.DocumentID
			}
			rendered.Reset()
			err := a.tmpl.tmpl.Execute(&rendered, TemplateData{
				Index:      len(res.Citations) + 1,
				Content:    c.Content,
				Score:      r.Score,
				Source:     source,
				Metadata:   c.Metadata,
				ChunkID:    c.ID,
				DocumentID: c.DocumentID,
			})
			if err != nil {
				return nil, fmt.Errorf("%w: result %d: %w", ErrTemplate, i, err)
			}
			text = rendered.String()
		}
		if !f.add(text) {
			res.TruncatedCount++
			continue
		}
		res.Citations = append(res.Citations, Citation{
			ChunkIndex: i,
			Content:    c.Content,
			Score:      r.Score,
			Metadata:   c.Metadata,
			ChunkID:    c.ID,
			DocumentID: c.DocumentID,
		})
	}
	res.Context = f.context()
	res.TotalTokens = f.total
	return res, nil
}

// AssembleSimple returns the contents of the results' chunks joined with [DefaultSeparator], in the order
// given, with no budget. Results with a nil Chunk are skipped.
func AssembleSimple(results []retriever.Result) string {
	var b strings.Builder
	first := true
	for _, r := range results {
		if r.Chunk == nil {
			continue
		}
		if !first {
			b.WriteString(DefaultSeparator)
		}
		first = false
		b.WriteString(r.Chunk.Content)
	}
	return b.String()
}

// fitOrder returns the indexes of results by descending score, equal scores in their given order, NaN last.
func fitOrder(results []retriever.Result) []int {
	order := make([]int, len(results))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		return cmp.Compare(results[j].Score, results[i].Score) // cmp.Compare puts NaN below every number
	})
	return order
}

// fitMark is a prefix of the text being built whose exact count is known: Count(text[:pos]) == tokens.
type fitMark struct{ pos, tokens int }

// chunkFit builds one context, part by part, keeping its exact count.
//
// Each candidate part is counted together with the accepted text before it, as one string: counts are not
// assumed to add up. To keep that cheap, it remembers marks, prefixes with known counts. For a candidate it
// takes the last mark where the meter vouches that counts add up (tokenizer.Meter.Adds), and counts only
// the text after it (usually just the candidate), stopping once the rest of the budget is exceeded. After
// each accepted part (and separator) it adds a mark at the end of the text and one at the last place inside
// the new text where counts add up whatever follows (tokenizer.Meter.LastCut), so a candidate never needs
// to be counted with more than the tail of the text before it. A mark is only used where the meter vouches
// for it in the text at hand, so a mark that later text invalidates costs time, never exactness. A counter
// that is no tokenizer.Splitter has the single mark {0, 0}: every candidate context is counted whole.
//
// It is not tokenizer.Meter.JoinUpTo over the accepted parts, which would walk every part again for each
// candidate, and count whole a run of joins that have no cut in reach (a separator has none): the context
// grows by appending, so its count is kept, and each candidate costs one count of its own text.
type chunkFit struct {
	m      *tokenizer.Meter
	split  bool // the counter is a tokenizer.Splitter: marks beyond {0, 0}
	budget int
	sep    string
	sepDue bool            // the next candidate follows the separator, not yet in buf
	buf    strings.Builder // the accepted context, then the separator once it is due
	ctxLen int             // the length of the accepted context in buf
	total  int             // the exact count of the accepted context
	marks  []fitMark       // ascending pos; marks[0] is {0, 0}
}

func newChunkFit(counter tokenizer.Counter, budget int, sep string) *chunkFit {
	f := &chunkFit{m: tokenizer.NewMeter(counter), budget: budget, sep: sep, marks: []fitMark{{0, 0}}}
	_, f.split = counter.(tokenizer.Splitter)
	return f
}

// context returns the accepted context.
func (f *chunkFit) context() string { return f.buf.String()[:f.ctxLen] }

// add appends part (after the separator, if a part was accepted before) if the whole context then fits the
// budget, and reports whether it did.
func (f *chunkFit) add(part string) bool {
	if f.sepDue {
		from := f.buf.Len()
		f.buf.WriteString(f.sep)
		f.sepDue = false
		if f.split {
			n, _ := f.countAfterMark("", -1)
			f.addMarks(from, n)
		}
	}
	n, ok := f.countAfterMark(part, f.budget)
	if !ok {
		return false
	}
	from := f.buf.Len()
	f.buf.WriteString(part)
	f.ctxLen, f.total = f.buf.Len(), n
	f.sepDue = f.sep != ""
	if f.split {
		f.addMarks(from, n)
	}
	return true
}

// countAfterMark counts the text buf+extra exactly if its count is at most limit (a negative limit is no
// limit), and reports whether it is; if it is not, n is some count above limit.
func (f *chunkFit) countAfterMark(extra string, limit int) (n int, within bool) {
	text := f.buf.String()
	m := f.marks[0] // {0, 0}: counts always add up at 0
	for k := len(f.marks) - 1; k > 0; k-- {
		if mk := f.marks[k]; f.addsAt(text, mk.pos, extra) {
			m = mk
			break
		}
	}
	rest := limit
	if limit >= 0 {
		rest = limit - m.tokens
		if rest < 0 {
			return m.tokens, false // the text holds at least m.tokens
		}
	}
	after := extra
	switch {
	case m.pos == len(text):
	case extra == "":
		after = text[m.pos:]
	default: // one copy, the string counted
		var b strings.Builder
		b.Grow(len(text) - m.pos + len(extra))
		b.WriteString(text[m.pos:])
		b.WriteString(extra)
		after = b.String()
	}
	n, within = f.m.CountUpTo(after, rest)
	return m.tokens + n, within
}

// addsAt reports whether the meter vouches that counts add up at p in the text text+extra: always at its
// ends.
func (f *chunkFit) addsAt(text string, p int, extra string) bool {
	switch {
	case p <= 0 || p >= len(text)+len(extra):
		return true
	case p == len(text):
		return f.m.Adds(text, extra)
	}
	return f.m.Adds(text[:p], text[p:])
}

// addMarks records that buf, whose bytes from `from` on are new, counts n tokens: a mark at its end, and
// one at the last place in the new bytes, after the last mark, where counts add up whatever follows.
func (f *chunkFit) addMarks(from, n int) {
	text := f.buf.String()
	if q := f.m.LastCut(text, max(from, f.marks[len(f.marks)-1].pos)+1); q > 0 {
		f.marks = append(f.marks, fitMark{q, n - f.m.Count(text[q:])})
	}
	if end := len(text); end > f.marks[len(f.marks)-1].pos {
		f.marks = append(f.marks, fitMark{end, n})
	}
}
