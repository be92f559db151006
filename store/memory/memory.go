// Package memory is an in-process store: everything in maps behind one lock, gone when the process ends.
// It is for tests and for embedding Loom where nothing needs to outlive the process.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/context-loom/loom/store"
)

// Store is an in-process store.Store. It is safe for concurrent use.
type Store struct {
	opts store.Options
	now  func() time.Time

	mu       sync.RWMutex
	closed   bool
	agents   map[key]store.Agent
	facts    map[key]map[string]store.Fact
	sessions map[key]*session

	colls collections // collection.Store (collections.go); its zero value is ready
}

var _ store.Store = (*Store)(nil)

// key scopes an id by tenant.
type key struct{ tenant, id string }

type session struct {
	msgs      []store.Message
	tools     []store.ToolOutput
	knowledge []store.Knowledge
	expires   time.Time // zero: never
}

// New returns an empty store.
func New(opts store.Options) *Store {
	opts.Limits = opts.Limits.WithDefaults()
	s := &Store{opts: opts, now: time.Now, agents: map[key]store.Agent{}, facts: map[key]map[string]store.Fact{}, sessions: map[key]*session{}}
	s.colls.kept = opts.ChangesKeptOrDefault()
	return s
}

// check returns an error if the store is closed or ctx is done; the caller holds mu.
func (s *Store) check(ctx context.Context) error {
	if s.closed {
		return store.ErrClosed
	}
	return ctx.Err()
}

// PutAgent implements store.AgentStore.
func (s *Store) PutAgent(ctx context.Context, tenant string, a store.Agent) error {
	if err := store.ValidateID(s.opts.Limits, "tenant", tenant); err != nil {
		return err
	}
	a, err := store.PrepareAgent(s.opts.Limits, s.now(), a)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	s.agents[key{tenant, a.ID}] = a
	return nil
}

// GetAgent implements store.AgentStore.
func (s *Store) GetAgent(ctx context.Context, tenant, id string) (store.Agent, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "agent", id); err != nil {
		return store.Agent{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return store.Agent{}, err
	}
	a, ok := s.agents[key{tenant, id}]
	if !ok {
		return store.Agent{}, fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	}
	a.Tools = slices.Clone(a.Tools)
	return a, nil
}

// DeleteAgent implements store.AgentStore.
func (s *Store) DeleteAgent(ctx context.Context, tenant, id string) error {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "agent", id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := s.agents[key{tenant, id}]; !ok {
		return fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	}
	delete(s.agents, key{tenant, id})
	return nil
}

// SetFact implements store.MemoryStore.
func (s *Store) SetFact(ctx context.Context, tenant, user string, f store.Fact) error {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "user", user); err != nil {
		return err
	}
	f, err := store.PrepareFact(s.opts.Limits, s.now(), f)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	k := key{tenant, user}
	if s.facts[k] == nil {
		s.facts[k] = map[string]store.Fact{}
	}
	s.facts[k][f.Key] = f
	return nil
}

// Facts implements store.MemoryStore.
func (s *Store) Facts(ctx context.Context, tenant, user string) ([]store.Fact, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "user", user); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.factsLocked(key{tenant, user}), nil
}

func (s *Store) factsLocked(k key) []store.Fact {
	out := slices.Collect(maps.Values(s.facts[k]))
	store.SortFacts(out)
	return out
}

// DeleteFact implements store.MemoryStore.
func (s *Store) DeleteFact(ctx context.Context, tenant, user, factKey string) error {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "user", user, "fact key", factKey); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	k := key{tenant, user}
	if _, ok := s.facts[k][factKey]; !ok {
		return fmt.Errorf("fact %q: %w", factKey, store.ErrNotFound)
	}
	delete(s.facts[k], factKey)
	if len(s.facts[k]) == 0 {
		delete(s.facts, k)
	}
	return nil
}

// live returns the session, or nil if it does not exist or has expired (and then forgets it if it may
// write); the caller holds mu.
func (s *Store) live(k key, write bool) *session {
	ss := s.sessions[k]
	if ss != nil && !ss.expires.IsZero() && !s.now().Before(ss.expires) {
		if write {
			delete(s.sessions, k)
		}
		return nil
	}
	return ss
}

// touch returns the session for a write, created if need be, with its expiry refreshed.
func (s *Store) touch(k key) *session {
	ss := s.live(k, true)
	if ss == nil {
		ss = &session{}
		s.sessions[k] = ss
	}
	if s.opts.SessionTTL > 0 {
		ss.expires = s.now().Add(s.opts.SessionTTL)
	}
	return ss
}

// AppendMessages implements store.SessionStore.
func (s *Store) AppendMessages(ctx context.Context, tenant, sessionID string, msgs ...store.Message) ([]store.Message, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "session", sessionID); err != nil {
		return nil, err
	}
	msgs, err := store.PrepareMessages(s.opts.Limits, s.now(), msgs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	ss := s.touch(key{tenant, sessionID})
	for i := range msgs {
		msgs[i].Seq = int64(len(ss.msgs) + 1)
		ss.msgs = append(ss.msgs, msgs[i])
	}
	return cloneMessages(msgs), nil
}

// Messages implements store.SessionStore: it copies only the messages q selects.
func (s *Store) Messages(ctx context.Context, tenant, sessionID string, q store.MessageQuery) ([]store.Message, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "session", sessionID); err != nil {
		return nil, err
	}
	if err := store.CheckMessageQuery(q); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	ss := s.live(key{tenant, sessionID}, false)
	if ss == nil {
		return nil, nil
	}
	return cloneMessages(store.SelectMessages(ss.msgs, q)), nil
}

func cloneMessages(msgs []store.Message) []store.Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
		out[i].TokenCounts = maps.Clone(out[i].TokenCounts)
	}
	return out
}

// AppendToolOutput implements store.SessionStore.
func (s *Store) AppendToolOutput(ctx context.Context, tenant, sessionID string, o store.ToolOutput) (store.ToolOutput, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "session", sessionID); err != nil {
		return store.ToolOutput{}, err
	}
	o, err := store.PrepareToolOutput(s.opts.Limits, s.now(), o)
	if err != nil {
		return store.ToolOutput{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return store.ToolOutput{}, err
	}
	ss := s.touch(key{tenant, sessionID})
	o.Seq = int64(len(ss.tools) + 1)
	ss.tools = append(ss.tools, o)
	return o, nil
}

// ToolOutputs implements store.SessionStore.
func (s *Store) ToolOutputs(ctx context.Context, tenant, sessionID string) ([]store.ToolOutput, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "session", sessionID); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if ss := s.live(key{tenant, sessionID}, false); ss != nil {
		return slices.Clone(ss.tools), nil
	}
	return nil, nil
}

// SetKnowledge implements store.SessionStore.
func (s *Store) SetKnowledge(ctx context.Context, tenant, sessionID string, items []store.Knowledge) error {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "session", sessionID); err != nil {
		return err
	}
	items, err := store.PrepareKnowledge(s.opts.Limits, s.opts.CountKnowledge, items)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	s.touch(key{tenant, sessionID}).knowledge = items
	return nil
}

// Knowledge implements store.SessionStore.
func (s *Store) Knowledge(ctx context.Context, tenant, sessionID string) ([]store.Knowledge, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "session", sessionID); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if ss := s.live(key{tenant, sessionID}, false); ss != nil {
		return cloneKnowledge(ss.knowledge), nil
	}
	return nil, nil
}

func cloneKnowledge(items []store.Knowledge) []store.Knowledge {
	out := slices.Clone(items)
	for i := range out {
		out[i].Metadata = maps.Clone(out[i].Metadata)
		out[i].TokenCounts = maps.Clone(out[i].TokenCounts)
	}
	return out
}

// DeleteSession implements store.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, tenant, sessionID string) error {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "session", sessionID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	k := key{tenant, sessionID}
	ss := s.live(k, true)
	if ss == nil || len(ss.msgs)+len(ss.tools)+len(ss.knowledge) == 0 {
		return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	}
	delete(s.sessions, k)
	return nil
}

// Load implements store.Loader: it reads every source under one lock.
func (s *Store) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	if err := store.ValidateID(s.opts.Limits, "tenant", tenant); err != nil {
		return nil, err
	}
	for _, p := range [][2]string{{"agent", q.Agent}, {"user", q.User}, {"session", q.Session}} {
		if p[1] != "" {
			if err := store.ValidateID(s.opts.Limits, p[0], p[1]); err != nil {
				return nil, err
			}
		}
	}
	history := q.History()
	if err := store.CheckMessageQuery(history); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	snap := &store.Snapshot{Errors: map[store.Source]error{}}
	if q.Agent != "" {
		if a, ok := s.agents[key{tenant, q.Agent}]; ok {
			a.Tools = slices.Clone(a.Tools)
			snap.Agent = &a
		} else {
			snap.Errors[store.SourceAgent] = fmt.Errorf("agent %q: %w", q.Agent, store.ErrNotFound)
		}
	}
	if q.User != "" {
		snap.Facts = s.factsLocked(key{tenant, q.User})
	}
	if q.Session != "" {
		if ss := s.live(key{tenant, q.Session}, false); ss != nil {
			msgs, next := store.SelectPage(ss.msgs, history)
			snap.Messages, snap.NextBefore = cloneMessages(msgs), next
			snap.ToolOutputs = slices.Clone(ss.tools)
			snap.Knowledge = cloneKnowledge(ss.knowledge)
		}
	}
	return snap, nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.check(ctx)
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
