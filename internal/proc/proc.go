// Package proc runs child processes for rankd's tools and tests (the
// servers of internal/servers, for rankd bench and dev and for
// internal/testenv, and the rankd processes of tests):
// each is reaped by one goroutine, so any number of callers may wait for its
// exit; on Linux it dies with this process (parent-death signal) and runs
// in its own process group, so a Ctrl-C in the terminal reaches only the
// parent, which stops its children itself.
package proc

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Process is a started child, waited for by one goroutine so that any
// number of callers can wait for its exit.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

// Start starts cmd from the spawner thread (see spawn) and reaps it.
func Start(cmd *exec.Cmd) (*Process, error) {
	if err := spawn(cmd); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends sig, waits up to grace for the exit, then kills the process.
// It returns once the process has exited.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Err returns Wait's result once the process has exited (nil before).
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// Spawn starts cmd as exec.Cmd.Start does, with the parent-death signal and
// process group of this package's children; the caller waits for it.
func Spawn(cmd *exec.Cmd) error { return spawn(cmd) }

// spawn starts cmd from one OS thread that lives as long as the process:
// the kernel sends the parent-death signal when the thread that forked a
// child exits, so forking from a thread that never exits ties the
// children's lives to this process's.
func spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays for good
			for r := range spawner.reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	setParentDeathSignal(cmd)
	r := spawnReq{cmd: cmd, errc: make(chan error, 1)}
	spawner.reqs <- r
	return <-r.errc
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TailBuffer keeps the last bytes written to it, for error messages.
type TailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const tailSize = 4 << 10

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if n := b.buf.Len(); n > 2*tailSize {
		b.buf.Next(n - tailSize)
	}
	return len(p), nil
}

func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if len(s) > tailSize {
		s = s[len(s)-tailSize:]
	}
	return string(s)
}
