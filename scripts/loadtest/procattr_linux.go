package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the child die with this process, even when this one is killed.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
