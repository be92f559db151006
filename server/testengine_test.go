package server_test

import (
	"context"
	"time"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
)

// testEngine is engine.New with a source deadline long enough for a store under the race detector on a
// loaded machine (the default second is for a healthy store): a test that checks what an assembly read must
// not see it degraded for that.
func testEngine(st *store.Store, opts ...engine.Option) (*engine.Engine, error) {
	return engine.New(st, append([]engine.Option{engine.WithSourceTimeout(time.Minute)}, opts...)...)
}

// newMemory is an empty memory store with the default options.
func newMemory() *store.Store {
	s, err := memory.Open(context.Background(), memory.Options{})
	if err != nil {
		panic(err) // memory.Open fails only for a context that is done
	}
	return s
}

// over is a store over b, a test's wrapper of a backend, with the default options.
func over(b store.Backend) *store.Store {
	s, err := store.New(b, store.Options{})
	if err != nil {
		panic(err) // store.New fails only for a nil backend
	}
	return s
}
