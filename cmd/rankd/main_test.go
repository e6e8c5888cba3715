package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/cmd/rankd/internal/bench"
	"github.com/rankd/rankd/cmd/rankd/internal/loadgen"
	"github.com/rankd/rankd/internal/testenv"
)

// TestMain runs the test binary as the load generator, the bench's
// traffic or the broker when `rankd bench` (TestBench, in process) or
// testenv.StartBrokerProcess starts it again to be one (loadgen.Child,
// bench.TrafficChild; testenv.Main calls servers.Child).
func TestMain(m *testing.M) {
	if code, ok := loadgen.Child(); ok {
		os.Exit(code)
	}
	if code, ok := bench.TrafficChild(); ok {
		os.Exit(code)
	}
	testenv.Main(m)
}

// TestBinary runs the rankd binary as a user would: it builds it once into
// its temp dir, then runs the subprocess tests (dev smoke test, SIGKILL
// crash test) against it. The binary is built with -race when the tests
// are.
func TestBinary(t *testing.T) {
	testenv.Slow(t, "real rankd processes, minutes with -race")
	bin := testenv.BuildRankd(t)
	t.Run("dev", func(t *testing.T) { testDev(t, bin) })
	t.Run("crash", func(t *testing.T) { testCrash(t, bin) })
	t.Run("replay", func(t *testing.T) { testReplay(t, bin) })
	t.Run("version", func(t *testing.T) { testVersion(t, bin) })
}

// cleanEnv returns the environment without RANKD_* variables, with PATH
// replaced when path is not empty.
func cleanEnv(path string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "RANKD_") || (path != "" && strings.HasPrefix(kv, "PATH=")) {
			continue
		}
		env = append(env, kv)
	}
	if path != "" {
		env = append(env, "PATH="+path)
	}
	return env
}

// proc is a rankd subprocess.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *syncBuffer // stdout and stderr
	done chan struct{}
	err  error // of Wait, once done is closed
}

// startRankd starts bin with args; it is killed at t's cleanup if it still
// runs.
func startRankd(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startRankdIn(t, "", bin, env, args...)
}

// startRankdIn is startRankd in the working directory dir ("": this one).
func startRankdIn(t *testing.T, dir, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	detach(cmd) // dies with the test binary
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting rankd: %v", err)
	}
	p := &proc{t: t, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to die.
func (p *proc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// interrupt sends SIGINT and returns the exit code, failing the test if the
// process does not exit within timeout.
func (p *proc) interrupt(timeout time.Duration) int {
	p.t.Helper()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		p.t.Fatalf("rankd did not exit within %v of SIGINT; output:\n%s", timeout, p.out.tail(40))
	}
	p.t.Logf("rankd exited %v after SIGINT", time.Since(start).Round(time.Millisecond))
	return p.cmd.ProcessState.ExitCode()
}

// waitHTTP polls url until ok accepts the answer, failing the test after
// timeout or when the process exits.
func (p *proc) waitHTTP(timeout time.Duration, url string, ok func(code int, body []byte) bool) []byte {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		if p.exited() {
			p.t.Fatalf("rankd exited (%v) while waiting for %s; output:\n%s", p.err, url, p.out.tail(40))
		}
		resp, err := client.Get(url)
		if err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if ok(resp.StatusCode, body.Bytes()) {
				return body.Bytes()
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body.String()))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not as expected after %v (last: %.300s); output:\n%s", url, timeout, last, p.out.tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tail returns the last n lines.
func (s *syncBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(s.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// requireProgram returns the path of a program, or skips the test (fails it
// under CI=true, like testenv's helpers).
func requireProgram(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s not found in PATH (%s) (CI=true: not skipping)", name, install)
	}
	t.Skipf("%s not found in PATH: %s", name, install)
	return ""
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ctxTimeout returns t's context bounded by d.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
