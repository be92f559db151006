package server_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/context-loom/loom/server"
)

// TestChunk_StopsAtTheItemLimit: a text that would make far more chunks than one answer may hold is refused
// once the chunker passes the limit, not after it has cut the whole text. The work is measured in bytes
// allocated by the process during the call (not in time): cutting 1 MiB into 16-token chunks to the end
// allocates about three times what stopping after a dozen chunks does.
func TestChunk_StopsAtTheItemLimit(t *testing.T) {
	ts := newTestServer(t, newMemory(), server.Limits{MaxItems: 10})
	text := strings.Repeat("a ", (1<<20)/2-8)
	body := map[string]any{"text": text, "chunk_size": 16, "strategy": "fixed", "chunk_overlap": 0}
	ts.must("POST", "/v1/chunk", keyAcme, map[string]any{"text": "warm up", "chunk_size": 16}, 200)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	status, out, _ := ts.call("POST", "/v1/chunk", keyAcme, body)
	runtime.ReadMemStats(&after)
	if status != 413 || errorCode(out) != "too_large" {
		t.Fatalf("status %d %v, want 413 too_large", status, out)
	}
	// The client's encoding and the server's decoding of the 1 MiB body take about 12 MiB; chunking it all (33 MiB)
	// would take far more.
	if got := after.TotalAlloc - before.TotalAlloc; got > 20<<20 {
		t.Errorf("the refused request allocated %d MiB: the text was chunked past the limit", got>>20)
	}
}
