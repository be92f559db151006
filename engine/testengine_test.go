package engine_test

import (
	"context"
	"time"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
)

// testSourceTimeout is the source deadline of the tests' engines. The default (engine.DefaultSourceTimeout,
// a second) is for a healthy store; under the race detector on a loaded machine a store's read can take
// longer, and a test that checks what an assembly read must not see it degraded for that. Tests of the
// deadline itself set their own.
const testSourceTimeout = time.Minute

// testEngine is engine.New with the tests' source deadline (opts may set another).
func testEngine(st *store.Store, opts ...engine.Option) (*engine.Engine, error) {
	return engine.New(st, append([]engine.Option{engine.WithSourceTimeout(testSourceTimeout)}, opts...)...)
}

// newMemory is an empty memory store with the default options.
func newMemory() *store.Store {
	s, err := memory.Open(context.Background(), memory.Options{})
	if err != nil {
		panic(err) // memory.Open fails only for a context that is done
	}
	return s
}

// memoryOf is the memory backend under s, for a test's wrapper of it.
func memoryOf(s *store.Store) *memory.Backend { return s.Backend().(*memory.Backend) }

// over is a store over b, a test's wrapper of a backend, with the default options.
func over(b store.Backend) *store.Store {
	s, err := store.New(b, store.Options{})
	if err != nil {
		panic(err) // store.New fails only for a nil backend
	}
	return s
}
