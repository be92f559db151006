//go:build !race

package retriever

const raceEnabled = false
