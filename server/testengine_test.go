package server_test

import (
	"time"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// testEngine is engine.New with a source deadline long enough for a store under the race detector on a
// loaded machine (the default second is for a healthy store): a test that checks what an assembly read must
// not see it degraded for that.
func testEngine(st store.Store, opts ...engine.Option) (*engine.Engine, error) {
	return engine.New(st, append([]engine.Option{engine.WithSourceTimeout(time.Minute)}, opts...)...)
}
