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

// Options configure a memory store: the settings every store takes (its SessionTTL, Limits
// and ChangesKept); a memory store has none of its own.
type Options struct {
	store.Options
}

// Open returns an empty in-process store: a store.Store over a new [Backend]. It does no I/O (ctx is there
// for the shape of every backend's Open) and fails only for options store.New refuses.
func Open(ctx context.Context, opts Options) (*store.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return store.New(newBackend(opts), opts.Options)
}

// Backend is the store.Backend under a memory store: everything in maps behind one lock. It is also a
// store.MessageSelector and a store.Loader (it copies only what a query selects, and loads under one
// lock) and a store.CollectionBackend.
type Backend struct {
	opts store.Options
	now  func() time.Time

	mu       sync.RWMutex
	agents   map[key]store.Agent
	facts    map[key]map[string]store.Fact
	sessions map[key]*session

	colls collections // collection.Store (collections.go); its zero value is ready

	// unlocked, when a test sets it, runs where a read has let go of mu and copies what it selected.
	unlocked func()
}

var (
	_ store.Backend           = (*Backend)(nil)
	_ store.MessageSelector   = (*Backend)(nil)
	_ store.Loader            = (*Backend)(nil)
	_ store.CollectionBackend = (*Backend)(nil)
	_ store.SummaryBackend    = (*Backend)(nil)
	_ store.CacheStateBackend = (*Backend)(nil)
	_ store.AssemblyBackend   = (*Backend)(nil)
)

// key scopes an id by tenant.
type key struct{ tenant, id string }

type session struct {
	msgs      []store.Message
	tools     []store.ToolOutput
	knowledge []store.Knowledge
	summary   *store.Summary
	cache     []byte                 // the cache state (store.CacheStateBackend)
	asms      []store.AssemblyRecord // oldest first
	expires   time.Time              // zero: never
}

func newBackend(opts Options) *Backend {
	b := &Backend{opts: opts.Options, now: time.Now, agents: map[key]store.Agent{}, facts: map[key]map[string]store.Fact{}, sessions: map[key]*session{}}
	b.colls.kept = opts.ChangesKeptOrDefault()
	return b
}

// PutAgent implements store.Backend.
func (s *Backend) PutAgent(_ context.Context, tenant string, a store.Agent) error {
	a.Tools = slices.Clone(a.Tools)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agents[key{tenant, a.ID}] = a
	return nil
}

// GetAgent implements store.Backend.
func (s *Backend) GetAgent(_ context.Context, tenant, id string) (store.Agent, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.agentLocked(tenant, id)
}

func (s *Backend) agentLocked(tenant, id string) (store.Agent, error) {
	a, ok := s.agents[key{tenant, id}]
	if !ok {
		return store.Agent{}, fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	}
	a.Tools = slices.Clone(a.Tools)
	return a, nil
}

// DeleteAgent implements store.Backend.
func (s *Backend) DeleteAgent(_ context.Context, tenant, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.agents[key{tenant, id}]; !ok {
		return fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	}
	delete(s.agents, key{tenant, id})
	return nil
}

// SetFact implements store.Backend.
func (s *Backend) SetFact(_ context.Context, tenant, user string, f store.Fact) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{tenant, user}
	if s.facts[k] == nil {
		s.facts[k] = map[string]store.Fact{}
	}
	s.facts[k][f.Key] = f
	return nil
}

// Facts implements store.Backend.
func (s *Backend) Facts(_ context.Context, tenant, user string) ([]store.Fact, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Collect(maps.Values(s.facts[key{tenant, user}])), nil
}

// DeleteFact implements store.Backend.
func (s *Backend) DeleteFact(_ context.Context, tenant, user, factKey string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
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
func (s *Backend) live(k key, write bool) *session {
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
func (s *Backend) touch(k key) *session {
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

// AppendMessages implements store.Backend.
func (s *Backend) AppendMessages(_ context.Context, tenant, sessionID string, msgs []store.Message) ([]store.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(key{tenant, sessionID})
	for i := range msgs {
		msgs[i].Seq = int64(len(ss.msgs) + 1)
		ss.msgs = append(ss.msgs, msgs[i])
	}
	return cloneMessages(msgs), nil
}

// ReadMessages implements store.Backend.
func (s *Backend) ReadMessages(_ context.Context, tenant, sessionID string, before int64, n int) ([]store.Message, int64, error) {
	return s.selectMessages(tenant, sessionID, store.MessageQuery{Before: before, Limit: n})
}

// SelectMessages implements store.MessageSelector: it copies only the messages q selects.
func (s *Backend) SelectMessages(_ context.Context, tenant, sessionID string, q store.MessageQuery) ([]store.Message, int64, error) {
	return s.selectMessages(tenant, sessionID, q)
}

// selectMessages selects under the read lock and copies after it: a session's messages are only ever
// appended, and a stored one is never changed, so the selected part of the slice stays as it was while
// AppendMessages writes past its end or moves the session to a larger array. Copying a long page
// under the lock is what made an append wait for a background compaction's read.
func (s *Backend) selectMessages(tenant, sessionID string, q store.MessageQuery) ([]store.Message, int64, error) {
	s.mu.RLock()
	ss := s.live(key{tenant, sessionID}, false)
	if ss == nil {
		s.mu.RUnlock()
		return nil, 0, nil
	}
	msgs, next := store.SelectPage(ss.msgs, q)
	s.mu.RUnlock()
	if s.unlocked != nil {
		s.unlocked()
	}
	return cloneMessages(msgs), next, nil
}

func cloneMessages(msgs []store.Message) []store.Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
		out[i].TokenCounts = maps.Clone(out[i].TokenCounts)
		out[i].Parts = store.CloneParts(out[i].Parts)
	}
	return out
}

// AppendToolOutput implements store.Backend.
func (s *Backend) AppendToolOutput(_ context.Context, tenant, sessionID string, o store.ToolOutput) (store.ToolOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(key{tenant, sessionID})
	o.Seq = int64(len(ss.tools) + 1)
	ss.tools = append(ss.tools, o)
	return o, nil
}

// ToolOutputs implements store.Backend.
func (s *Backend) ToolOutputs(_ context.Context, tenant, sessionID string) ([]store.ToolOutput, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ss := s.live(key{tenant, sessionID}, false); ss != nil {
		return slices.Clone(ss.tools), nil
	}
	return nil, nil
}

// SetKnowledge implements store.Backend.
func (s *Backend) SetKnowledge(_ context.Context, tenant, sessionID string, items []store.Knowledge) error {
	items = cloneKnowledge(items)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key{tenant, sessionID}).knowledge = items
	return nil
}

// Knowledge implements store.Backend.
func (s *Backend) Knowledge(_ context.Context, tenant, sessionID string) ([]store.Knowledge, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
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

// DeleteSession implements store.Backend.
func (s *Backend) DeleteSession(_ context.Context, tenant, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{tenant, sessionID}
	ss := s.live(k, true)
	if ss == nil || len(ss.msgs)+len(ss.tools)+len(ss.knowledge)+len(ss.asms) == 0 {
		return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	}
	delete(s.sessions, k)
	return nil
}

// Load implements store.Loader: it reads every source under one lock, and copies the session's messages
// and tool outputs after it (both are only ever appended to: see selectMessages).
func (s *Backend) Load(_ context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	snap := &store.Snapshot{Errors: map[store.Source]error{}}
	var msgs []store.Message
	var tools []store.ToolOutput
	s.mu.RLock()
	if q.Agent != "" {
		if a, err := s.agentLocked(tenant, q.Agent); err != nil {
			snap.Errors[store.SourceAgent] = err
		} else {
			snap.Agent = &a
		}
	}
	if q.User != "" {
		snap.Facts = slices.Collect(maps.Values(s.facts[key{tenant, q.User}]))
	}
	if q.Session != "" {
		if ss := s.live(key{tenant, q.Session}, false); ss != nil {
			msgs, snap.NextBefore = store.SelectPage(ss.msgs, q.History())
			tools = ss.tools[:len(ss.tools):len(ss.tools)]
			snap.Knowledge = cloneKnowledge(ss.knowledge)
			if q.Summary && ss.summary != nil {
				sum := *ss.summary
				snap.Summary = &sum
			}
			if q.CacheState && ss.cache != nil {
				snap.CacheState = slices.Clone(ss.cache)
			}
		}
	}
	s.mu.RUnlock()
	if s.unlocked != nil {
		s.unlocked()
	}
	snap.Messages, snap.ToolOutputs = cloneMessages(msgs), slices.Clone(tools)
	return snap, nil
}

// Ping implements store.Backend: a memory store is always there.
func (s *Backend) Ping(context.Context) error { return nil }

// Close implements store.Backend: it keeps what it holds (a Store closed returns store.ErrClosed).
func (s *Backend) Close() error { return nil }

// Summary implements store.SummaryBackend.
func (s *Backend) Summary(_ context.Context, tenant, sessionID string) (store.Summary, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ss := s.live(key{tenant, sessionID}, false); ss != nil && ss.summary != nil {
		return *ss.summary, nil
	}
	return store.Summary{}, fmt.Errorf("summary of session %q: %w", sessionID, store.ErrNotFound)
}

// SwapSummary implements store.SummaryBackend under the store's lock.
func (s *Backend) SwapSummary(_ context.Context, tenant, sessionID string, rev int64, sum store.Summary) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.live(key{tenant, sessionID}, true)
	if ss == nil || len(ss.msgs) == 0 {
		return false, fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	}
	var cur int64
	if ss.summary != nil {
		cur = ss.summary.Rev
	}
	if cur != rev {
		return false, nil
	}
	ss.summary = &sum
	return true, nil
}

// CacheState implements store.CacheStateBackend.
func (s *Backend) CacheState(_ context.Context, tenant, sessionID string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ss := s.live(key{tenant, sessionID}, false); ss != nil && ss.cache != nil {
		return slices.Clone(ss.cache), nil
	}
	return nil, fmt.Errorf("cache state of session %q: %w", sessionID, store.ErrNotFound)
}

// PutCacheState implements store.CacheStateBackend.
func (s *Backend) PutCacheState(_ context.Context, tenant, sessionID string, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.live(key{tenant, sessionID}, true)
	if ss == nil || len(ss.msgs) == 0 {
		return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	}
	ss.cache = slices.Clone(state)
	return nil
}

// RecordAssembly implements store.AssemblyBackend under the store's lock.
func (s *Backend) RecordAssembly(_ context.Context, tenant, sessionID string, rec store.AssemblyRecord, keep int) (store.AssemblyRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(key{tenant, sessionID})
	rec.Seq = 1
	if n := len(ss.asms); n > 0 {
		rec.Seq = ss.asms[n-1].Seq + 1
	}
	rec.Data = slices.Clone(rec.Data)
	ss.asms = append(ss.asms, rec)
	if over := len(ss.asms) - keep; over > 0 {
		ss.asms = slices.Delete(ss.asms, 0, over)
	}
	return rec, nil
}

// Assemblies implements store.AssemblyBackend.
func (s *Backend) Assemblies(_ context.Context, tenant, sessionID string) ([]store.AssemblyRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ss := s.live(key{tenant, sessionID}, false)
	if ss == nil {
		return nil, nil
	}
	out := make([]store.AssemblyRecord, len(ss.asms))
	for i, r := range ss.asms {
		r.Data = slices.Clone(r.Data)
		out[len(out)-1-i] = r
	}
	return out, nil
}

// AssemblySessions implements store.AssemblyBackend: every session of the tenant looked at, under the
// store's read lock.
func (s *Backend) AssemblySessions(_ context.Context, tenant string, limit int) ([]store.AssemblySession, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []store.AssemblySession
	for k := range s.sessions {
		if k.tenant != tenant {
			continue
		}
		ss := s.live(k, false)
		if ss == nil || len(ss.asms) == 0 {
			continue
		}
		last := ss.asms[len(ss.asms)-1]
		out = append(out, store.AssemblySession{Session: k.id, Assemblies: len(ss.asms), LastSeq: last.Seq, LastTime: last.Time})
	}
	slices.SortFunc(out, store.CompareAssemblySessions)
	return out[:min(len(out), limit)], nil
}
