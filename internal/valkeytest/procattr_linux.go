package valkeytest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with the test process, even when a panic skips the cleanups.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
