//go:build cgo && !linux

package code

// threadCPU is known on Linux only: elsewhere the parse-time fuzz targets check the invariants alone.
func threadCPU() (int64, bool) { return 0, false }
