package valkey_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey"
)

// logRecords is a slog.Handler that keeps what it is given.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }

func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// find returns the attributes of the records of the level whose message contains msg.
func (h *logRecords) find(level slog.Level, msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			out = append(out, attrs)
		}
	}
	return out
}

func (h *logRecords) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, r := range h.recs {
		b.WriteString(r.Level.String() + " " + r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		b.WriteString("\n")
	}
	return b.String()
}

// TestOpen_LogsPersistence: Open says how the server persists: a warning when it persists nothing or
// cannot tell (CONFIG renamed away, as managed services do), at INFO otherwise.
func TestOpen_LogsPersistence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		args  []string
		level slog.Level
		msg   string
		attrs map[string]string
	}{
		{"nothing", nil, slog.LevelWarn, "persists nothing",
			map[string]string{"appendonly": "no", "save": `""`}},
		{"AOF", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, slog.LevelInfo, "append-only file",
			map[string]string{"appendonly": "yes", "appendfsync": "everysec"}},
		{"RDB only", []string{"--save", "3600 1"}, slog.LevelInfo, "RDB snapshots only",
			map[string]string{"appendonly": "no", "save": "3600 1"}},
		{"CONFIG refused", []string{"--rename-command", "CONFIG", ""}, slog.LevelWarn, "cannot tell whether the server persists",
			map[string]string{"appendonly": "no", "save": "unknown"}},
		{"CONFIG refused, AOF", []string{"--rename-command", "CONFIG", "", "--appendonly", "yes"}, slog.LevelInfo, "append-only file",
			map[string]string{"appendonly": "yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := valkeytest.StartServer(t, tc.args...)
			log := &logRecords{}
			open(t, valkey.Options{Logger: slog.New(log)}, srv.Addr)
			recs := log.find(tc.level, tc.msg)
			if len(recs) != 1 {
				t.Fatalf("%d %s records with %q; the log:\n%s", len(recs), tc.level, tc.msg, log)
			}
			tc.attrs["server"] = srv.Addr
			for k, v := range tc.attrs {
				if recs[0][k] != v {
					t.Errorf("%s=%q, want %q; the log:\n%s", k, recs[0][k], v, log)
				}
			}
			if recs[0]["run_id"] == "" {
				t.Errorf("no run_id; the log:\n%s", log)
			}
		})
	}
}

// epochAfter polls s.Epoch until it answers (the server may be coming back) and returns it.
func epochAfter(t *testing.T, s collection.Epocher) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		e, err := s.Epoch(t.Context())
		if err == nil {
			return e
		}
		if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Epoch: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEpoch_ChangesWhenTheServerRestarts: the epoch holds while the server runs and changes when it comes
// back from a restart (a new run_id), with a warning naming the server; Ping notices a restart too.
func TestEpoch_ChangesWhenTheServerRestarts(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t)
	log := &logRecords{}
	st := open(t, valkey.Options{Logger: slog.New(log)}, srv.Addr)
	colls, _ := st.Collections()
	s := colls.(collection.Epocher) // as the engine asks
	e0 := epochAfter(t, s)
	if e := epochAfter(t, s); e != e0 {
		t.Fatalf("the epoch moved from %s to %s with the server running", e0, e)
	}
	if recs := log.find(slog.LevelWarn, "restarted"); len(recs) != 0 {
		t.Fatalf("a restart before any: %v", recs)
	}
	srv.Stop()
	if _, err := s.Epoch(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Epoch with the server down: %v, want ErrUnavailable", err)
	}
	srv.Restart()
	e1 := epochAfter(t, s)
	if e1 == e0 {
		t.Fatalf("the epoch is still %s after a restart", e1)
	}
	recs := log.find(slog.LevelWarn, "restarted")
	if len(recs) != 1 || recs[0]["server"] != srv.Addr || recs[0]["run_id"] == recs[0]["previous_run_id"] {
		t.Fatalf("restart warnings %v; the log:\n%s", recs, log)
	}
	if e := epochAfter(t, s); e != e1 {
		t.Errorf("the epoch moved from %s to %s after the restart", e1, e)
	}
	// Ping reads the run_ids too: a second restart is found by it, and Epoch tells.
	srv.Stop()
	srv.Restart()
	for deadline := time.Now().Add(2 * time.Minute); st.Ping(t.Context()) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Ping does not come back")
		}
	}
	if n := len(log.find(slog.LevelWarn, "restarted")); n != 2 {
		t.Errorf("%d restart warnings after Ping, want 2; the log:\n%s", n, log)
	}
	if e := epochAfter(t, s); e == e1 {
		t.Errorf("the epoch is still %s after the second restart", e)
	}
}

// TestEpoch_Cluster: on a cluster every primary is watched (run_id is per node): restarting one of them
// changes the epoch, and the warning names that node.
func TestEpoch_Cluster(t *testing.T) {
	t.Parallel()
	c := valkeytest.StartCluster(t, 3)
	log := &logRecords{}
	s := openColls(t, valkey.Options{Logger: slog.New(log)}, c.Addrs()...).(collection.Epocher)
	if n := len(log.find(slog.LevelWarn, "persists nothing")); n != 3 {
		t.Fatalf("%d warnings that a node persists nothing, want one for each of 3; the log:\n%s", n, log)
	}
	e0 := epochAfter(t, s)
	node := c.Servers[1]
	node.Stop()
	node.Restart()
	deadline := time.Now().Add(2 * time.Minute)
	for epochAfter(t, s) == e0 {
		if time.Now().After(deadline) {
			t.Fatalf("the epoch is still %s after a node restarted; the log:\n%s", e0, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs := log.find(slog.LevelWarn, "restarted")
	if len(recs) != 1 || recs[0]["server"] != node.Addr {
		t.Errorf("restart warnings %v, want one for %s; the log:\n%s", recs, node.Addr, log)
	}
}
