//go:build !linux

package testenv

import "os/exec"

// setParentDeathSignal does nothing outside Linux: children of a test binary
// that did not call Main may outlive it there.
func setParentDeathSignal(*exec.Cmd) {}
