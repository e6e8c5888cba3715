//go:build !linux

package proc

import "os/exec"

// setParentDeathSignal does nothing outside Linux: children of a killed
// process outlive it there.
func setParentDeathSignal(*exec.Cmd) {}
