//go:build !linux

package main

import "os/exec"

// detach does nothing outside Linux.
func detach(*exec.Cmd) {}
