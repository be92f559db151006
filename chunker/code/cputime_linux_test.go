//go:build cgo

package code

import "syscall"

// threadCPU returns the CPU time the calling thread has used, in nanoseconds, and true; the caller must be
// locked to its thread (runtime.LockOSThread).
func threadCPU() (int64, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
