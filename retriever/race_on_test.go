//go:build race

package retriever

// raceEnabled shrinks the larger tests, which the race detector slows twentyfold.
const raceEnabled = true
