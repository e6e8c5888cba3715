//go:build !linux

package devstack

import "os/exec"

// detach does nothing outside Linux: a child may then receive the
// terminal's Ctrl-C itself, and outlive rankd if rankd is killed.
func detach(*exec.Cmd) {}
