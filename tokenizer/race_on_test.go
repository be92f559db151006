//go:build race

package tokenizer

// raceEnabled says the race detector is on: it makes sync.Pool drop a share of what is put back, so
// allocation counts of pooled code mean nothing under it (`make test` counts them in a run without it).
const raceEnabled = true
