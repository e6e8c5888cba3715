//go:build !linux

package servers

import "os/exec"

// setParentDeathSignal does nothing outside Linux: children of a killed
// process outlive it there.
func setParentDeathSignal(*exec.Cmd) {}
