package chunker

import (
	"testing"

	"github.com/context-loom/loom/chunker/internal/chunktest"
)

// checkInvariants asserts the package's promises (see the package documentation) for one call's result.
func checkInvariants(t testing.TB, strategy, text string, opts Options, chunks []ChunkResult) {
	t.Helper()
	c, err := resolve(strategy, &opts)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	spec := chunktest.Spec{Strategy: strategy, Size: c.size, Overlap: c.overlap, Counter: c.counter,
		ExactOverlap: strategy == Fixed || strategy == Sliding}
	chunktest.Check(t, spec, text, chunks)
}

func clip(s string) string { return chunktest.Clip(s) }
