//go:build race

package store_test

// raceEnabled says the race detector is on: see sweep.
const raceEnabled = true
