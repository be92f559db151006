package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// AssemblyRecord is one assembly recorded in its session for the inspector: what the engine chose to
// keep of it (the request's shape, the result's report and, where they fit, its rendered messages), as
// one JSON value. The store keeps Data as it is given and does not read it.
type AssemblyRecord struct {
	// Seq numbers the session's records: 1, 2, ... in the order they were recorded (a session started
	// again after it expired or was deleted counts from 1 again).
	Seq int64 `json:"seq"`
	// Time is when the record was made, in UTC (to the microsecond, say, as the backend keeps it).
	Time time.Time `json:"time"`
	// Data is the record itself: a JSON value.
	Data json.RawMessage `json:"data"`
}

// AssemblyBackend is implemented by a backend that keeps each session's recent assemblies (see
// [AssemblyRecord]): memory, SQLite and Valkey's native layout do; the Valkey cookbook's layout, which has
// no key for them, does not. The records live and die with their session: a record is a write to it
// (which refreshes its TTL), DeleteSession deletes them, and they expire with it.
type AssemblyBackend interface {
	// RecordAssembly appends rec to the session's records, with the Seq after the newest one's (1 for the
	// first) and rec.Time as the Store set it, then keeps only the newest keep of them (keep is at least
	// 1). It returns rec as stored. It is atomic against every other write of the session, by any server.
	RecordAssembly(ctx context.Context, tenant, session string, rec AssemblyRecord, keep int) (AssemblyRecord, error)
	// Assemblies returns the session's records, newest first; none for an unknown session.
	Assemblies(ctx context.Context, tenant, session string) ([]AssemblyRecord, error)
	// AssemblySessions returns the tenant's live sessions (neither expired nor deleted) that have records,
	// the most recently recorded first (ties by session id), at most limit of them (limit is at least 1).
	AssemblySessions(ctx context.Context, tenant string, limit int) ([]AssemblySession, error)
}

// Assembly records' bounds: how many a session keeps, and how large one may be.
const (
	// DefaultAssembliesKept is how many of a session's newest assemblies are kept by default.
	DefaultAssembliesKept = 20
	// DefaultMaxAssemblyBytes is how large one record may be by default: 256 KiB, so that a session's
	// records take at most DefaultAssembliesKept times that (5 MiB).
	DefaultMaxAssemblyBytes = 256 << 10
)

// Assemblies reports whether the store keeps sessions' recent assemblies (its backend is an
// [AssemblyBackend]).
func (s *Store) Assemblies() bool { return s.asms != nil }

// RecordAssembly records one assembly of the session: data (a JSON value of at most maxBytes, at most
// Limits.MaxValueBytes) stored with the session's next record seq and the time now, keeping only the
// newest keep records of the session. It returns the record as stored. keep and maxBytes of 0 or less
// mean DefaultAssembliesKept and DefaultMaxAssemblyBytes. Errors wrap ErrInvalid (data that is not JSON),
// ErrTooLarge (data over the bound, checked before the backend sees it) or ErrUnsupported (a backend
// that keeps no records).
func (s *Store) RecordAssembly(ctx context.Context, tenant, session string, data []byte, keep, maxBytes int) (AssemblyRecord, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return AssemblyRecord{}, err
	}
	if s.asms == nil {
		return AssemblyRecord{}, fmt.Errorf("%w: assembly records", ErrUnsupported)
	}
	if keep <= 0 {
		keep = DefaultAssembliesKept
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAssemblyBytes
	}
	maxBytes = min(maxBytes, s.limits.MaxValueBytes)
	if len(data) > maxBytes {
		return AssemblyRecord{}, fmt.Errorf("%w: assembly record of %d bytes (limit %d)", ErrTooLarge, len(data), maxBytes)
	}
	if !json.Valid(data) {
		return AssemblyRecord{}, fmt.Errorf("%w: an assembly record is not JSON", ErrInvalid)
	}
	rec := AssemblyRecord{Time: s.now().UTC(), Data: append(json.RawMessage(nil), data...)}
	return s.asms.RecordAssembly(ctx, tenant, session, rec, keep)
}

// AssemblyRecords returns the session's recorded assemblies, newest first; none for an unknown session,
// and an error wrapping ErrUnsupported for a backend that keeps none.
func (s *Store) AssemblyRecords(ctx context.Context, tenant, session string) ([]AssemblyRecord, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return nil, err
	}
	if s.asms == nil {
		return nil, fmt.Errorf("%w: assembly records", ErrUnsupported)
	}
	return s.asms.Assemblies(ctx, tenant, session)
}

// AssemblyRecord returns the session's record seq; an error wrapping ErrNotFound when it has none of that
// seq (never recorded, or no longer kept), ErrUnsupported for a backend that keeps none.
func (s *Store) AssemblyRecord(ctx context.Context, tenant, session string, seq int64) (AssemblyRecord, error) {
	recs, err := s.AssemblyRecords(ctx, tenant, session)
	if err != nil {
		return AssemblyRecord{}, err
	}
	for _, r := range recs {
		if r.Seq == seq {
			return r, nil
		}
	}
	return AssemblyRecord{}, InTenant(tenant, fmt.Errorf("assembly %d of session %q: %w", seq, session, ErrNotFound))
}

// AssemblySession sums up one session's recorded assemblies in a listing of a tenant's sessions (see
// [Store.AssemblySessions]).
type AssemblySession struct {
	Session string `json:"session"`
	// Assemblies is how many records the session keeps.
	Assemblies int `json:"assemblies"`
	// LastSeq and LastTime are its newest record's seq and time.
	LastSeq  int64     `json:"last_seq"`
	LastTime time.Time `json:"last_time"`
}

// Listing the sessions that have records.
const (
	// DefaultAssemblySessions is how many sessions AssemblySessions lists with a limit of 0.
	DefaultAssemblySessions = 50
	// MaxAssemblySessions is the largest limit AssemblySessions takes; a larger one is refused, not cut.
	MaxAssemblySessions = 200
)

// AssemblySessions lists the tenant's sessions that have recorded assemblies, the most recently recorded
// first (ties by session id), at most limit of them (0: DefaultAssemblySessions). A session deleted or
// expired is not listed. Errors wrap ErrInvalid (a limit below 0 or over MaxAssemblySessions) or
// ErrUnsupported (a backend that keeps no records).
func (s *Store) AssemblySessions(ctx context.Context, tenant string, limit int) ([]AssemblySession, error) {
	if err := s.check(ctx, "tenant", tenant); err != nil {
		return nil, err
	}
	if limit < 0 || limit > MaxAssemblySessions {
		return nil, fmt.Errorf("%w: a listing of sessions takes a limit from 1 to %d, not %d", ErrInvalid, MaxAssemblySessions, limit)
	}
	if s.asms == nil {
		return nil, fmt.Errorf("%w: assembly records", ErrUnsupported)
	}
	if limit == 0 {
		limit = DefaultAssemblySessions
	}
	return s.asms.AssemblySessions(ctx, tenant, limit) // in order, at most limit: the backend's contract
}

// CompareAssemblySessions is the order of a listing of sessions by their records: the most recently
// recorded first, ties by session id.
func CompareAssemblySessions(a, b AssemblySession) int {
	if c := b.LastTime.Compare(a.LastTime); c != 0 {
		return c
	}
	return strings.Compare(a.Session, b.Session)
}
