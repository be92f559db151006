//go:build race

package tokenizer

// raceEnabled says the race detector is on. It makes sync.Pool drop a share of what is put back, so
// allocation counts of pooled code mean nothing under it; and it slows the sweep of every code point
// (TestEncode_MatchesTiktokenOnEveryCodePoint) tenfold while finding nothing in it, one goroutine's
// deterministic computation, so under it the sweep samples. `make test` counts the allocations and sweeps
// every code point in its run without the race detector.
const raceEnabled = true
