// Package engine ties Loom together: it gathers an assembly's sources from a store (the agent's
// configuration, the user's memory, the session's history, tool outputs and pre-retrieved knowledge), merges
// them with what the request carries inline, and hands the whole to the assembler. Record writes a turn back
// so that the next assembly sees it.
//
// With a summarizer (WithSummarizer), sessions are compacted: once the turns no summary covers cost more
// than the agent's policy allows (loom.Compaction), the older ones are summarized, with the previous
// summary, into the session's running summary, in the background after Record (or on demand, Compact).
// An assembly never waits for it: it sends the latest stored summary in place of the messages it covers,
// and trims the rest as without one.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/summarize"
	"github.com/context-loom/loom/tokenizer"
	"golang.org/x/sync/errgroup"
)

// DefaultSourceTimeout bounds how long an assembly waits for one source: a healthy store answers in a
// millisecond, so an assembly that waits longer is better served degraded.
const DefaultSourceTimeout = time.Second

// Errors of the engine.
var (
	// ErrInvalidRequest is returned for a request that cannot be assembled as given.
	ErrInvalidRequest = loom.NewError(loom.ErrInvalid, "engine: invalid request")
	// ErrAgentNotFound is returned when the request names an agent the store does not have. It wraps
	// store.ErrNotFound.
	ErrAgentNotFound = fmt.Errorf("engine: agent %w", store.ErrNotFound)
	// ErrSourceFailed is returned when the agent a request names cannot be read (its instructions and
	// tools are required), and in strict mode when any source cannot be read; in the default mode the
	// other sources' failures give a degraded result instead.
	ErrSourceFailed = errors.New("engine: a source failed")
	// ErrClosed is returned by retrievals and WarmIndexes after Close.
	ErrClosed = loom.NewError(loom.ErrClosed, "engine: closed")
)

// Engine assembles contexts from stored state. It is safe for concurrent use.
type Engine struct {
	store         *store.Store
	colls         collection.Store // the store's collections (Store.Collections); nil if it keeps none
	sourceTimeout time.Duration
	now           func() time.Time

	embedders       map[string]embed.Embedder
	defaultEmbedder string
	chunkers        *chunker.Registry
	named           []namedChunker // WithNamedChunker's, registered in chunkers after the options
	indexOpts       retriever.IndexOptions
	maxDocChunks    int   // WithMaxDocumentChunks; 0: the default
	indexMemory     int64 // WithIndexMemory; 0: no cap
	ix              *registry
	hints           agentHints    // the first page of history to read for an agent (see load)
	records         RecordOptions // WithAssemblyRecords'
	recordsOn       bool          // WithAssemblyRecords was given, without Off
	rec             *recorder     // writes the records; nil when the engine records none

	summarizer        summarize.Summarizer // WithSummarizer's; nil: no compaction
	sumCfg            SummarizerConfig
	sumCounter        tokenizer.Counter // counts the summarization request
	observeCompaction func(result string)
	bg                *compactor      // the background compactions; nil without a summarizer
	closing           context.Context // done once Close is called: it ends the compactions under way
	closed            context.CancelFunc
	compactions       compactionCounts
	caches            cacheStates // the sessions' cache states, written behind the assemblies
}

// Option configures an Engine.
type Option func(*Engine) error

// WithSourceTimeout sets how long an assembly waits for a source (the store's read) before it goes on
// without it (or, in strict mode, fails). The default is DefaultSourceTimeout.
func WithSourceTimeout(d time.Duration) Option {
	return func(e *Engine) error {
		if d <= 0 {
			return fmt.Errorf("%w: source timeout must be positive", ErrInvalidRequest)
		}
		e.sourceTimeout = d
		return nil
	}
}

// New returns an engine over s. If s also keeps collections (Store.Collections), the engine ingests and
// retrieves; Close stops the background work that retrieval starts.
func New(s *store.Store, opts ...Option) (*Engine, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidRequest)
	}
	e := &Engine{store: s, sourceTimeout: DefaultSourceTimeout, now: time.Now, embedders: map[string]embed.Embedder{}}
	e.closing, e.closed = context.WithCancel(context.Background())
	e.colls, _ = s.Collections()
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	if e.chunkers == nil {
		e.chunkers = chunker.NewRegistry()
	}
	for _, n := range e.named {
		if err := e.chunkers.Register(n.name, n.c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
	}
	e.ix = newRegistry(e.colls, e.indexOpts, e.indexMemory)
	if e.summarizer != nil && s.Summaries() {
		e.bg = newCompactor(e)
	}
	if e.recordsOn && s.Assemblies() {
		e.rec = newRecorder(e)
	}
	if e.defaultEmbedder == "" {
		def := embed.Default()
		e.embedders[def.Name()], e.defaultEmbedder = def, def.Name()
	}
	// Collections made before the lexical embedder's second version hold vectors of its first, under its
	// name: they stay readable and writable, unless WithEmbedder registered another under that name.
	if v1, err := embed.NewLexicalV1(embed.DefaultLexicalDimensions); err == nil && e.embedders[v1.Name()] == nil {
		e.embedders[v1.Name()] = v1
	}
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() *store.Store { return e.store }

// Request asks for an assembly. The ids name stored state to pull; the embedded assembler.Request carries
// inline parts, which are merged with the stored ones: instructions after the agent's, tools beside the
// agent's (an inline tool replaces the agent's of the same name), memory facts over stored facts of the same
// key, knowledge and tool outputs after the stored ones, history after the stored history. Model, MaxTokens
// and Policy given inline win over the agent's. Every id is the tenant's of the context the request is
// assembled with (loom.WithTenant; loom.DefaultTenant without one), as for every method of the engine.
type Request struct {
	Agent   string `json:"agent,omitempty"`
	User    string `json:"user,omitempty"`
	Session string `json:"session,omitempty"`
	// HistoryLimit is how many of the session's newest messages to consider; 0 means
	// store.DefaultLoadMessages (for the cookbook preset, the Valkey cookbook's 10). A window without a user message
	// (inside an agent's run of tool calls) is widened back to the newest one. Without a session it is an
	// invalid request, but for the cookbook preset, which applies it to the inline history too. Whatever the
	// limit, only as many messages are read as the budget can hold: newest first, until what they cost at
	// least (store.MessageTokens) passes the whole budget; but with a policy that clears tool results
	// (KeepToolResults, ClearToolResultsOver), whose placeholders cost less than their counts, all of the
	// limit's messages are read.
	HistoryLimit int `json:"history_limit,omitempty"`
	// Strict fails the assembly when a source cannot be read, instead of returning a degraded result. A
	// named agent that cannot be read fails it either way.
	Strict bool `json:"strict,omitempty"`
	// Preset selects another rendering: "" (Loom's own) or "cookbook" (the Valkey cookbook's messages; see
	// PresetCookbook).
	Preset string `json:"preset,omitempty"`
	// Retrieve fills the knowledge region by retrieving from a collection for the message (after any
	// stored and inline knowledge).
	Retrieve *RetrieveRequest `json:"retrieve,omitempty"`
	// NoRecord leaves this assembly out of its session's recorded assemblies (see WithAssemblyRecords):
	// the inspector's "try it" runs, which ask what a change would do, set it.
	NoRecord bool `json:"no_record,omitempty"`

	assembler.Request
}

// Presets.
const (
	// PresetCookbook renders as the Valkey cookbook's assemble_context does, message for message, with the
	// assembler's cookbook format (assembler.Cookbook, which documents the messages and the one way they
	// differ from the cookbook's own: untrusted values are marked and escaped): the agent's role,
	// constraints and format; the request's instructions; the facts (stored, then inline); the knowledge
	// (stored, inline, then retrieved); the newest 10 messages of the history (HistoryLimit), stored then
	// inline, as their roles and contents; the tool outputs (stored, then inline); the user's message.
	// Where the cookbook trims by characters, Loom trims history oldest-first by the exact count. The
	// preset takes no tools, policy or formatter, and renders OpenAI chat messages only.
	PresetCookbook = "cookbook"
)

// Result is an assembled context and how its sources fared.
type Result struct {
	*assembler.Result
	// Degraded lists the sources that could not be read; the result was assembled without them. Empty
	// when every source was read.
	Degraded []Degradation `json:"degraded,omitempty"`
}

// Degradation is a source an assembly went without, and why.
type Degradation struct {
	Source string `json:"source"`
	Cause  string `json:"cause"`
}

// Assemble gathers the sources req names, merges them with its inline parts and assembles them. It returns
// ErrAgentNotFound for an agent that does not exist, a *assembler.BudgetError when the required items do not
// fit, errors wrapping ErrInvalidRequest, assembler.ErrInvalidRequest or store.ErrInvalid for a bad request,
// and an error wrapping ErrSourceFailed when the named agent cannot be read or (only when req.Strict) another
// source cannot be read. The engine records the result in its session for the inspector after it
// returns (see WithAssemblyRecords): treat it as read-only.
func (e *Engine) Assemble(ctx context.Context, req Request) (*Result, error) {
	tenant := loom.Tenant(ctx)
	switch req.Preset {
	case "", PresetCookbook:
	default:
		return nil, fmt.Errorf("%w: unknown preset %q (known: cookbook)", ErrInvalidRequest, req.Preset)
	}
	if req.HistoryLimit < 0 {
		return nil, fmt.Errorf("%w: history_limit must not be negative", ErrInvalidRequest)
	}
	if req.HistoryLimit > 0 && req.Session == "" && req.Preset != PresetCookbook { // it bounds a stored session's read
		return nil, fmt.Errorf("%w: history_limit needs a session", ErrInvalidRequest)
	}
	if r := req.Retrieve; r != nil {
		if err := r.validate(); err != nil {
			return nil, err
		}
	}
	// The sources are read concurrently when there are two, each under its own deadline: the store's state
	// in one Load (one round trip), and the knowledge retrieved for the message. A source whose failure ends
	// the assembly cancels the other, and Wait joins both before any return. One source is read on this
	// goroutine: a goroutine for it would only add its cost to every assembly.
	var got struct { // what the sources gave, each written by its goroutine, read after Wait
		snap      *store.Snapshot
		cut       historyCut
		degraded  []Degradation
		retrieved []assembler.Knowledge
		retDeg    []Degradation
	}
	retrieve := func(ctx context.Context) error {
		k, err := e.retrieveKnowledge(ctx, tenant, req.Retrieve, req.Message)
		switch {
		case err == nil:
			got.retrieved = k
		case isRequestError(err) || ctx.Err() != nil:
			return err
		case req.Strict:
			return fmt.Errorf("%w: retrieval: %w", ErrSourceFailed, err)
		default:
			got.retDeg = []Degradation{{Source: "retrieval", Cause: err.Error()}}
		}
		return nil
	}
	load := func(ctx context.Context) error {
		var err error
		got.snap, got.cut, got.degraded, err = e.loadSources(ctx, tenant, &req)
		return err
	}
	stored := req.Agent != "" || req.User != "" || req.Session != ""
	var err error
	switch {
	case req.Retrieve != nil && stored:
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return retrieve(gctx) })
		g.Go(func() error { return load(gctx) })
		err = g.Wait()
	case req.Retrieve != nil:
		err = retrieve(ctx)
	case stored:
		err = load(ctx)
	}
	if err != nil {
		return nil, err
	}
	snap, cut, degraded := cmp.Or(got.snap, &store.Snapshot{}), got.cut, append(got.degraded, got.retDeg...)
	if len(got.retrieved) > 0 {
		snap.Knowledge = append(slices.Clip(snap.Knowledge), got.retrieved...)
	}
	// The prompt cache key is the tenant's and the agent's, whatever the request says (see
	// assembler.Request.CacheScope).
	req.CacheScope = assembler.CacheScope(tenant, req.Agent)
	// The cache report compares with the session's previous assembly (see assembler.CacheReport); a state
	// that cannot be read leaves a first assembly's report, never a failed assembly.
	tracked := req.Session != "" && e.store.CacheStates()
	if tracked {
		if err := snap.Errors[store.SourceCacheState]; err != nil {
			degraded = append(degraded, Degradation{Source: string(store.SourceCacheState), Cause: err.Error()})
		}
		req.CacheReport, req.CachePrevious = true, e.caches.previous(cacheKey{tenant, req.Session}, snap.CacheState)
	}
	if e.recorded(&req, snap) { // the inspector shows what each dropped item would have cost
		req.CountDropped = true
	}
	var res *assembler.Result
	if req.Preset == PresetCookbook {
		res, err = assembleCookbook(ctx, &req, snap)
	} else {
		degraded = append(degraded, usableToolNames(snap)...)
		if cut.need > 0 && requiresStored(req.History, cut.newest) {
			// The latest tool exchange and the user message that asked for it are required, and they go
			// back further than the budget reaches: they cannot fit.
			return nil, &assembler.BudgetError{Required: cut.need, Available: cut.budget}
		}
		if req.Summary != nil && len(snap.Messages) > 0 {
			return nil, fmt.Errorf("%w: an inline summary is of an inline history; a stored session's summary is its own (see Compact)", ErrInvalidRequest)
		}
		merged, skipped := merge(&req, snap)
		if skipped > 0 {
			degraded = append(degraded, Degradation{Source: string(store.SourceHistory),
				Cause: fmt.Sprintf("%d stored messages skipped: a role other than user, assistant, system or tool, or a tool message without its tool_call_id", skipped)})
		}
		withSummary(merged, snap.Summary)
		res, err = assembler.AssembleRequest(ctx, merged)
		var be *assembler.BudgetError
		if merged.Summary != nil && errors.As(err, &be) {
			// A summary too long for the budget does not fail the assembly: it goes without, the history
			// trimmed as it would be without one.
			merged.Summary = nil
			if res, err = assembler.AssembleRequest(ctx, merged); err == nil {
				degraded = append(degraded, Degradation{Source: string(store.SourceSummary),
					Cause: fmt.Sprintf("the session's summary does not fit the budget (%d tokens needed, %d available)", be.Required, be.Available)})
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if tracked && res.CacheState != nil {
		e.putCacheState(cacheKey{tenant, req.Session}, res.CacheState)
	}
	out := &Result{Result: res, Degraded: degraded}
	e.record(ctx, &req, snap, out)
	return out, nil
}

// withSummary gives req the session's stored summary, if it covers any message: it stands for the
// history's first messages up to its To, which are not sent.
func withSummary(req *assembler.Request, sum *store.Summary) {
	if sum == nil || sum.To <= 0 || loom.IsBlank(sum.Text) || req.Summary != nil {
		return // an inline summary is of an inline history: the caller's
	}
	covers := 0
	for covers < len(req.History) && req.History[covers].Seq > 0 && req.History[covers].Seq <= sum.To {
		covers++
	}
	req.Summary = &assembler.Summary{Text: sum.Text, Covers: covers, From: sum.From, To: sum.To}
}

// loadSources reads the stored sources req names (see load) and sorts their errors: it returns an error for
// those that end the assembly (a bad request, a missing or unreadable agent, any source when req.Strict, ctx
// done), and the others as degradations, the snapshot then holding what could be read.
func (e *Engine) loadSources(ctx context.Context, tenant string, req *Request) (*store.Snapshot, historyCut, []Degradation, error) {
	var degraded []Degradation
	snap, cut, err := e.load(ctx, tenant, *req)
	switch {
	case errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrUnsupported):
		return nil, cut, nil, err
	case err != nil && ctx.Err() != nil:
		return nil, cut, nil, err
	case err != nil:
		if req.Strict || req.Agent != "" { // without the agent's instructions and tools, no assembly
			return nil, cut, nil, fmt.Errorf("%w: store: %w", ErrSourceFailed, err)
		}
		degraded = append(degraded, Degradation{Source: "store", Cause: err.Error()})
		snap = &store.Snapshot{}
	}
	for _, src := range []store.Source{store.SourceAgent, store.SourceMemory, store.SourceHistory, store.SourceToolOutputs, store.SourceKnowledge, store.SourceSummary} {
		err := snap.Errors[src]
		switch {
		case err == nil:
		case src == store.SourceAgent && errors.Is(err, store.ErrNotFound):
			return nil, cut, nil, fmt.Errorf("%w: %q (tenant %q)", ErrAgentNotFound, req.Agent, tenant)
		case req.Strict || src == store.SourceAgent:
			return nil, cut, nil, fmt.Errorf("%w: %s: %w", ErrSourceFailed, src, err)
		default:
			degraded = append(degraded, Degradation{Source: string(src), Cause: err.Error()})
		}
	}
	return snap, cut, degraded, nil
}

// RetrieveRequest asks an assembly to retrieve knowledge.
type RetrieveRequest struct {
	Collection string            `json:"collection"`
	Query      string            `json:"query,omitempty"` // default: the request's message
	TopK       int               `json:"top_k,omitempty"`
	MinScore   float64           `json:"min_score,omitempty"`
	Mode       string            `json:"mode,omitempty"`
	Filter     map[string]string `json:"filter,omitempty"`
	// KeywordWeight and VectorWeight, when set, weigh the keyword and vector rankings in hybrid and mmr
	// mode in place of the collection's weights (see WithKeywordWeight, WithVectorWeight).
	KeywordWeight *float64 `json:"keyword_weight,omitempty"`
	VectorWeight  *float64 `json:"vector_weight,omitempty"`
}

func (r *RetrieveRequest) validate() error {
	if r.Collection == "" {
		return fmt.Errorf("%w: retrieve needs a collection", ErrInvalidRequest)
	}
	return nil
}

// retrieveKnowledge retrieves for an assembly, under the source deadline, as knowledge items.
func (e *Engine) retrieveKnowledge(ctx context.Context, tenant string, r *RetrieveRequest, message string) ([]assembler.Knowledge, error) {
	ctx, cancel := context.WithTimeout(loom.WithTenant(ctx, tenant), e.sourceTimeout)
	defer cancel()
	q := r.Query
	if q == "" {
		q = message
	}
	opts := []RetrieveOption{WithCollection(r.Collection), WithTopK(r.TopK), WithMinScore(r.MinScore), WithMode(r.Mode), WithFilter(r.Filter)}
	if r.KeywordWeight != nil {
		opts = append(opts, WithKeywordWeight(*r.KeywordWeight))
	}
	if r.VectorWeight != nil {
		opts = append(opts, WithVectorWeight(*r.VectorWeight))
	}
	results, err := e.Retrieve(ctx, q, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]assembler.Knowledge, len(results))
	for i, res := range results {
		c := res.Chunk
		out[i] = assembler.Knowledge{ID: c.ID, DocumentID: c.DocumentID, Content: c.Content, Score: res.Score, Source: c.Metadata["source"],
			Type: "rag", StartOffset: c.StartOffset, EndOffset: c.EndOffset, Metadata: c.Metadata}
	}
	return out, nil
}

// isRequestError reports whether err is the caller's doing: an invalid request, a missing collection or one
// built with another embedder.
func isRequestError(err error) bool {
	return errors.Is(err, ErrInvalidRequest) || errors.Is(err, collection.ErrNotFound) || errors.Is(err, store.ErrInvalid) ||
		errors.Is(err, store.ErrTooLarge) || errors.Is(err, ErrNoCollections) || errors.Is(err, ErrEmbedderMismatch)
}

// load reads the stored sources with the source deadline: in one Load, with the first page of the
// session's history; then, if the budget can use more of it than that page holds, the rest (see
// readWindow).
//
// It also reports whether the budget cut the history before any user turn (see historyCut).
func (e *Engine) load(ctx context.Context, tenant string, req Request) (_ *store.Snapshot, _ historyCut, _ error) {
	ctx, cancel := context.WithTimeout(ctx, e.sourceTimeout)
	defer cancel()
	// The budget is known before the Load unless the stored agent gives the model or max_tokens: then the
	// first page is a guess (what the agent gave last time, or else the request's max_tokens or
	// firstPageTokens), and readWindow reads on if the budget turns out larger.
	first := windowOf(&req, nil)
	if req.Agent != "" && (req.Model == "" || req.MaxTokens == 0) {
		if a, ok := e.hints.get(tenant, req.Agent); ok {
			first = windowOf(&req, &a)
		} else {
			guess := req
			guess.MaxTokens = cmp.Or(guess.MaxTokens, firstPageTokens)
			first = windowOf(&guess, nil)
		}
	}
	snap, err := e.store.Load(ctx, tenant, store.LoadQuery{Agent: req.Agent, User: req.User, Session: req.Session,
		MaxMessages: first.limit, MaxTokens: first.bound.MaxTokens, Encoding: first.bound.Encoding, CountToolCalls: first.bound.CountToolCalls,
		Summary:    req.Session != "" && req.Preset != PresetCookbook && e.store.Summaries(),
		CacheState: req.Session != "" && e.store.CacheStates()})
	if err == nil && snap.Agent != nil {
		e.hints.put(tenant, req.Agent, *snap.Agent)
	}
	if err != nil || req.Session == "" || snap.Errors[store.SourceHistory] != nil {
		return snap, historyCut{}, err
	}
	w := windowOf(&req, snap.Agent)
	complete := w.bound == first.bound && len(snap.Messages) < first.limit // the page is all the bound takes
	msgs, cut, err := e.readWindow(ctx, tenant, req.Session, w, snap.Messages, snap.NextBefore, complete)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, historyCut{}, err
	case err != nil:
		snap.Messages, snap.Errors[store.SourceHistory] = nil, err
	default:
		snap.Messages = msgs
	}
	return snap, cut, nil
}

// nextBefore is the before of the messages older than seq first: 0 when it is the first.
func nextBefore(first int64) int64 {
	if first <= 1 {
		return 0
	}
	return first
}

// historyCut is how the budget cut a window of history before any user turn: need is the least that the
// messages read and the first one left out cost (more than budget), 0 when it did not; newest is the
// session's newest message.
type historyCut struct {
	need, budget int
	newest       store.Message
}

// requiresStored reports whether the history an assembly is given, the stored then the inline, ends with
// a tool exchange that no inline user turn precedes, the newest stored message being newest: then the
// assembler requires the exchange and the stored messages back to the user message that asked for it.
func requiresStored(inline []assembler.Message, newest store.Message) bool {
	for _, m := range inline {
		if m.Role == "user" && (strings.TrimSpace(m.Content) != "" || len(m.Parts) > 0) {
			return false
		}
	}
	role, calls := newest.Role, len(newest.ToolCalls)
	if n := len(inline); n > 0 {
		role, calls = inline[n-1].Role, len(inline[n-1].ToolCalls)
	}
	return role == "tool" || calls > 0
}

// firstPageTokens bounds the first page of history that a Load reads when the budget is not known yet
// (the stored agent gives it): as much as most budgets hold.
const firstPageTokens = 8192

// agentHints remember, by tenant and agent, what of a stored agent sizes an assembly's budget and its
// window of history (its model, max_tokens, policy margin and clearing of tool results), so that the first
// page of history a Load reads is the one the assembly needs. A hint is a guess: a stale one costs a read
// more or a page longer, never another window.
type agentHints struct {
	mu sync.Mutex
	m  map[[2]string]store.Agent
}

// maxAgentHints bounds the hints an engine keeps; past it they are forgotten and learned again.
const maxAgentHints = 4096

func (h *agentHints) get(tenant, agent string) (store.Agent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.m[[2]string{tenant, agent}]
	return a, ok
}

func (h *agentHints) put(tenant, agent string, a store.Agent) {
	hint := store.Agent{Model: a.Model, MaxTokens: a.MaxTokens}
	if a.Policy != nil {
		hint.Policy = &assembler.Policy{Margin: a.Policy.Margin, KeepToolResults: a.Policy.KeepToolResults,
			ClearToolResultsOver: a.Policy.ClearToolResultsOver}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxAgentHints {
		h.m = map[[2]string]store.Agent{}
	}
	h.m[[2]string{tenant, agent}] = hint
}

// widenPage is how many messages a read asks for at a time when it widens a window back to a user turn.
const widenPage = 64

// window bounds the stored messages an assembly reads: at most limit of the newest (with widen, more when
// they hold no user turn: back to the newest one), of which at most what bound.MaxTokens counts.
type window struct {
	limit  int
	widen  bool
	bound  store.MessageQuery // MaxTokens (0: no bound), Encoding and CountToolCalls
	budget int                // the assembly's budget
	floor  int                // what a message costs at least besides its content
}

// windowOf returns the window of the session's messages that the assembly of req can use, given the
// stored agent a (nil when there is none or it is not read yet). The bound is the whole budget, an upper
// bound of what the history region can take, counted as store.MessageTokens counts (raised when the
// model's frame for a message costs less than store.MessageOverhead), so that every message the assembly
// could keep is read. When the budget cannot be had (an unknown model, a bad max_tokens: the assembly
// fails for it anyway), only the limit bounds the window.
func windowOf(req *Request, a *store.Agent) window {
	w := window{limit: req.HistoryLimit, widen: req.Preset != PresetCookbook}
	if w.limit == 0 {
		w.limit = store.DefaultLoadMessages
		if req.Preset == PresetCookbook {
			w.limit = cookbookHistory
		}
	}
	name, maxTokens, policy := req.Model, req.MaxTokens, req.Policy
	if a != nil {
		name, maxTokens = cmp.Or(name, a.Model), cmp.Or(maxTokens, a.MaxTokens)
		if policy == nil {
			policy = a.Policy
		}
	}
	model, err := tokenizer.ForModel(cmp.Or(name, assembler.DefaultModel))
	if err != nil {
		return w
	}
	margin := 0
	if policy != nil && req.Preset != PresetCookbook {
		margin = policy.Margin
	}
	budget, err := assembler.PromptBudget(model, maxTokens, req.ReserveOutput, margin)
	if err != nil {
		return w
	}
	// What a message costs at least besides its content: its frame and role (the text format: its label
	// and blank line, 4).
	floor := model.TokensPerMessage + 1
	if (req.Format == assembler.FormatText || req.Formatter == assembler.Text) && req.Preset != PresetCookbook {
		floor = 4
	}
	w.budget, w.floor = budget, floor
	if floor < store.MessageOverhead {
		budget = (budget*store.MessageOverhead + floor - 1) / floor
	}
	enc := model.Encoding
	if !model.Exact() {
		enc = store.EstimateEncoding
	}
	w.bound = store.MessageQuery{MaxTokens: budget, Encoding: enc, CountToolCalls: req.Preset != PresetCookbook}
	if policy != nil && (policy.KeepToolResults > 0 || policy.ClearToolResultsOver > 0) && req.Preset != PresetCookbook {
		// A cleared tool result costs its placeholder, less than its count: a budget's worth of counts may
		// hold less history than fits once results are cleared. The limit alone bounds the window.
		w.bound.MaxTokens = 0
	}
	return w
}

// readWindow returns the messages of w, reading on from msgs, the session's newest (oldest first), and
// next, the before of the older ones (0: none); complete says that no more of them fit w's bound. It reads
// newest first, page by page, only while the window can take more, and reports in cut when the bound
// stopped it before a user turn.
func (e *Engine) readWindow(ctx context.Context, tenant, session string, w window, msgs []store.Message, next int64, complete bool) ([]store.Message, historyCut, error) {
	// A user turn counts as the assembler counts it: a user message that is not blank.
	userTurn := func(m store.Message) bool {
		return m.Role == "user" && (strings.TrimSpace(m.Content) != "" || len(m.Parts) > 0)
	}
	kept, tokens, user := 0, 0, false
	full := func() bool { return kept >= w.limit && (!w.widen || user) }
	// stopped is the cut when the bound stops the window before a user turn at the message left out (nil:
	// read it here).
	stopped := func(window []store.Message, left *store.Message) ([]store.Message, historyCut, error) {
		if user || next == 0 && left == nil {
			return window, historyCut{}, nil
		}
		if left == nil {
			before := next
			if len(window) > 0 {
				before = window[0].Seq
			}
			page, err := e.store.Messages(ctx, tenant, session, store.MessageQuery{Before: before, Limit: 1})
			if err != nil || len(page) == 0 {
				return window, historyCut{}, err
			}
			left = &page[0]
		}
		over := store.MessageTokens(*left, w.bound.Encoding, w.bound.CountToolCalls)
		// In real tokens: the bound counts store.MessageOverhead a message where it may cost only w.floor.
		need := tokens + over - (kept+1)*max(store.MessageOverhead-w.floor, 0)
		newest := *left
		if len(window) > 0 {
			newest = window[len(window)-1]
		}
		return window, historyCut{need: max(need, w.budget+1), budget: w.budget, newest: newest}, nil
	}
	for i := len(msgs); ; {
		for ; i > 0; i-- {
			m := msgs[i-1]
			if full() {
				return msgs[i:], historyCut{}, nil
			}
			if w.bound.MaxTokens > 0 {
				c := store.MessageTokens(m, w.bound.Encoding, w.bound.CountToolCalls)
				if tokens+c > w.bound.MaxTokens {
					return stopped(msgs[i:], &m)
				}
				tokens += c
			}
			kept++
			user = user || userTurn(m)
		}
		if next == 0 || full() {
			return msgs, historyCut{}, nil
		}
		if complete {
			return stopped(msgs, nil)
		}
		q := w.bound
		q.Before, q.Limit = next, widenPage
		if kept < w.limit {
			q.Limit = w.limit - kept
		}
		if q.MaxTokens > 0 {
			if q.MaxTokens -= tokens; q.MaxTokens < store.MessageOverhead { // not even an empty message fits
				return stopped(msgs, nil)
			}
		}
		page, err := e.store.Messages(ctx, tenant, session, q)
		if err != nil {
			return nil, historyCut{}, fmt.Errorf("read history of session %q: %w", session, err)
		}
		complete = len(page) < q.Limit // what the bound takes, or all there is
		if len(page) > 0 {
			next = nextBefore(page[0].Seq)
		}
		msgs, i = append(page, msgs...), len(page)
	}
}

// merge builds the assembler's request from the stored snapshot and the request's inline parts.
func merge(req *Request, snap *store.Snapshot) (_ *assembler.Request, skipped int) {
	out := req.Request // a copy; slices are replaced, never appended to in place
	if a := snap.Agent; a != nil {
		if p := a.SystemPrompt(); p != "" {
			if out.Instructions != "" {
				out.Instructions = p + "\n\n" + out.Instructions
			} else {
				out.Instructions = p
			}
		}
		if len(a.Tools) > 0 {
			tools := make([]assembler.Tool, 0, len(a.Tools)+len(req.Tools))
			for _, t := range a.Tools {
				if !slices.ContainsFunc(req.Tools, func(r assembler.Tool) bool { return r.Function.Name == t.Function.Name }) {
					tools = append(tools, t)
				}
			}
			out.Tools = append(tools, req.Tools...)
		}
		if out.Model == "" {
			out.Model = a.Model
		}
		if out.MaxTokens == 0 {
			out.MaxTokens = a.MaxTokens
		}
		if out.Policy == nil {
			out.Policy = a.Policy
		}
		// The agent's cache options are defaults that the request's own override; its TTL is for the
		// anthropic format's breakpoints only, and not when the request turns them off.
		if out.CacheBreakpoints == "" && !(out.CacheTTL != "" && a.CacheBreakpoints == assembler.CacheBreakpointsOff) {
			out.CacheBreakpoints = a.CacheBreakpoints // a request that asks for a TTL asks for breakpoints
		}
		format := out.Format
		if out.Formatter != nil {
			format = out.Formatter.Name()
		}
		if out.CacheTTL == "" && format == assembler.FormatAnthropic && out.CacheBreakpoints != assembler.CacheBreakpointsOff {
			out.CacheTTL = a.CacheTTL
		}
	}
	if len(snap.Facts) > 0 {
		facts := make([]assembler.MemoryFact, 0, len(snap.Facts)+len(req.Memory))
		for _, f := range snap.Facts {
			if !slices.ContainsFunc(req.Memory, func(r assembler.MemoryFact) bool { return r.Key == f.Key }) {
				facts = append(facts, f)
			}
		}
		out.Memory = append(facts, req.Memory...)
	}
	if len(snap.Knowledge) > 0 {
		out.Knowledge = append(slices.Clip(snap.Knowledge), req.Knowledge...)
	}
	if len(snap.Messages) > 0 {
		history := make([]assembler.Message, 0, len(snap.Messages)+len(req.History))
		for _, m := range snap.Messages {
			// Loom's stores refuse such messages; the Valkey cookbook's keys, written by other code, may hold them,
			// and one would otherwise fail the whole assembly.
			if store.CheckRole(m) != nil {
				skipped++
				continue
			}
			history = append(history, m)
		}
		out.History = append(history, req.History...)
	}
	if len(snap.ToolOutputs) > 0 {
		out.ToolOutputs = append(slices.Clip(snap.ToolOutputs), req.ToolOutputs...)
	}
	return &out, skipped
}

// Turn is one exchange to record: the user's message and what answered it.
type Turn struct {
	Session string
	// Agent names the agent whose compaction policy the session follows (see loom.Compaction); "" means
	// the default policy.
	Agent string
	// Message is the user's message; "" records only the reply.
	Message string
	// Reply is the assistant's reply, with its tool calls and the tool results that answered them, in order.
	Reply []store.Message
	// ToolOutputs are tool steps of this turn to keep beside the history (the Valkey cookbook's tool:<session>:step_*).
	ToolOutputs []store.ToolOutput
}

// Record appends the turn's messages to its session in one atomic append (then its tool outputs), so that
// the next assembly sees them, and returns the messages as stored. With a summarizer (WithSummarizer), it
// then schedules the session's compaction in the background (ScheduleCompaction), which adds nothing to
// its own time. It returns errors wrapping
// ErrInvalidRequest or the store's errors.
func (e *Engine) Record(ctx context.Context, t Turn) ([]store.Message, error) {
	tenant := loom.Tenant(ctx)
	var msgs []store.Message
	if t.Message != "" {
		msgs = append(msgs, store.Message{Role: "user", Content: t.Message})
	}
	for i, m := range t.Reply {
		if m.Role != "assistant" && m.Role != "tool" {
			return nil, fmt.Errorf("%w: reply message %d has role %q (want assistant or tool)", ErrInvalidRequest, i, m.Role)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 && len(t.ToolOutputs) == 0 {
		return nil, fmt.Errorf("%w: nothing to record", ErrInvalidRequest)
	}
	var stored []store.Message
	if len(msgs) > 0 {
		var err error
		if stored, err = e.store.AppendMessages(ctx, tenant, t.Session, msgs...); err != nil {
			return nil, fmt.Errorf("record session %q: %w", t.Session, err)
		}
	}
	for _, o := range t.ToolOutputs {
		if _, err := e.store.AppendToolOutput(ctx, tenant, t.Session, o); err != nil {
			return stored, fmt.Errorf("record tool output of session %q: %w", t.Session, err)
		}
	}
	if len(stored) > 0 {
		e.ScheduleCompaction(ctx, CompactRequest{Session: t.Session, Agent: t.Agent})
	}
	return stored, nil
}
