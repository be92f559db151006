package valkey

import (
	"errors"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store/valkey/internal/conn"
)

// rawBackend is a native backend over a test server of its own, with the key prefix given, made without
// Open so that a test can run its scripts one step at a time.
func rawBackend(t *testing.T, prefix string) *Backend {
	t.Helper()
	c, err := conn.Dial(t.Context(), conn.Settings{Client: valkeygo.ClientOption{InitAddress: []string{valkeytest.Start(t)}}, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &Backend{conn: c, prefix: prefix, maxLen: "1000"}
}

// TestGenerations_LateStepsKeepNewerCollection: the second step of a create, or of a deletion, that comes
// late (its connection stalled while the id was deleted and created again) finds keys of a later
// generation, which the index points to, and leaves them and their documents alone.
func TestGenerations_LateStepsKeepNewerCollection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n := rawBackend(t, "late")
	first := loom.Collection{ID: "kb", Name: "kb", CreatedAt: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)}
	if _, err := n.CreateCollection(ctx, "acme", first); err != nil { // generation 1
		t.Fatal(err)
	}
	if err := n.DeleteCollection(ctx, "acme", "kb"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateCollection(ctx, "acme", loom.Collection{ID: "kb", Name: "kb"}); err != nil { // generation 2
		t.Fatal(err)
	}
	if _, err := n.PutDocument(ctx, "acme", loom.Document{ID: "d", CollectionID: "kb", Hash: "h"},
		[]collection.Chunk{{Chunk: loom.Chunk{ID: "d#0", DocumentID: "d", Content: "text", EndOffset: 4, TokenCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		got, err := n.GetCollection(ctx, "acme", "kb")
		if err != nil || !got.CreatedAt.IsZero() {
			t.Fatalf("%s: GetCollection = %+v, %v; want the second collection", what, got, err)
		}
		if _, err := n.GetDocument(ctx, "acme", "kb", "d"); err != nil {
			t.Fatalf("%s: the second collection's document: %v", what, err)
		}
	}
	k := n.coll("acme", "kb")
	m, err := n.eval(ctx, createMeta, []string{k.meta, k.docs, k.chunks}, []string{`{"id":"kb","name":"kb","created_at":"2020-01-02T03:04:05Z"}`, "0", "1"})
	if err != nil || m.IsInt64() {
		t.Fatalf("the first create's late meta: %v, %v; want the second's JSON", m, err)
	}
	check("after the first create's late meta")
	if _, err := n.eval(ctx, dropCollection, []string{k.meta, k.docs, k.chunks}, []string{"acme", "kb", "1", "1000", "1"}); err != nil {
		t.Fatal(err)
	}
	check("after the first deletion's late drop")
	if _, err := n.CreateCollection(ctx, "acme", first); !errors.Is(err, collection.ErrExists) {
		t.Fatalf("the first create retried: %v, want ErrExists", err)
	}
	check("after the first create retried")
}

// TestGenerations_FencedCreateCannotComplete: a create cut short after its index entry (its connection
// stalled) is found half made by a create of the same name under another id, which removes the entry; the
// first create's late meta then fails, so that no create reports success for a collection no one can see.
func TestGenerations_FencedCreateCannotComplete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n := rawBackend(t, "fence")
	m, err := n.eval(ctx, reserveName, []string{n.collIndex("acme")}, []string{"kb", "first"})
	if err != nil || !m.IsInt64() {
		t.Fatalf("the first create's entry: %v, %v", m, err)
	}
	if _, err := n.CreateCollection(ctx, "acme", loom.Collection{ID: "second", Name: "kb"}); err != nil {
		t.Fatalf("a create of the name: %v", err)
	}
	k := n.coll("acme", "first")
	m, err = n.eval(ctx, createMeta, []string{k.meta, k.docs, k.chunks}, []string{`{"id":"first","name":"kb"}`, "0", "1"})
	if err != nil || m.IsInt64() {
		t.Fatalf("the first create's late meta: %v, %v; want it refused", m, err)
	}
	for _, key := range []string{"kb", "second"} {
		if got, err := n.GetCollection(ctx, "acme", key); err != nil || got.ID != "second" {
			t.Fatalf("GetCollection(%q) = %+v, %v; want the second", key, got, err)
		}
	}
	if _, err := n.GetCollection(ctx, "acme", "first"); !errors.Is(err, collection.ErrNotFound) {
		t.Fatalf("GetCollection(first) = %v, want ErrNotFound", err)
	}
	if _, err := n.PutDocument(ctx, "acme", loom.Document{ID: "d", CollectionID: "first", Hash: "h"}, nil); !errors.Is(err, collection.ErrNotFound) {
		t.Fatalf("a put into the fenced id: %v, want ErrNotFound", err)
	}
	if _, err := n.ListDocuments(ctx, "acme", "first"); !errors.Is(err, collection.ErrNotFound) {
		t.Fatalf("ListDocuments of the fenced id: %v, want ErrNotFound", err)
	}
	if _, err := n.CreateCollection(ctx, "acme", loom.Collection{ID: "first", Name: "again"}); err != nil { // the fence is replaced
		t.Fatalf("a create of the fenced id: %v", err)
	}
}
