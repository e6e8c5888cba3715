package devstack

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// termSize returns the columns and rows of the terminal w is, if it is one.
func termSize(w io.Writer) (cols, rows int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		return 0, 0, false
	}
	return int(ws.Col), int(ws.Row), true
}

// quietControl turns off the echo of control characters (ECHOCTL: "^C"
// on Ctrl-C) of the terminal w is, if it is one, and returns what
// restores it.
func quietControl(w io.Writer) (restore func()) {
	f, isFile := w.(*os.File)
	if !isFile {
		return func() {}
	}
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil || t.Lflag&unix.ECHOCTL == 0 {
		return func() {}
	}
	old := *t
	t.Lflag &^= unix.ECHOCTL
	if unix.IoctlSetTermios(fd, unix.TCSETS, t) != nil {
		return func() {}
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, &old) }
}
