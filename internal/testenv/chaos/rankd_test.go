package chaos

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rankd/rankd/internal/testenv"
)

// TestMain stops the servers testenv started.
func TestMain(m *testing.M) { testenv.Main(m) }

// cleanEnv returns the environment without RANKD_* variables, so that
// only the config file speaks.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RANKD_") {
			env = append(env, kv)
		}
	}
	return env
}

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// instance is one `rankd run` process, started again and again with the
// same config. Its output (every run, one after the other) goes to a file.
type instance struct {
	name    string
	bin     string
	args    []string
	env     []string
	base    string // http://host:port of its HTTP server
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of Wait, once done is closed
	runs int
}

func newInstance(t *testing.T, name, bin, cfgPath, listen string, extra ...string) *instance {
	in := &instance{
		name:    name,
		bin:     bin,
		args:    append([]string{"run", "--config", cfgPath, "--log-format", "text", "--log-level", "warn"}, extra...),
		env:     cleanEnv(),
		base:    "http://" + listen,
		logPath: filepath.Join(t.TempDir(), name+".log"),
	}
	t.Cleanup(func() { in.kill() })
	return in
}

// start starts a new run; the instance must not be running.
func (in *instance) start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cmd != nil && !exited(in.done) {
		return fmt.Errorf("%s: already running", in.name)
	}
	f, err := os.OpenFile(in.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	in.runs++
	fmt.Fprintf(f, "=== %s run %d started %s\n", in.name, in.runs, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(in.bin, in.args...)
	cmd.Env = in.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := testenv.StartCommand(cmd); err != nil {
		f.Close()
		return fmt.Errorf("%s: starting rankd: %w", in.name, err)
	}
	done := make(chan struct{})
	in.cmd, in.done = cmd, done
	go func() {
		err := cmd.Wait()
		f.Close()
		in.mu.Lock()
		in.err = err
		in.mu.Unlock()
		close(done)
	}()
	return nil
}

func exited(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// running reports whether the current run has not exited.
func (in *instance) running() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cmd != nil && !exited(in.done)
}

func (in *instance) pid() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cmd == nil || exited(in.done) {
		return 0
	}
	return in.cmd.Process.Pid
}

// kill sends SIGKILL and waits for the exit.
func (in *instance) kill() {
	in.mu.Lock()
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil {
		return
	}
	if !exited(done) {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	<-done
}

// term sends SIGTERM and waits up to timeout for the exit; it returns the
// exit code (-1 when killed by a signal), or an error after timeout (the
// process is then killed).
func (in *instance) term(timeout time.Duration) (int, error) {
	in.mu.Lock()
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil || exited(done) {
		return 0, fmt.Errorf("%s: not running", in.name)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		in.kill()
		return -1, fmt.Errorf("%s: no exit within %v of SIGTERM", in.name, timeout)
	}
}

// exitErr returns the error of the run that exited, or nil while it runs.
func (in *instance) exitErr() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cmd == nil || !exited(in.done) {
		return nil
	}
	if in.err == nil {
		return fmt.Errorf("%s exited with status 0", in.name)
	}
	return fmt.Errorf("%s: %w", in.name, in.err)
}

// output returns everything the instance's runs printed.
func (in *instance) output() string {
	b, _ := os.ReadFile(in.logPath)
	return string(b)
}

// tail returns the last n lines of the output.
func (in *instance) tail(n int) string {
	lines := strings.Split(strings.TrimRight(in.output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitHealthy waits until /healthz answers 200.
func (in *instance) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		if !in.running() {
			return fmt.Errorf("%s exited while starting: %v\n%s", in.name, in.exitErr(), in.tail(30))
		}
		resp, err := client.Get(in.base + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: /healthz not 200 within %v\n%s", in.name, timeout, in.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metrics returns the metric families of the instance's /metrics page,
// parsed by the Prometheus text parser, or an error when it cannot be read.
func (in *instance) metrics() (map[string]*dto.MetricFamily, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(in.base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", in.base, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// sumMetric adds up every series of the gauge or counter name.
func sumMetric(m map[string]*dto.MetricFamily, name string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		sum += s.GetGauge().GetValue() + s.GetCounter().GetValue()
	}
	return sum
}

// rssKiB returns the resident set size of a process (VmRSS), in KiB.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := strings.Fields(string(v))
			if len(f) >= 1 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// ready returns the status code and body of the instance's /readyz (0 when
// it does not answer).
func (in *instance) ready() (int, string) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(in.base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
