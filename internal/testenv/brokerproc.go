package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/proc"
)

const (
	brokerReadyTimeout = 30 * time.Second
	brokerStopGrace    = 10 * time.Second
)

// BrokerProcessOptions configures StartBrokerProcess.
type BrokerProcessOptions struct {
	// DataDir keeps messages and committed offsets across Kill and Restart.
	// Empty means a temp dir of the test.
	DataDir string

	// Topics are created at first start.
	Topics []string

	// Partitions is the partition count of Topics and of auto-created
	// topics. Zero means 6.
	Partitions int

	// KfakeDeadMembers: see KafkaOptions.KfakeDeadMembers.
	KfakeDeadMembers bool
}

// BrokerProcess is a Kafka-protocol broker running as a child process (the
// kbroker command), so that a test can kill it and start it again on the
// same address with its data, as a broker crash would go.
type BrokerProcess struct {
	bin     string
	dataDir string
	args    []string // kbroker arguments, without -addr

	mu   sync.Mutex
	addr string // "127.0.0.1:0" until the first start
	proc *proc.Process
	out  *proc.TailBuffer // stdout and stderr, for error messages
}

// StartBrokerProcess builds the kbroker command (once per test binary),
// starts it on a free loopback port and stops it at t's cleanup. It needs the
// go command in PATH.
func StartBrokerProcess(t testing.TB, opts BrokerProcessOptions) *BrokerProcess {
	t.Helper()
	bin, err := kbrokerBinary()
	require(t, err)
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Partitions <= 0 {
		opts.Partitions = defaultPartitions
	}
	args := []string{"-data-dir", opts.DataDir, "-partitions", strconv.Itoa(opts.Partitions)}
	if opts.KfakeDeadMembers {
		args = append(args, "-kfake-dead-members")
	}
	if len(opts.Topics) > 0 {
		args = append(args, "-topics", strings.Join(opts.Topics, ","))
	}
	bp := &BrokerProcess{bin: bin, dataDir: opts.DataDir, args: args, addr: "127.0.0.1:0"}
	if err := bp.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bp.stop(syscall.SIGTERM) })
	return bp
}

// Addrs returns the broker's bootstrap address; it stays the same across
// restarts.
func (bp *BrokerProcess) Addrs() []string {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return []string{bp.addr}
}

// DataDir returns the directory holding the broker's data.
func (bp *BrokerProcess) DataDir() string { return bp.dataDir }

// PID returns the broker's process id, or 0 when it is not running.
func (bp *BrokerProcess) PID() int {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.proc == nil || bp.proc.Exited() {
		return 0
	}
	return bp.proc.PID()
}

// Kill kills the broker with SIGKILL, as a crash would, and waits for it to
// exit.
func (bp *BrokerProcess) Kill() { bp.stop(syscall.SIGKILL) }

// Stop shuts the broker down with SIGTERM and waits for it to exit.
func (bp *BrokerProcess) Stop() { bp.stop(syscall.SIGTERM) }

// Restart stops the broker if it runs (SIGTERM) and starts it again on the
// same address with the same data dir, so that messages and committed
// offsets survive. It returns once the broker accepts connections.
func (bp *BrokerProcess) Restart() error {
	bp.stop(syscall.SIGTERM)
	return bp.start()
}

func (bp *BrokerProcess) stop(sig syscall.Signal) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.proc != nil {
		bp.proc.Stop(sig, brokerStopGrace)
	}
}

// start runs the broker and waits for its "listening" line.
func (bp *BrokerProcess) start() error {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.proc != nil && !bp.proc.Exited() {
		return nil
	}
	bp.out = &proc.TailBuffer{}
	ready := &readyWriter{tail: bp.out, addr: make(chan string, 1)}
	cmd := exec.Command(bp.bin, append([]string{"-addr", bp.addr}, bp.args...)...)
	cmd.Stdout = ready
	cmd.Stderr = bp.out
	proc, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting kbroker: %w", err)
	}
	select {
	case addr := <-ready.addr:
		bp.addr = addr
		bp.proc = proc
		return nil
	case <-proc.Done():
		return fmt.Errorf("kbroker exited before listening: %v\n%s", proc.Err(), bp.out)
	case <-time.After(brokerReadyTimeout):
		proc.Stop(syscall.SIGKILL, brokerStopGrace)
		return fmt.Errorf("kbroker not listening within %v\n%s", brokerReadyTimeout, bp.out)
	}
}

// readyWriter receives kbroker's stdout and reports the address of its
// "listening <addr>" line.
type readyWriter struct {
	tail *proc.TailBuffer
	line []byte
	addr chan string
	sent bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	_, _ = w.tail.Write(p)
	if w.sent {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(w.line[:i]))
		w.line = w.line[i+1:]
		if addr, ok := strings.CutPrefix(line, "listening "); ok {
			w.addr <- addr
			w.sent = true
			w.line = nil
			return len(p), nil
		}
	}
}

var kbroker struct {
	once sync.Once
	bin  string
	err  error
}

// kbrokerBinary builds the kbroker command into a temp dir, once per test
// binary, with -race when the test binary has it so that the build cache
// serves the dependencies.
func kbrokerBinary() (string, error) {
	kbroker.once.Do(func() {
		kbroker.bin, kbroker.err = buildKbroker()
	})
	return kbroker.bin, kbroker.err
}

func buildKbroker() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errMissing{"the go command is not in PATH: it is needed to build the kbroker broker process"}
	}
	dir, err := os.MkdirTemp("", "testenv-kbroker-")
	if err != nil {
		return "", err
	}
	atExit(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "kbroker")
	args := []string{"build", "-o", bin}
	if RaceEnabled {
		args = append(args, "-race")
	}
	// Build from this package's source dir when it is known, so that the
	// build works whatever the test binary's working dir; else by import
	// path from the working dir.
	pkg := reflect.TypeFor[BrokerProcess]().PkgPath() + "/kbroker"
	build := exec.Command(goBin, append(args, pkg)...)
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if _, err := os.Stat(file); err == nil {
			build = exec.Command(goBin, append(args, "./kbroker")...)
			build.Dir = filepath.Dir(file)
		}
	}
	if out, err := build.CombinedOutput(); err != nil {
		return "", errors.Join(fmt.Errorf("go build %s: %w", pkg, err), errors.New(string(out)))
	}
	return bin, nil
}
