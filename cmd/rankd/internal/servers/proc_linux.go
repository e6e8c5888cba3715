package servers

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill cmd's process when the thread
// that started it exits.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
