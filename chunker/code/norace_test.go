//go:build cgo && !race

package code

func maxPropertyText() int { return 1 << 30 }
