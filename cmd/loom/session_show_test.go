package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// TestSessionShow_Pages: session show prints a session longer than a page whole, oldest first, each
// message once; --limit prints the newest N and says on standard error which --before shows the older
// ones; --before prints only the older ones.
func TestSessionShow_Pages(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*showPage + 321
	batch := make([]store.Message, 0, store.DefaultMaxBatch)
	for i := range n {
		batch = append(batch, store.Message{Role: "user", Content: fmt.Sprint("message ", i+1)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := st.AppendMessages(t.Context(), "acme", "s", batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	st.Close()
	show := func(args ...string) ([]int64, string) {
		t.Helper()
		out, errOut, code := runLoom(t, "", append([]string{"session", "show", "--store", "sqlite:" + path, "--tenant", "acme", "--session", "s"}, args...)...)
		if code != 0 {
			t.Fatalf("session show %v: exit %d: %s", args, code, errOut)
		}
		var seqs []int64
		for line := range strings.Lines(out) {
			var m store.Message
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("session show %v: %q: %v", args, line, err)
			}
			seqs = append(seqs, m.Seq)
		}
		return seqs, errOut
	}
	consecutive := func(seqs []int64, from, to int64) bool {
		if int64(len(seqs)) != to-from+1 {
			return false
		}
		for i, seq := range seqs {
			if seq != from+int64(i) {
				return false
			}
		}
		return true
	}
	if seqs, _ := show(); !consecutive(seqs, 1, n) {
		t.Errorf("session show: %d messages, want 1 to %d in order", len(seqs), n)
	}
	seqs, errOut := show("--limit", "5")
	if !consecutive(seqs, n-4, n) || !strings.Contains(errOut, fmt.Sprint("--before ", n-4)) {
		t.Errorf("session show --limit 5: %v, %q", seqs, errOut)
	}
	if seqs, errOut := show("--limit", "5", "--before", "4"); !consecutive(seqs, 1, 3) || errOut != "" {
		t.Errorf("session show --limit 5 --before 4: %v, %q", seqs, errOut)
	}
	if seqs, _ := show("--before", "1500"); !consecutive(seqs, 1, 1499) {
		t.Errorf("session show --before 1500: %d messages", len(seqs))
	}
}
