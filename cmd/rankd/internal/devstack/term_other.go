//go:build !linux

package devstack

import "io"

// termSize is not known on this platform: the dev screen assumes 80×24.
func termSize(io.Writer) (cols, rows int, ok bool) { return 0, 0, false }

// quietControl does nothing here.
func quietControl(io.Writer) (restore func()) { return func() {} }
