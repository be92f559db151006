package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
)

// Store is the front of a backend: every read and write of an assembly's state goes through it, and it
// applies the rules every backend shares before the backend sees a call: tenant and ids valid
// ([ValidateID]), values within [Limits], a message's role, tool calls and token counts, the timestamps
// a write sets, the selection of a [MessageQuery] (where the backend cannot do it itself), the order of
// facts, and ErrClosed after Close. It is safe for concurrent use.
//
// Open a backend's package (its Open returns a Store), or put a [Backend] of one's own behind one with
// [New].
type Store struct {
	b      Backend
	sel    MessageSelector // b's, or nil
	loader Loader          // b's, or nil
	colls  collection.Store
	limits Limits
	sums   SummaryBackend    // b's, or nil
	caches CacheStateBackend // b's, or nil
	asms   AssemblyBackend   // b's, or nil
	sorted bool              // facts are ordered by key (b is no OrderedFacts that keeps its own order)
	now    func() time.Time
	closed atomic.Bool
}

// New returns a Store over b, which it owns from then on (Close closes it). opts' Limits are the
// Store's; its SessionTTL and ChangesKept are the backend's, which its own
// constructor took (a backend's Open passes the same Options to both). It returns an error wrapping
// ErrInvalid for a nil backend.
func New(b Backend, opts Options) (*Store, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: no backend", ErrInvalid)
	}
	s := &Store{b: b, limits: opts.Limits.WithDefaults(), sorted: true, now: time.Now}
	s.sel, _ = b.(MessageSelector)
	s.loader, _ = b.(Loader)
	s.sums, _ = b.(SummaryBackend)
	s.caches, _ = b.(CacheStateBackend)
	s.asms, _ = b.(AssemblyBackend)
	if o, ok := b.(OrderedFacts); ok && o.FactsOrdered() {
		s.sorted = false
	}
	if cb, ok := b.(CollectionBackend); ok {
		s.colls = newCollections(s, cb)
	}
	return s, nil
}

// Backend returns the backend s sits on, for what only it can do (a type assertion to the backend's own
// type: sqlite's DeleteExpired, say). Calls to it bypass the Store's rules.
func (s *Store) Backend() Backend { return s.b }

// Collections returns the backend's collections, documents and chunks, and whether it keeps any (it is a
// [CollectionBackend]). The collection store checks ids, limits and metadata before the backend sees a
// call, and returns ErrClosed after the Store's Close.
func (s *Store) Collections() (collection.Store, bool) { return s.colls, s.colls != nil }

// check returns ErrClosed after Close, ctx's error once it is done, or the error of the first pair of kind
// and id that ValidateID refuses.
func (s *Store) check(ctx context.Context, kindsAndIDs ...string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := validateIDs(s.limits, kindsAndIDs...); err != nil {
		return err
	}
	return ctx.Err()
}

// PutAgent creates or replaces the agent a.ID, with UpdatedAt set (now, if zero). It returns an error
// wrapping ErrInvalid or ErrTooLarge for a bad id, tools (see [CheckToolName]) or budget.
func (s *Store) PutAgent(ctx context.Context, tenant string, a Agent) error {
	if err := s.check(ctx, "tenant", tenant); err != nil {
		return err
	}
	a, err := prepareAgent(s.limits, s.now(), a)
	if err != nil {
		return err
	}
	return s.b.PutAgent(ctx, tenant, a)
}

// InTenant returns err, if it is a not-found error, saying which tenant looked: a caller that named the
// right id under the wrong tenant sees why it is not there. Other errors (and nil) it returns as they are.
func InTenant(tenant string, err error) error {
	if err != nil && errors.Is(err, loom.ErrNotFound) {
		return fmt.Errorf("%w (tenant %s)", err, strconv.Quote(tenant))
	}
	return err
}

// GetAgent returns the agent; an error wrapping ErrNotFound when there is none.
func (s *Store) GetAgent(ctx context.Context, tenant, id string) (Agent, error) {
	if err := s.check(ctx, "tenant", tenant, "agent", id); err != nil {
		return Agent{}, err
	}
	a, err := s.b.GetAgent(ctx, tenant, id)
	return a, InTenant(tenant, err)
}

// DeleteAgent deletes the agent; an error wrapping ErrNotFound when there is none.
func (s *Store) DeleteAgent(ctx context.Context, tenant, id string) error {
	if err := s.check(ctx, "tenant", tenant, "agent", id); err != nil {
		return err
	}
	return InTenant(tenant, s.b.DeleteAgent(ctx, tenant, id))
}

// SetFact creates or replaces the fact f.Key of user; a zero UpdatedAt becomes now. (The Valkey cookbook's
// layout keeps only the value.)
func (s *Store) SetFact(ctx context.Context, tenant, user string, f Fact) error {
	if err := s.check(ctx, "tenant", tenant, "user", user); err != nil {
		return err
	}
	f, err := prepareFact(s.limits, s.now(), f)
	if err != nil {
		return err
	}
	return s.b.SetFact(ctx, tenant, user, f)
}

// Facts returns the user's facts ordered by key (in the backend's own order for an [OrderedFacts] one);
// none, and no error, for an unknown user.
func (s *Store) Facts(ctx context.Context, tenant, user string) ([]Fact, error) {
	if err := s.check(ctx, "tenant", tenant, "user", user); err != nil {
		return nil, err
	}
	facts, err := s.b.Facts(ctx, tenant, user)
	if err != nil {
		return nil, err
	}
	if s.sorted {
		SortFacts(facts)
	}
	return facts, nil
}

// DeleteFact deletes the fact; an error wrapping ErrNotFound when the user has no such fact.
func (s *Store) DeleteFact(ctx context.Context, tenant, user, key string) error {
	if err := s.check(ctx, "tenant", tenant, "user", user, "fact key", key); err != nil {
		return err
	}
	return InTenant(tenant, s.b.DeleteFact(ctx, tenant, user, key))
}

// AppendMessages appends msgs to the session atomically, in order, after validating them and counting
// their tokens; it returns them as stored, with Seq, Time (now, if zero) and TokenCounts set: counted for
// CountedEncodings, whatever counts were given (they are not trusted). Roles are user, assistant, tool and
// system; a tool message needs its tool_call_id; a name is at most Limits.MaxIDBytes; content may be blank
// only in a tool message and in an assistant message with tool calls; tool calls need an id, a name that
// providers accept (CheckToolName) and JSON arguments, and their type is "function" (set if empty).
// Concurrent appends to one session lose nothing and never interleave within one call. A session
// expires the backend's SessionTTL after its last write (if it has one), and then starts again from seq 1.
// Errors wrap ErrInvalid or ErrTooLarge for bad messages, and then none of them is stored.
func (s *Store) AppendMessages(ctx context.Context, tenant, session string, msgs ...Message) ([]Message, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return nil, err
	}
	msgs, err := prepareMessages(s.limits, s.now(), msgs)
	if err != nil {
		return nil, err
	}
	return s.b.AppendMessages(ctx, tenant, session, msgs)
}

// Messages returns the session's newest messages that q selects (see [SelectMessages]), oldest first;
// none for an unknown session. With MaxTokens it reads the newest first and stops at the first that does
// not fit. It returns an error wrapping ErrInvalid for a bad query.
func (s *Store) Messages(ctx context.Context, tenant, session string, q MessageQuery) ([]Message, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return nil, err
	}
	if err := CheckMessageQuery(q); err != nil {
		return nil, err
	}
	msgs, _, err := s.messages(ctx, tenant, session, q)
	return msgs, err
}

// messages answers a checked q: by the backend if it can, else by pages of ReadMessages.
func (s *Store) messages(ctx context.Context, tenant, session string, q MessageQuery) ([]Message, int64, error) {
	if s.sel != nil {
		return s.sel.SelectMessages(ctx, tenant, session, q)
	}
	return ReadNewest(q, func(before int64, n int) ([]Message, int64, error) {
		return s.b.ReadMessages(ctx, tenant, session, before, n)
	})
}

// AppendToolOutput appends one tool step (its tool name checked by [CheckToolName]) and returns it with Seq
// and Time set.
func (s *Store) AppendToolOutput(ctx context.Context, tenant, session string, o ToolOutput) (ToolOutput, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return ToolOutput{}, err
	}
	o, err := prepareToolOutput(s.limits, s.now(), o)
	if err != nil {
		return ToolOutput{}, err
	}
	return s.b.AppendToolOutput(ctx, tenant, session, o)
}

// ToolOutputs returns the session's tool steps in order.
func (s *Store) ToolOutputs(ctx context.Context, tenant, session string) ([]ToolOutput, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return nil, err
	}
	return s.b.ToolOutputs(ctx, tenant, session)
}

// SetKnowledge replaces the session's pre-retrieved knowledge (nil clears it), each item's content counted as
// the assembler renders it (assembler.KnowledgeCounts; counts given are not kept), so that an assembly
// does not count it again.
func (s *Store) SetKnowledge(ctx context.Context, tenant, session string, items []Knowledge) error {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return err
	}
	items, err := prepareKnowledge(s.limits, items)
	if err != nil {
		return err
	}
	return s.b.SetKnowledge(ctx, tenant, session, items)
}

// Knowledge returns the session's pre-retrieved knowledge in the order it was set.
func (s *Store) Knowledge(ctx context.Context, tenant, session string) ([]Knowledge, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return nil, err
	}
	return s.b.Knowledge(ctx, tenant, session)
}

// DeleteSession deletes the session's messages, tool outputs and knowledge. It returns an error wrapping
// ErrNotFound when the session has none of them.
func (s *Store) DeleteSession(ctx context.Context, tenant, session string) error {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return err
	}
	return InTenant(tenant, s.b.DeleteSession(ctx, tenant, session))
}

// Load reads everything one assembly needs, the sources q names (empty ids are skipped): in one read
// where the backend can (a [Loader]: one round trip per server for Valkey, one read transaction for
// SQLite). Errors of single sources are in the Snapshot (an agent that does not exist has ErrNotFound
// there); the error it returns is for the whole read (the store is unreachable, ctx expired, a bad id or
// query).
func (s *Store) Load(ctx context.Context, tenant string, q LoadQuery) (*Snapshot, error) {
	if err := s.check(ctx, "tenant", tenant); err != nil {
		return nil, err
	}
	for _, p := range [...][2]string{{"agent", q.Agent}, {"user", q.User}, {"session", q.Session}} {
		if p[1] != "" {
			if err := ValidateID(s.limits, p[0], p[1]); err != nil {
				return nil, err
			}
		}
	}
	history := q.History()
	if err := CheckMessageQuery(history); err != nil {
		return nil, err
	}
	var snap *Snapshot
	var err error
	if s.loader != nil {
		snap, err = s.loader.Load(ctx, tenant, q)
	} else {
		snap, err = s.loadEach(ctx, tenant, q, history)
	}
	if err != nil {
		return nil, err
	}
	if snap.Errors == nil {
		snap.Errors = map[Source]error{}
	}
	for src, err := range snap.Errors {
		snap.Errors[src] = InTenant(tenant, err)
	}
	if s.sorted {
		SortFacts(snap.Facts)
	}
	return snap, nil
}

// loadEach is Load for a backend that is no Loader: the sources one after another.
func (s *Store) loadEach(ctx context.Context, tenant string, q LoadQuery, history MessageQuery) (*Snapshot, error) {
	snap := &Snapshot{Errors: map[Source]error{}}
	// source records err for src if it is the source's own, and returns it if it ends the whole read.
	source := func(src Source, err error) error {
		if err == nil || wholeRead(err) {
			return err
		}
		snap.Errors[src] = err
		return nil
	}
	if q.Agent != "" {
		a, err := s.b.GetAgent(ctx, tenant, q.Agent)
		if err := source(SourceAgent, err); err != nil {
			return nil, err
		}
		if err == nil {
			snap.Agent = &a
		}
	}
	if q.User != "" {
		facts, err := s.b.Facts(ctx, tenant, q.User)
		if err := source(SourceMemory, err); err != nil {
			return nil, err
		}
		snap.Facts = facts
	}
	if q.Session == "" {
		return snap, nil
	}
	msgs, next, err := s.messages(ctx, tenant, q.Session, history)
	if err := source(SourceHistory, err); err != nil {
		return nil, err
	}
	snap.Messages, snap.NextBefore = msgs, next
	outs, err := s.b.ToolOutputs(ctx, tenant, q.Session)
	if err := source(SourceToolOutputs, err); err != nil {
		return nil, err
	}
	snap.ToolOutputs = outs
	items, err := s.b.Knowledge(ctx, tenant, q.Session)
	if err := source(SourceKnowledge, err); err != nil {
		return nil, err
	}
	snap.Knowledge = items
	if sb, ok := s.b.(SummaryBackend); ok && q.Summary {
		sum, err := sb.Summary(ctx, tenant, q.Session)
		switch {
		case err == nil:
			snap.Summary = &sum
		case errors.Is(err, ErrNotFound):
		default:
			if err := source(SourceSummary, err); err != nil {
				return nil, err
			}
		}
	}
	if s.caches != nil && q.CacheState {
		state, err := s.caches.CacheState(ctx, tenant, q.Session)
		switch {
		case err == nil:
			snap.CacheState = state
		case errors.Is(err, ErrNotFound):
		default:
			if err := source(SourceCacheState, err); err != nil {
				return nil, err
			}
		}
	}
	return snap, nil
}

// wholeRead reports whether err ends a whole Load rather than one source of it.
func wholeRead(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Ping checks that the store is reachable; it returns an error wrapping ErrUnavailable if not, and
// ErrClosed after Close.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.b.Ping(ctx)
}

// Close closes the backend. Calls after Close return ErrClosed; Close itself may be called again, and then
// returns nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.b.Close()
}
