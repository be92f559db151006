package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
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

// has reports whether a record of the level has a message containing msg and the attribute key=value.
func (h *logRecords) has(level slog.Level, msg, key, value string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Level != level || !strings.Contains(r.Message, msg) {
			continue
		}
		found := false
		r.Attrs(func(a slog.Attr) bool {
			found = a.Key == key && a.Value.String() == value
			return !found
		})
		if found {
			return true
		}
	}
	return false
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

// eventually fails the test unless ok becomes true within a generous deadline (the machine is loaded).
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

// afterRestart calls fn until it does not fail with store.ErrUnavailable: a write sent on a connection that
// a restart of the server broke fails once so, as any client sees it, and is retried.
func afterRestart(t *testing.T, what string, fn func() error) {
	t.Helper()
	var err error
	eventually(t, what+" keeps failing", func() bool {
		err = fn()
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s: %v", what, err)
		}
		return err == nil
	})
}

// TestValkeyRestart_IndexesRebuilt: a Valkey server without persistence restarts under two Loom engines
// (two servers of one deployment). The store warns at start that the server persists nothing and, when it
// is back, that it restarted; both engines drop their indexes of what the server lost, so a collection
// created again with the same id serves none of the old collection's chunks, on the engine that created it
// and on the other, and both follow on.
func TestValkeyRestart_IndexesRebuilt(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t) // --save "" --appendonly no
	open := func(log *logRecords) *engine.Engine {
		t.Helper()
		s, err := valkey.Open(t.Context(), valkey.Options{Client: valkeygo.ClientOption{InitAddress: []string{srv.Addr}},
			Logger: slog.New(log)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		e, err := testEngine(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	logA, logB := &logRecords{}, &logRecords{}
	a, b := open(logA), open(logB)
	ctx := loom.WithTenant(t.Context(), "acme")
	docs := func(e *engine.Engine) []string {
		t.Helper()
		res, err := e.Retrieve(ctx, "kumquat", engine.WithCollection("kb"), engine.WithMode(engine.ModeKeyword))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range res {
			ids = append(ids, r.Chunk.DocumentID)
		}
		return ids
	}
	if _, err := a.CreateCollection(ctx, loom.Collection{ID: "kb", Name: "kb"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IngestText(ctx, "kb", "old.md", "", "", "A kumquat ripens in the winter sun.", nil); err != nil {
		t.Fatal(err)
	}
	// Both load the index and follow the feed.
	for name, e := range map[string]*engine.Engine{"a": a, "b": b} {
		if got := docs(e); !slices.Equal(got, []string{"old.md"}) {
			t.Fatalf("%s before the restart: %v", name, got)
		}
	}
	if !logA.has(slog.LevelWarn, "persists nothing", "server", srv.Addr) {
		t.Errorf("no warning at start that the server persists nothing; the log:\n%s", logA)
	}

	srv.Stop()
	srv.Restart() // empty: nothing was persisted
	// Each engine's follower sees the new epoch, and each rebuilds.
	eventually(t, "a did not rebuild its indexes after the server restarted", func() bool { return engine.Resyncs(a) >= 1 })
	eventually(t, "b did not rebuild its indexes after the server restarted", func() bool { return engine.Resyncs(b) >= 1 })
	if !logB.has(slog.LevelWarn, "restarted", "server", srv.Addr) {
		t.Errorf("no warning that the server restarted; the log:\n%s", logB)
	}
	if !logB.has(slog.LevelWarn, "persists nothing", "server", srv.Addr) {
		t.Errorf("no warning after the restart that the server persists nothing; the log:\n%s", logB)
	}
	// The collection is gone with the rest; it is created again with the same id, as a set-up job would.
	if _, err := a.Collection(ctx, "kb"); !errors.Is(err, collection.ErrNotFound) {
		t.Fatalf("the collection after a restart without persistence: %v, want ErrNotFound", err)
	}
	// A create whose reply the broken connection lost may have been applied. In part, a retry completes
	// it; in full, a retry fails with ErrExists and the collection is there, which is what was asked for.
	failed := false
	afterRestart(t, "create the collection again", func() error {
		_, err := a.CreateCollection(ctx, loom.Collection{ID: "kb", Name: "kb"})
		if failed && errors.Is(err, collection.ErrExists) {
			_, err = a.Collection(ctx, "kb")
		}
		failed = failed || err != nil
		return err
	})
	for name, e := range map[string]*engine.Engine{"a": a, "b": b} {
		if got := docs(e); len(got) != 0 {
			t.Errorf("%s serves %v from the collection the server lost", name, got)
		}
	}
	// Following on: a document of the new collection reaches b through the feed.
	afterRestart(t, "ingest new.md", func() error {
		_, err := a.IngestText(ctx, "kb", "new.md", "", "", "A kumquat marmalade, made after the restart.", nil)
		return err
	})
	eventually(t, "new.md never reached b", func() bool { return slices.Equal(docs(b), []string{"new.md"}) })
	if got := docs(a); !slices.Equal(got, []string{"new.md"}) {
		t.Errorf("a after the restart: %v", got)
	}
}

// TestValkeyRestart_PersistedKept: a server with an append-only file (appendfsync always) is killed and
// restarted: the store logs that it persists, at INFO, and the engine's rebuild after the restart serves
// what the server kept.
func TestValkeyRestart_PersistedKept(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	log := &logRecords{}
	s, err := valkey.Open(t.Context(), valkey.Options{Client: valkeygo.ClientOption{InitAddress: []string{srv.Addr}},
		Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := testEngine(s)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !log.has(slog.LevelInfo, "append-only file", "appendfsync", "always") || log.has(slog.LevelWarn, "persists", "server", srv.Addr) {
		t.Errorf("the log at start:\n%s", log)
	}
	ctx := loom.WithTenant(t.Context(), "acme")
	if _, err := e.CreateCollection(ctx, loom.Collection{ID: "kb", Name: "kb"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.IngestText(ctx, "kb", "old.md", "", "", "A kumquat ripens in the winter sun.", nil); err != nil {
		t.Fatal(err)
	}
	retrieve := func() []string {
		t.Helper()
		res, err := e.Retrieve(ctx, "kumquat", engine.WithCollection("kb"), engine.WithMode(engine.ModeKeyword))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range res {
			ids = append(ids, r.Chunk.DocumentID)
		}
		return ids
	}
	if got := retrieve(); !slices.Equal(got, []string{"old.md"}) {
		t.Fatalf("before the restart: %v", got)
	}
	srv.Stop() // SIGKILL
	srv.Restart()
	eventually(t, "the engine did not rebuild its indexes after the server restarted", func() bool { return engine.Resyncs(e) >= 1 })
	if got := retrieve(); !slices.Equal(got, []string{"old.md"}) {
		t.Errorf("after the restart: %v, want what the append-only file kept", got)
	}
}

// heldFeed is a backend whose change feed reads wait until the test ends: an engine on it never hears of
// other engines' writes.
type heldFeed struct{ *memory.Backend }

func (heldFeed) Changes(ctx context.Context, _ string, _ int, _ time.Duration) ([]collection.Change, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestCreateCollection_DropsAStaleIndex: a collection created under an id whose old index the engine still
// holds (another engine deleted the old collection, and this one has not heard of it yet) starts empty: it
// does not serve the old collection's chunks.
func TestCreateCollection_DropsAStaleIndex(t *testing.T) {
	t.Parallel()
	mem := newMemory()
	a, err := testEngine(over(heldFeed{memoryOf(mem)}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := testEngine(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := loom.WithTenant(t.Context(), "acme")
	if _, err := a.CreateCollection(ctx, loom.Collection{ID: "kb", Name: "kb"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IngestText(ctx, "kb", "old.md", "", "", "A kumquat ripens in the winter sun.", nil); err != nil {
		t.Fatal(err)
	}
	retrieve := func() int {
		t.Helper()
		res, err := a.Retrieve(ctx, "kumquat", engine.WithCollection("kb"), engine.WithMode(engine.ModeKeyword))
		if err != nil {
			t.Fatal(err)
		}
		return len(res)
	}
	if n := retrieve(); n != 1 { // a loads the index
		t.Fatalf("%d results before", n)
	}
	if err := b.DeleteCollection(ctx, "kb"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateCollection(ctx, loom.Collection{ID: "kb", Name: "kb"}); err != nil {
		t.Fatal(err)
	}
	if n := retrieve(); n != 0 {
		t.Errorf("the new collection serves %d chunks of the old one", n)
	}
}
