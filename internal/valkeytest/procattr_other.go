//go:build !linux

package valkeytest

import "os/exec"

// dieWithParent does nothing where there is no parent-death signal: a panicking test may leave its
// servers running.
func dieWithParent(*exec.Cmd) {}
