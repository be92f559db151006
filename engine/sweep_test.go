package engine

// Sweep is the number of rounds of a property sweep that runs n: n, or a tenth of n (at least one)
// under the race detector, which slows the engine's assemblies about tenfold. A tenth of the rounds
// still runs the sources' concurrent reads under it; `make test` runs every sweep at full size in its
// run without the detector.
func Sweep(n int) int {
	if raceEnabled {
		return max(n/10, 1)
	}
	return n
}
