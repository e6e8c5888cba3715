package main

import (
	"os/exec"
	"syscall"
)

// detach puts cmd in its own process group, so that a test's signals
// reach it alone, and makes the kernel kill it if the test binary dies.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
