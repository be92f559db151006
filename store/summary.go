package store

import (
	"context"
	"fmt"
	"strings"
)

// Summaries reports whether the store keeps sessions' running summaries (its backend is a
// [SummaryBackend]).
func (s *Store) Summaries() bool { return s.sums != nil }

// Summary returns the session's running summary and compaction state; an error wrapping ErrNotFound when
// there is none, ErrUnsupported when the backend keeps none.
func (s *Store) Summary(ctx context.Context, tenant, session string) (Summary, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return Summary{}, err
	}
	if s.sums == nil {
		return Summary{}, fmt.Errorf("%w: summaries", ErrUnsupported)
	}
	sum, err := s.sums.Summary(ctx, tenant, session)
	return sum, InTenant(tenant, err)
}

// SwapSummary replaces the session's summary record old, as it was read (the zero Summary when there was
// none), with next, if no other write came between (compare-and-set on old.Rev, which every write moves
// on), and reports whether it did; it returns next as stored, with Rev and UpdatedAt set. next must
// cover at least as far as old (an older summary never replaces a newer one) and from the same first
// message (or any when old covers none), with a non-blank text of at most Limits.MaxValueBytes exactly
// when it covers any message; else the error wraps ErrInvalid (ErrTooLarge for the text). A session
// without messages is ErrNotFound; a backend that keeps no summaries, ErrUnsupported.
func (s *Store) SwapSummary(ctx context.Context, tenant, session string, old, next Summary) (Summary, bool, error) {
	if err := s.check(ctx, "tenant", tenant, "session", session); err != nil {
		return Summary{}, false, err
	}
	if s.sums == nil {
		return Summary{}, false, fmt.Errorf("%w: summaries", ErrUnsupported)
	}
	if err := s.checkSummary(old, next); err != nil {
		return Summary{}, false, err
	}
	next.Rev, next.UpdatedAt = old.Rev+1, s.now().UTC()
	ok, err := s.sums.SwapSummary(ctx, tenant, session, old.Rev, next)
	if err != nil || !ok {
		return Summary{}, false, InTenant(tenant, err)
	}
	return next, true, nil
}

// checkSummary applies SwapSummary's rules to a write of next over old.
func (s *Store) checkSummary(old, next Summary) error {
	switch {
	case old.Rev < 0:
		return fmt.Errorf("%w: summary revision %d", ErrInvalid, old.Rev)
	case next.From < 0 || next.To < 0 || next.From > next.To || (next.To > 0) != (next.From > 0):
		return fmt.Errorf("%w: summary range %d to %d", ErrInvalid, next.From, next.To)
	case next.To < old.To:
		return fmt.Errorf("%w: a summary to %d does not replace one to %d", ErrInvalid, next.To, old.To)
	case old.To > 0 && next.From != old.From:
		return fmt.Errorf("%w: a summary from %d does not replace one from %d", ErrInvalid, next.From, old.From)
	case (next.To > 0) != (strings.TrimSpace(next.Text) != ""):
		return fmt.Errorf("%w: a summary has a text exactly when it covers messages", ErrInvalid)
	case len(next.Text) > s.limits.MaxValueBytes:
		return fmt.Errorf("%w: summary of %d bytes (limit %d)", ErrTooLarge, len(next.Text), s.limits.MaxValueBytes)
	case len(next.Claim) > s.limits.MaxIDBytes || len(next.Model) > s.limits.MaxIDBytes:
		return fmt.Errorf("%w: a summary's claim or model is longer than %d bytes", ErrTooLarge, s.limits.MaxIDBytes)
	case len(next.LastError) > s.limits.MaxValueBytes:
		return fmt.Errorf("%w: a summary's last error is longer than %d bytes", ErrTooLarge, s.limits.MaxValueBytes)
	}
	return nil
}
