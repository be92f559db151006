package engine_test

import (
	"time"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// testSourceTimeout is the source deadline of the tests' engines. The default (engine.DefaultSourceTimeout,
// a second) is for a healthy store; under the race detector on a loaded machine a store's read can take
// longer, and a test that checks what an assembly read must not see it degraded for that. Tests of the
// deadline itself set their own.
const testSourceTimeout = time.Minute

// testEngine is engine.New with the tests' source deadline (opts may set another).
func testEngine(st store.Store, opts ...engine.Option) (*engine.Engine, error) {
	return engine.New(st, append([]engine.Option{engine.WithSourceTimeout(testSourceTimeout)}, opts...)...)
}
