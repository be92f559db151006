package assembler

// sweep is the number of rounds of a property sweep that runs n: n, or a tenth of n (at least one)
// under the race detector. The detector slows one goroutine's deterministic assembly about tenfold and
// finds nothing in it; what it can find, a race with the other parallel tests on the package's shared
// caches and pools, a tenth of the rounds still exercises. `make test` runs every sweep at full size in
// its run without the detector, and the thresholds that say a sweep saw enough scale with it.
func sweep(n int) int {
	if raceEnabled {
		return max(n/10, 1)
	}
	return n
}
