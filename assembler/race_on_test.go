//go:build race

package assembler

// raceEnabled says the race detector is on: see sweep.
const raceEnabled = true
