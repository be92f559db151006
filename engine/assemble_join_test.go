package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
)

// blockingEmbedder embeds as the default embedder, except the text "block": that call waits for its
// context to end, and says when it has returned.
type blockingEmbedder struct {
	started  chan struct{}
	returned atomic.Bool
}

func (b *blockingEmbedder) Name() string    { return "blocking" }
func (b *blockingEmbedder) Dimensions() int { return embed.Default().Dimensions() }
func (b *blockingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 1 && texts[0] == "block" {
		defer b.returned.Store(true)
		close(b.started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return embed.Default().Embed(ctx, texts)
}

// blockingLoad is a store backend (of collections too) whose Load waits for its context to end, and counts
// the Loads under way. (The store's front may not call it at all: when the assembly has already failed, the
// front sees the context done and returns first.)
type blockingLoad struct {
	*memory.Backend
	running atomic.Int64
}

func (s *blockingLoad) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	s.running.Add(1)
	defer s.running.Add(-1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// assembleBounded runs eng.Assemble, failing the test if it has not returned long after it should have: a
// bound only a hang breaks (the sources' deadline is an hour).
func assembleBounded(t *testing.T, eng *engine.Engine, req engine.Request) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := eng.Assemble(loom.WithTenant(t.Context(), "acme"), req)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Assemble waited for a source after another had ended it")
		return nil
	}
}

// TestAssemble_AFailedSourceCancelsTheOther: when one source's failure ends the assembly (a missing agent,
// a missing collection), the other source's read is cancelled, not waited for, and has returned when
// Assemble returns: no goroutine outlives the call.
func TestAssemble_AFailedSourceCancelsTheOther(t *testing.T) {
	t.Parallel()
	t.Run("missing agent, retrieval waiting", func(t *testing.T) {
		t.Parallel()
		emb := &blockingEmbedder{started: make(chan struct{})}
		eng, err := engine.New(newMemory(), engine.WithEmbedder(emb), engine.WithSourceTimeout(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		ctx := loom.WithTenant(t.Context(), "acme")
		c, err := eng.CreateCollection(ctx, loom.Collection{Name: "kb"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.IngestText(ctx, c.ID, "a", "", "", "Some knowledge.", nil); err != nil {
			t.Fatal(err)
		}
		err = assembleBounded(t, eng, engine.Request{Agent: "missing", Retrieve: &engine.RetrieveRequest{Collection: c.ID, Query: "block"},
			Request: assembler.Request{Message: "hi"}})
		if !errors.Is(err, engine.ErrAgentNotFound) {
			t.Fatalf("Assemble = %v, want ErrAgentNotFound", err)
		}
		select {
		case <-emb.started:
		default:
			return // the retrieval never began: nothing to join
		}
		if !emb.returned.Load() {
			t.Error("the retrieval was still running when Assemble returned")
		}
	})
	t.Run("missing collection, store waiting", func(t *testing.T) {
		t.Parallel()
		st := &blockingLoad{Backend: memoryOf(newMemory())}
		eng, err := engine.New(over(st), engine.WithSourceTimeout(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		err = assembleBounded(t, eng, engine.Request{Session: "s", Retrieve: &engine.RetrieveRequest{Collection: "missing"},
			Request: assembler.Request{Message: "hi"}})
		if !errors.Is(err, collection.ErrNotFound) {
			t.Fatalf("Assemble = %v, want collection.ErrNotFound", err)
		}
		if st.running.Load() != 0 {
			t.Error("the store's Load was still running when Assemble returned")
		}
	})
}
