package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// TestMessages_ReadsOnlyWhatTheBoundKeeps: with MaxTokens, each message is counted before it is decoded,
// newest first, and the reading stops at the first that does not fit: the message just past the bound and
// an older one, whose tool calls do not decode, are never decoded, by Messages or by Load.
func TestMessages_ReadsOnlyWhatTheBoundKeeps(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	var msgs []store.Message
	for i := range 40 {
		msgs = append(msgs, store.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("turn %d", i)})
	}
	if _, err := s.AppendMessages(ctx, "acme", "s", msgs...); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{
		`UPDATE messages SET tok_o200k = 1000000, tool_calls = '{' WHERE tenant = 'acme' AND session = 's' AND seq = 36`,
		`UPDATE messages SET tool_calls = '[' WHERE tenant = 'acme' AND session = 's' AND seq = 5`,
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Messages(ctx, "acme", "s", store.MessageQuery{}); err == nil {
		t.Fatal("the rows do not decode, yet reading them all succeeded")
	}
	got, err := s.Messages(ctx, "acme", "s", store.MessageQuery{MaxTokens: 200})
	if err != nil || len(got) != 4 || got[0].Seq != 37 {
		t.Fatalf("MaxTokens 200: %d messages (%v), want seqs 37 to 40", len(got), err)
	}
	snap, err := s.Load(ctx, "acme", store.LoadQuery{Session: "s", MaxTokens: 200})
	if err != nil || snap.Errors[store.SourceHistory] != nil || len(snap.Messages) != 4 || snap.Messages[0].Seq != 37 || snap.NextBefore != 37 {
		t.Fatalf("Load with MaxTokens 200: %d messages, next before %d (%v, %v)", len(snap.Messages), snap.NextBefore, err, snap.Errors)
	}
}

// TestMessages_CountsWhatHasNoCount: a message whose column holds no count (a file written otherwise) is
// counted from its content, and the walk goes on past it, as SelectMessages counts.
func TestMessages_CountsWhatHasNoCount(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	var msgs []store.Message
	for i := range 60 {
		msgs = append(msgs, store.Message{Role: "user", Content: fmt.Sprintf("turn %d %s", i, strings.Repeat("more ", i%11))})
	}
	if _, err := s.AppendMessages(ctx, "acme", "s", msgs...); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, `UPDATE messages SET tok_o200k = -1 WHERE seq IN (58, 40, 39, 12)`); err != nil {
		t.Fatal(err)
	}
	all, err := s.Messages(ctx, "acme", "s", store.MessageQuery{})
	if err != nil || len(all) != 60 || all[57].TokenCounts["o200k_base"] != 0 {
		t.Fatalf("%d messages (%v)", len(all), err)
	}
	for _, q := range []store.MessageQuery{{MaxTokens: 10}, {MaxTokens: 40}, {MaxTokens: 200}, {MaxTokens: 700}, {MaxTokens: 5000}, {MaxTokens: 150, Before: 41}} {
		got, err := s.Messages(ctx, "acme", "s", q)
		want := store.SelectMessages(all, q)
		if err != nil || len(got) != len(want) || (len(got) > 0 && got[0].Seq != want[0].Seq) {
			t.Errorf("%+v: %d messages (%v), want %d", q, len(got), err, len(want))
		}
	}
}
