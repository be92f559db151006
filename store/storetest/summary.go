package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/context-loom/loom/store"
)

// swap is SwapSummary that stops the test on an error.
func swap(t *testing.T, s *store.Store, tenant, session string, old, next store.Summary) (store.Summary, bool) {
	t.Helper()
	got, done, err := s.SwapSummary(t.Context(), tenant, session, old, next)
	if err != nil {
		t.Fatalf("SwapSummary: %v", err)
	}
	return got, done
}

func sameSummary(a, b store.Summary) bool {
	return a.Text == b.Text && a.From == b.From && a.To == b.To && a.Model == b.Model && a.Rev == b.Rev &&
		a.UpdatedAt.Equal(b.UpdatedAt) && a.Claim == b.Claim && a.ClaimExpires.Equal(b.ClaimExpires) &&
		a.Failures == b.Failures && a.LastError == b.LastError && a.RetryAt.Equal(b.RetryAt)
}

// testSummaries checks a session's running summary: compare-and-set on its revision, the front's rules on
// the covered range, that it lives and dies with its session, and is the tenant's alone.
func testSummaries(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	if !s.Summaries() {
		_, err := s.Summary(ctx, tenant, "s")
		wantErr(t, err, store.ErrUnsupported, "Summary of a store that keeps none")
		_, _, err = s.SwapSummary(ctx, tenant, "s", store.Summary{}, store.Summary{Claim: "c"})
		wantErr(t, err, store.ErrUnsupported, "SwapSummary of a store that keeps none")
		return
	}
	_, err := s.Summary(ctx, tenant, "s")
	wantErr(t, err, store.ErrNotFound, "Summary of an unknown session")
	_, _, err = s.SwapSummary(ctx, tenant, "s", store.Summary{}, store.Summary{Claim: "c"})
	wantErr(t, err, store.ErrNotFound, "SwapSummary of a session without messages")

	for i := range 6 {
		must(s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: fmt.Sprint("message ", i+1)}))
	}
	_, err = s.Summary(ctx, tenant, "s")
	wantErr(t, err, store.ErrNotFound, "Summary of a session never summarized")

	// A claim, then the summary it made: each write names the revision it read.
	until := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	claimed, done := swap(t, s, tenant, "s", store.Summary{}, store.Summary{Claim: "server-a", ClaimExpires: until})
	if !done || claimed.Rev != 1 || claimed.UpdatedAt.IsZero() {
		t.Fatalf("first swap: done %v, %+v", done, claimed)
	}
	if _, done := swap(t, s, tenant, "s", store.Summary{}, store.Summary{Claim: "server-b"}); done {
		t.Fatal("a second claim over the same revision succeeded")
	}
	got := must(s.Summary(ctx, tenant, "s"))
	if !sameSummary(got, claimed) {
		t.Fatalf("read %+v, want %+v", got, claimed)
	}
	first, done := swap(t, s, tenant, "s", claimed, store.Summary{Text: "The user counted to 4 <&>.", From: 1, To: 4, Model: "m",
		Failures: 0, RetryAt: until})
	if !done || first.Rev != 2 {
		t.Fatalf("summary swap: done %v, %+v", done, first)
	}
	if got := must(s.Summary(ctx, tenant, "s")); !sameSummary(got, first) {
		t.Fatalf("read %+v, want %+v", got, first)
	}

	// The front's rules: an older summary never replaces a newer one.
	for _, bad := range []store.Summary{
		{Text: "older", From: 1, To: 3},
		{Text: "other start", From: 2, To: 5},
		{From: 1, To: 5},
		{Text: "backwards", From: 5, To: 4},
		{Text: "no range"},
	} {
		_, _, err := s.SwapSummary(ctx, tenant, "s", first, bad)
		wantErr(t, err, store.ErrInvalid, fmt.Sprintf("SwapSummary of %+v over one to 4", bad))
	}

	// Of many servers that read one revision, exactly one writes the next.
	var wg sync.WaitGroup
	wins := make(chan int, 8)
	for i := range 8 {
		wg.Go(func() {
			if _, done, err := s.SwapSummary(ctx, tenant, "s", first, store.Summary{Text: fmt.Sprint("by ", i), From: 1, To: 6}); err != nil {
				t.Error(err)
			} else if done {
				wins <- i
			}
		})
	}
	wg.Wait()
	close(wins)
	var winners []int
	for i := range wins {
		winners = append(winners, i)
	}
	if len(winners) != 1 {
		t.Fatalf("%d concurrent swaps of one revision succeeded, want 1", len(winners))
	}
	got = must(s.Summary(ctx, tenant, "s"))
	if got.Rev != 3 || got.Text != fmt.Sprint("by ", winners[0]) || got.To != 6 {
		t.Fatalf("after the race: %+v (winner %d)", got, winners[0])
	}

	// Load reads it when asked to.
	snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "s", Summary: true}))
	if snap.Summary == nil || !sameSummary(*snap.Summary, got) {
		t.Fatalf("Load's summary %+v, want %+v", snap.Summary, got)
	}
	if snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "s"})); snap.Summary != nil {
		t.Fatal("Load read the summary unasked")
	}
	if snap := must(s.Load(ctx, tenant, store.LoadQuery{Session: "none", Summary: true})); snap.Summary != nil || len(snap.Errors) > 0 {
		t.Fatalf("Load of a session without a summary: %+v", snap)
	}

	// Another tenant, another session: nothing.
	_, err = s.Summary(ctx, "other-tenant", "s")
	wantErr(t, err, store.ErrNotFound, "Summary of another tenant's session")
	_, _, err = s.SwapSummary(ctx, "other-tenant", "s", store.Summary{}, store.Summary{Claim: "x"})
	wantErr(t, err, store.ErrNotFound, "SwapSummary of another tenant's session")

	// Too large a text is refused before the backend sees it.
	_, _, err = s.SwapSummary(ctx, tenant, "s", got, store.Summary{Text: string(make([]byte, store.DefaultMaxValueBytes+1)), From: 1, To: 6})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("huge summary: %v", err)
	}

	// The summary goes with its session.
	ok(t, s.DeleteSession(ctx, tenant, "s"))
	must(s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "again"}))
	_, err = s.Summary(ctx, tenant, "s")
	wantErr(t, err, store.ErrNotFound, "Summary after DeleteSession")
	if _, done := swap(t, s, tenant, "s", store.Summary{}, store.Summary{Claim: "fresh"}); !done {
		t.Fatal("a new session's first summary write failed")
	}
}
