package testenv

import (
	"os/exec"

	"github.com/rankd/rankd/internal/proc"
)

// StartCommand starts cmd as exec.Cmd.Start does, for a test that runs its
// own child processes (a rankd binary, say): on Linux the child gets a
// parent-death signal and is forked from a thread that lives as long as the
// test binary, so that it dies with the test binary and never before. The
// caller waits for it (cmd.Wait). A SysProcAttr set by the caller is kept
// (Setpgid, for one).
func StartCommand(cmd *exec.Cmd) error { return proc.Spawn(cmd) }
