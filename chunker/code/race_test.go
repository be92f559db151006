//go:build cgo && race

package code

// Under the race detector the property tests run on shorter texts: it makes them ten times slower.
func maxPropertyText() int { return 12000 }
