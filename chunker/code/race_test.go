//go:build cgo && race

package code

// Under the race detector the property tests run on shorter texts: it makes them ten times slower, in
// one goroutine's parse where it finds nothing. The run without it checks the larger sizes.
func maxPropertyText() int { return 4000 }
