package proc

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill cmd's process when the thread
// that started it exits, and puts it in its own process group, so that a
// Ctrl-C in the terminal reaches only rankd, which then stops its servers
// after its own shutdown.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
}
