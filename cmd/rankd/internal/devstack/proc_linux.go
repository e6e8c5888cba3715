package devstack

import (
	"os/exec"
	"syscall"
)

// detach puts cmd in its own process group, so that the Ctrl-C of the
// terminal reaches rankd only (which stops the child last, in order), and
// makes the kernel kill the child if rankd dies without stopping it.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
