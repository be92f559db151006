//go:build !race

package chunker

func maxPropertyText() int { return 1 << 30 }
