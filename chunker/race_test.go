//go:build race

package chunker

// Under the race detector the property tests run on shorter texts, the first 4,000 bytes of each: it
// makes them ten times slower, in one goroutine's chunking where it finds nothing. `make test` runs them
// on the whole texts in its run without the detector.
func maxPropertyText() int { return 4000 }
