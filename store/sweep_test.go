package store_test

// sweep is the number of rounds of a property sweep that runs n: n, or a tenth of n (at least one)
// under the race detector, which slows one goroutine's counting about tenfold and finds nothing in it;
// `make test` runs every sweep at full size in its run without the detector.
func sweep(n int) int {
	if raceEnabled {
		return max(n/10, 1)
	}
	return n
}
