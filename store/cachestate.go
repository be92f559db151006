package store

import (
	"context"
	"fmt"
)

// MaxCacheStateBytes is the most bytes a session's cache state may have (see [Store.PutCacheState]): the
// hashes and counts of a few prompt parts take a few hundred.
const MaxCacheStateBytes = 4096

// CacheStateBackend is implemented by a backend that keeps, per session, the cache state of its last
// assembly: the hashes of the prompt's stable parts that the next assembly compares its own with, to say
// why a call missed the provider's prompt cache. Memory, SQLite and Valkey's native layout do; the Valkey
// cookbook's layout, which has no key for it, does not. One state per session, opaque to the store, which
// lives and dies with the session: DeleteSession deletes it, and it expires with the session's messages.
type CacheStateBackend interface {
	// CacheState returns the session's state as PutCacheState stored it; ErrNotFound when there is none.
	CacheState(ctx context.Context, tenant, session string) ([]byte, error)
	// PutCacheState replaces the session's state with state. A session without messages (none, or
	// expired) is ErrNotFound.
	PutCacheState(ctx context.Context, tenant, session string, state []byte) error
}

// CacheStates reports whether the store keeps sessions' cache states (its backend is a
// [CacheStateBackend]).
func (s *Store) CacheStates() bool { return s.caches != nil }

// CacheState returns the cache state of the session's last assembly (see [CacheStateBackend]); an error
// wrapping ErrNotFound when there is none, ErrUnsupported when the backend keeps none.
func (s *Store) CacheState(ctx context.Context, tenant, session string) ([]byte, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return nil, err
	}
	if s.caches == nil {
		return nil, fmt.Errorf("%w: cache states", ErrUnsupported)
	}
	b, err := s.caches.CacheState(ctx, tenant, session)
	return b, InTenant(tenant, err)
}

// PutCacheState replaces the session's cache state with state, which must not be empty (ErrInvalid) nor
// longer than MaxCacheStateBytes (ErrTooLarge). A session without messages is ErrNotFound; a backend that
// keeps no cache states, ErrUnsupported.
func (s *Store) PutCacheState(ctx context.Context, tenant, session string, state []byte) error {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return err
	}
	if s.caches == nil {
		return fmt.Errorf("%w: cache states", ErrUnsupported)
	}
	switch {
	case len(state) == 0:
		return fmt.Errorf("%w: an empty cache state", ErrInvalid)
	case len(state) > MaxCacheStateBytes:
		return fmt.Errorf("%w: a cache state of %d bytes (limit %d)", ErrTooLarge, len(state), MaxCacheStateBytes)
	}
	return InTenant(tenant, s.caches.PutCacheState(ctx, tenant, session, state))
}
