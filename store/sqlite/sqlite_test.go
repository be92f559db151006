package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/storetest"
	"github.com/context-loom/loom/tokenizer"
)

// open opens a store in a fresh file under t.TempDir (opts.Path is set) and closes it when the test ends.
func open(t testing.TB, opts sqlite.Options) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	opts.Path = path
	s, err := sqlite.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

// backend is the SQLite backend under s.
func backend(s *store.Store) *sqlite.Backend { return s.Backend().(*sqlite.Backend) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) *store.Store {
		s, _ := open(t, sqlite.Options{Options: opts})
		return s
	})
}

func TestBackendConformance(t *testing.T) {
	storetest.RunBackend(t, func(t *testing.T, opts store.Options) store.Backend {
		s, _ := open(t, sqlite.Options{Options: opts})
		return s.Backend()
	}, storetest.BackendOptions{})
}

func TestConcurrentWriters_LoseNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t, sqlite.Options{})
	ctx := t.Context()
	const writers, appends = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			own := fmt.Sprintf("own-%d", w)
			for i := range appends {
				session := "hot"
				if i%2 == 1 {
					session = own
				}
				if _, err := s.AppendMessages(ctx, tenant, session, store.Message{Role: "user", Content: fmt.Sprintf("w%d i%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check := func(session string, want int) []store.Message {
		t.Helper()
		msgs, err := s.Messages(ctx, tenant, session, store.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != want {
			t.Fatalf("session %s: %d messages, want %d", session, len(msgs), want)
		}
		last := map[int]int{}
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				t.Fatalf("session %s: message %d has seq %d", session, i, m.Seq)
			}
			var w, n int
			if _, err := fmt.Sscanf(m.Content, "w%d i%d", &w, &n); err != nil {
				t.Fatal(err)
			}
			if prev, ok := last[w]; ok && n <= prev {
				t.Fatalf("session %s: writer %d's message %d after its message %d", session, w, n, prev)
			}
			last[w] = n
		}
		return msgs
	}
	check("hot", writers*appends/2)
	for w := range writers {
		check(fmt.Sprintf("own-%d", w), appends/2)
	}
}

const tenant = "acme"

func TestReopen_KeepsEverything(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// A path with the characters a URI gives meaning to.
	path := filepath.Join(t.TempDir(), "a dir?x=1#frag%20", "loom?.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutAgent(ctx, tenant, store.Agent{ID: "bot", Instructions: "Be brief."}))
	must(s.SetFact(ctx, tenant, "u", store.Fact{Key: "name", Value: "Bob", Pinned: true}))
	when := time.Date(1600, 1, 2, 3, 4, 5, 6, time.UTC) // before 1678: out of UnixNano's range
	_, err = s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "hello", Time: when,
		TokenCounts: map[string]int{"o200k_base": -3, "custom": 9}})
	must(err)
	_, err = s.AppendToolOutput(ctx, tenant, "s", store.ToolOutput{Tool: "t", Result: "r"})
	must(err)
	must(s.SetKnowledge(ctx, tenant, "s", []store.Knowledge{{ID: "k", Content: "c", Score: 0.1 + 0.2}}))
	must(s.Close())
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file is not at its path: %v", err)
	}

	s, err = sqlite.Open(ctx, sqlite.Options{Path: path})
	must(err)
	defer s.Close()
	snap, err := s.Load(ctx, tenant, store.LoadQuery{Agent: "bot", User: "u", Session: "s"})
	must(err)
	if snap.Agent == nil || snap.Agent.Instructions != "Be brief." || len(snap.Facts) != 1 || !snap.Facts[0].Pinned ||
		len(snap.Messages) != 1 || !snap.Messages[0].Time.Equal(when) || len(snap.ToolOutputs) != 1 ||
		len(snap.Knowledge) != 1 || snap.Knowledge[0].Score != 0.1+0.2 {
		t.Fatalf("after reopening, Load = %+v", snap)
	}
	// The counts given were not trusted: the store counted.
	if c := snap.Messages[0].TokenCounts; len(c) != 3 || c["o200k_base"] != 1 || c["cl100k_base"] != 1 || c[tokenizer.EstimateKey] != 1 {
		t.Errorf("token counts = %v", c)
	}
	m, err := s.AppendMessages(ctx, tenant, "s", store.Message{Role: "assistant", Content: "hi"})
	must(err)
	if m[0].Seq != 2 {
		t.Errorf("after reopening, the next message has seq %d", m[0].Seq)
	}
}

func TestOpen_RefusesANewerSchema(t *testing.T) {
	t.Parallel()
	_, path := open(t, sqlite.Options{})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, sqlite.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(t.Context(), sqlite.Options{Path: path}); !errors.Is(err, sqlite.ErrNewerSchema) {
		t.Fatalf("Open of a newer file: %v, want ErrNewerSchema", err)
	}
}

func TestOpen_BadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		opts sqlite.Options
		want error
	}{
		"empty path":          {sqlite.Options{}, store.ErrInvalid},
		"memory":              {sqlite.Options{Path: ":memory:"}, store.ErrInvalid},
		"negative TTL":        {sqlite.Options{Path: filepath.Join(dir, "a.db"), Options: store.Options{SessionTTL: -time.Second}}, store.ErrInvalid},
		"bad synchronous":     {sqlite.Options{Path: filepath.Join(dir, "b.db"), Synchronous: 7}, store.ErrInvalid},
		"negative read conns": {sqlite.Options{Path: filepath.Join(dir, "c.db"), ReadConns: -1}, store.ErrInvalid},
		"negative busy":       {sqlite.Options{Path: filepath.Join(dir, "c.db"), BusyTimeout: -time.Second}, store.ErrInvalid},
		"missing directory":   {sqlite.Options{Path: filepath.Join(dir, "none", "d.db")}, store.ErrUnavailable},
		"not a database":      {sqlite.Options{Path: writeFile(t, filepath.Join(dir, "e.db"), "this is not a database, just text; long enough to be read as a header.")}, store.ErrUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), tc.opts)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestClose_EveryCallReturnsErrClosed(t *testing.T) {
	t.Parallel()
	s, _ := open(t, sqlite.Options{Options: store.Options{SessionTTL: time.Hour}})
	ctx := t.Context()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	msg := store.Message{Role: "user", Content: "x"}
	for name, call := range map[string]func() error{
		"PutAgent":         func() error { return s.PutAgent(ctx, tenant, store.Agent{ID: "a"}) },
		"GetAgent":         func() error { _, err := s.GetAgent(ctx, tenant, "a"); return err },
		"DeleteAgent":      func() error { return s.DeleteAgent(ctx, tenant, "a") },
		"SetFact":          func() error { return s.SetFact(ctx, tenant, "u", store.Fact{Key: "k"}) },
		"Facts":            func() error { _, err := s.Facts(ctx, tenant, "u"); return err },
		"DeleteFact":       func() error { return s.DeleteFact(ctx, tenant, "u", "k") },
		"AppendMessages":   func() error { _, err := s.AppendMessages(ctx, tenant, "s", msg); return err },
		"Messages":         func() error { _, err := s.Messages(ctx, tenant, "s", store.MessageQuery{}); return err },
		"AppendToolOutput": func() error { _, err := s.AppendToolOutput(ctx, tenant, "s", store.ToolOutput{Tool: "t"}); return err },
		"ToolOutputs":      func() error { _, err := s.ToolOutputs(ctx, tenant, "s"); return err },
		"SetKnowledge":     func() error { return s.SetKnowledge(ctx, tenant, "s", nil) },
		"Knowledge":        func() error { _, err := s.Knowledge(ctx, tenant, "s"); return err },
		"DeleteSession":    func() error { return s.DeleteSession(ctx, tenant, "s") },
		"Load":             func() error { _, err := s.Load(ctx, tenant, store.LoadQuery{Session: "s"}); return err },
		"Ping":             func() error { return s.Ping(ctx) },
		"DeleteExpired":    func() error { _, err := backend(s).DeleteExpired(ctx); return err },
	} {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// clock is a store's clock that a test moves: session expiry without waiting for the wall clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// openClock opens a store on a new file as open does, on the clock c.
func openClock(t *testing.T, opts sqlite.Options, c *clock) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	opts.Path = path
	s, err := sqlite.OpenClock(t.Context(), opts, c.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestTTL_CleanupDeletesExpiredRows(t *testing.T) {
	t.Parallel()
	const ttl = time.Hour // of the store's clock, which the test moves
	c := newClock()
	s, path := openClock(t, sqlite.Options{Options: store.Options{SessionTTL: ttl}, CleanupInterval: 10 * time.Millisecond}, c)
	ctx := t.Context()
	for i := range 3 {
		session := fmt.Sprintf("s%d", i)
		if _, err := s.AppendMessages(ctx, tenant, session, store.Message{Role: "user", Content: "x"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendToolOutput(ctx, tenant, session, store.ToolOutput{Tool: "t"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetKnowledge(ctx, tenant, session, []store.Knowledge{{Content: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSession(ctx, tenant, "s0"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func() int {
		var n int
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM messages) +
			(SELECT count(*) FROM tool_outputs) + (SELECT count(*) FROM knowledge)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Within the TTL nothing is deleted, by the cleanup or by a call.
	c.advance(ttl - time.Second)
	if n, err := backend(s).DeleteExpired(ctx); err != nil || n != 0 {
		t.Fatalf("DeleteExpired within the TTL: %d, %v", n, err)
	}
	if n := rows(); n != 8 {
		t.Fatalf("%d rows for 2 live sessions, want 8", n)
	}
	// Past it, the cleanup goroutine deletes every row of the two sessions.
	c.advance(time.Second)
	for deadline := time.Now().Add(2 * time.Minute); rows() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows of expired sessions left", rows())
		}
	}
	if n, err := backend(s).DeleteExpired(ctx); err != nil || n != 0 {
		t.Errorf("DeleteExpired with nothing expired: %d, %v", n, err)
	}
}

func TestTTL_ExpiredSessionIsNotFound(t *testing.T) {
	t.Parallel()
	const ttl = time.Hour // of the store's clock, which the test moves
	c := newClock()
	s, _ := openClock(t, sqlite.Options{Options: store.Options{SessionTTL: ttl}, CleanupInterval: -1}, c) // no cleanup: reads filter
	ctx := t.Context()
	if _, err := s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	c.advance(ttl)
	if err := s.DeleteSession(ctx, tenant, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteSession of an expired session: %v, want ErrNotFound", err)
	}
	if snap, err := s.Load(ctx, tenant, store.LoadQuery{Session: "s"}); err != nil || len(snap.Messages) != 0 {
		t.Fatalf("Load of an expired session: %v, %v", snap, err)
	}
	if n, err := backend(s).DeleteExpired(ctx); err != nil || n != 1 {
		t.Fatalf("DeleteExpired: %d, %v; want 1 session", n, err)
	}
}

func TestLoad_SeesWholeBatchesWhileWritersWrite(t *testing.T) {
	t.Parallel()
	s, _ := open(t, sqlite.Options{})
	ctx := t.Context()
	const writers, batches, readers = 4, 30, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				if _, err := s.AppendMessages(ctx, tenant, "s",
					store.Message{Role: "user", Content: fmt.Sprintf("w%d b%d q", w, b)},
					store.Message{Role: "assistant", Content: fmt.Sprintf("w%d b%d a", w, b)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var rg sync.WaitGroup
	for range readers {
		rg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				snap, err := s.Load(ctx, tenant, store.LoadQuery{Session: "s"})
				if err != nil {
					errs <- err
					return
				}
				for i, m := range snap.Messages {
					if m.Seq != int64(i+1) || (i%2 == 1) != (m.Role == "assistant") {
						errs <- fmt.Errorf("a Load of %d messages saw message %d as %d %s: a batch split", len(snap.Messages), i, m.Seq, m.Role)
						return
					}
				}
				if len(snap.Messages)%2 != 0 {
					errs <- fmt.Errorf("a Load saw %d messages: half a batch", len(snap.Messages))
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if msgs, err := s.Messages(ctx, tenant, "s", store.MessageQuery{}); err != nil || len(msgs) != writers*batches*2 {
		t.Fatalf("%d messages (%v), want %d", len(msgs), err, writers*batches*2)
	}
}

// TestSummary_TwoStoresOnOneFile: two stores on one file (two servers, say) that read one revision of a
// session's summary: exactly one of them writes the next, through the file's write lock.
func TestSummary_TwoStoresOnOneFile(t *testing.T) {
	t.Parallel()
	a, path := open(t, sqlite.Options{})
	b, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if _, err := a.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		cur, err := a.Summary(ctx, "acme", "s")
		if err != nil && round > 0 {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var wins atomic.Int32
		for i, st := range []*store.Store{a, b, a, b} {
			wg.Go(func() {
				_, ok, err := st.SwapSummary(ctx, "acme", "s", cur, store.Summary{Claim: fmt.Sprint("server-", i)})
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d writers of one revision won", round, wins.Load())
		}
	}
}
