package storetest

import (
	"bytes"
	"testing"

	"github.com/context-loom/loom/store"
)

// testCacheStates checks a session's cache state: one per session, replaced by each write, read by Load
// when asked, the tenant's alone, deleted with its session, and bounded in size.
func testCacheStates(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	if !s.CacheStates() {
		_, err := s.CacheState(ctx, tenant, "s")
		wantErr(t, err, store.ErrUnsupported, "CacheState of a store that keeps none")
		wantErr(t, s.PutCacheState(ctx, tenant, "s", []byte("x")), store.ErrUnsupported, "PutCacheState of a store that keeps none")
		return
	}
	_, err := s.CacheState(ctx, tenant, "s")
	wantErr(t, err, store.ErrNotFound, "CacheState of an unknown session")
	wantErr(t, s.PutCacheState(ctx, tenant, "s", []byte(`{"a":1}`)), store.ErrNotFound, "PutCacheState of a session without messages")

	must(s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "hello"}))
	_, err = s.CacheState(ctx, tenant, "s")
	wantErr(t, err, store.ErrNotFound, "CacheState of a session never assembled")
	first := []byte(`{"format":"openai","parts":[{"region":"tools","hash":"00ff"}],"x":"\u0000<&>"}`)
	ok(t, s.PutCacheState(ctx, tenant, "s", first))
	if got := must(s.CacheState(ctx, tenant, "s")); !bytes.Equal(got, first) {
		t.Fatalf("read %q, want %q", got, first)
	}
	second := []byte(`{"format":"anthropic"}`)
	ok(t, s.PutCacheState(ctx, tenant, "s", second))
	if got := must(s.CacheState(ctx, tenant, "s")); !bytes.Equal(got, second) {
		t.Fatalf("after a second write, read %q, want %q", got, second)
	}

	// Load reads it when asked to, and only then.
	snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "s", CacheState: true, Summary: true}))
	if !bytes.Equal(snap.CacheState, second) || len(snap.Errors) > 0 {
		t.Fatalf("Load's cache state %q (errors %v), want %q", snap.CacheState, snap.Errors, second)
	}
	if snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "s", CacheState: true})); !bytes.Equal(snap.CacheState, second) {
		t.Fatalf("Load without the summary: cache state %q", snap.CacheState)
	}
	if snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "s"})); snap.CacheState != nil {
		t.Fatal("Load read the cache state unasked")
	}
	if snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "none", CacheState: true})); snap.CacheState != nil || len(snap.Errors) > 0 {
		t.Fatalf("Load of a session without a cache state: %+v", snap)
	}

	// Another tenant's session of the same name: nothing to read, nothing to write.
	_, err = s.CacheState(ctx, "other-tenant", "s")
	wantErr(t, err, store.ErrNotFound, "CacheState of another tenant's session")
	if snap := must(s.Load(ctx, "other-tenant", store.LoadQuery{Session: "s", CacheState: true})); snap.CacheState != nil {
		t.Fatalf("another tenant's Load read %q", snap.CacheState)
	}
	wantErr(t, s.PutCacheState(ctx, "other-tenant", "s", first), store.ErrNotFound, "PutCacheState of another tenant's session")

	// The front's rules, before the backend sees the state.
	wantErr(t, s.PutCacheState(ctx, tenant, "s", nil), store.ErrInvalid, "an empty cache state")
	wantErr(t, s.PutCacheState(ctx, tenant, "s", make([]byte, store.MaxCacheStateBytes+1)), store.ErrTooLarge, "a huge cache state")
	if got := must(s.CacheState(ctx, tenant, "s")); !bytes.Equal(got, second) {
		t.Fatalf("a refused write changed the state to %q", got)
	}

	// The state goes with its session.
	ok(t, s.DeleteSession(ctx, tenant, "s"))
	_, err = s.CacheState(ctx, tenant, "s")
	wantErr(t, err, store.ErrNotFound, "CacheState after DeleteSession")
	must(s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "again"}))
	_, err = s.CacheState(ctx, tenant, "s")
	wantErr(t, err, store.ErrNotFound, "CacheState of a session started again")
}
