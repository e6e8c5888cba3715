package servers

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

// process is a started child, waited for by one goroutine so that any
// number of callers can wait for its exit.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

// startProcess starts cmd from the spawner thread (see spawn) and reaps it.
func startProcess(cmd *exec.Cmd) (*process, error) {
	if err := spawn(cmd); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig, waits up to grace for the exit, then kills the process.
func (p *process) stop(sig syscall.Signal, grace time.Duration) {
	if p.exited() {
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

var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

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

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const tailSize = 4 << 10

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if n := b.buf.Len(); n > 2*tailSize {
		b.buf.Next(n - tailSize)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if len(s) > tailSize {
		s = s[len(s)-tailSize:]
	}
	return string(s)
}
