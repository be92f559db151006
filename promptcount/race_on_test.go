//go:build race

package promptcount_test

// raceEnabled says the race detector is on: it makes sync.Pool drop a share of what is put back, so the
// allocation test means nothing under it, and `make test` runs it without.
const raceEnabled = true
