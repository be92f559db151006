//go:build race

package engine

// raceEnabled says the race detector is on: see Sweep.
const raceEnabled = true
