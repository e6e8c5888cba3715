package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/rankd/rankd/internal/proc"
)

const (
	// childEnv makes a binary linking this package run the load generator.
	childEnv = "RANKD_LOADGEN"
	// readyTimeout bounds the opening of the clients' connections.
	readyTimeout = time.Minute
	// stopGrace bounds the wait for the result after "stop".
	stopGrace = 30 * time.Second
)

// Child runs the load generator and returns its exit code when this
// process was started by Start to be it (ok true); otherwise it returns at
// once with ok false. The main of every binary that calls Start calls it
// first.
func Child() (code int, ok bool) {
	if os.Getenv(childEnv) != "1" {
		return 0, false
	}
	return childMain(os.Stdin, os.Stdout), true
}

// Options configures a load generator.
type Options struct {
	// Addr is the host:port of the HTTP server.
	Addr string
	// Clients is the number of connections, each with one request in
	// flight at a time.
	Clients int
	// Targets are the request URIs (path and query). Client c sends
	// Targets[c], Targets[c+Clients], Targets[c+2*Clients], ... cycling.
	Targets []string
}

// Result is what the clients did in the measured window (between Start's
// Begin and End): requests whose answer arrived in it.
type Result struct {
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	// Status counts answers by HTTP status.
	Status map[int]int64 `json:"status"`
	// Errors counts failed connections and unreadable answers; the client
	// reconnects after each.
	Errors int64 `json:"errors"`
	// Latency quantiles, from sending the request to the end of the
	// answer's body, in ms (within about 3%).
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// CPUSeconds is the generator's own CPU time (user + system) over
	// the window.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// PerSec returns the requests per second.
func (r *Result) PerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Seconds
}

// Gen is a running load generator child.
type Gen struct {
	p     *proc.Process
	in    io.WriteCloser
	lines chan string
	out   *proc.TailBuffer
}

// Start starts the child, hands it o and returns once every client has
// connected and had one answer; the clients then keep running. Call Begin
// and End to measure, or Close.
func Start(ctx context.Context, o Options) (*Gen, error) {
	if o.Clients < 1 || len(o.Targets) == 0 || o.Addr == "" {
		return nil, errors.New("loadgen: want an address, at least one client and one target")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting the load generator: finding this executable: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// a pipe of our own: exec's would be closed by Wait, maybe before
	// the result line is read
	stdout, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pw.Close()
	out := &proc.TailBuffer{}
	cmd.Stdout, cmd.Stderr = pw, out
	p, err := proc.Start(cmd)
	if err != nil {
		_ = stdout.Close()
		return nil, fmt.Errorf("starting the load generator: %w", err)
	}
	g := &Gen{p: p, in: in, lines: make(chan string, 4), out: out}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			g.lines <- sc.Text()
		}
		_ = stdout.Close()
		close(g.lines)
	}()
	settings, _ := json.Marshal(o)
	if err := g.send(string(settings)); err != nil {
		g.Close()
		return nil, err
	}
	if _, err := g.await(ctx, "ready", readyTimeout); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// PID returns the child's process id.
func (g *Gen) PID() int { return g.p.PID() }

// Begin opens the measured window.
func (g *Gen) Begin() error { return g.send("start") }

// End closes the measured window, stops the clients and returns what they
// did in the window; the child exits.
func (g *Gen) End(ctx context.Context) (*Result, error) {
	if err := g.send("stop"); err != nil {
		return nil, err
	}
	line, err := g.await(ctx, "", stopGrace)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, fmt.Errorf("loadgen result %q: %w", line, err)
	}
	g.Close()
	return &r, nil
}

// Close stops the child if it still runs.
func (g *Gen) Close() {
	_ = g.in.Close()
	g.p.Stop(syscall.SIGKILL, time.Second)
}

func (g *Gen) send(line string) error {
	if _, err := io.WriteString(g.in, line+"\n"); err != nil {
		return fmt.Errorf("loadgen: %w (%s)", err, strings.TrimSpace(g.out.String()))
	}
	return nil
}

// await returns the child's next line; with want, it must be want.
func (g *Gen) await(ctx context.Context, want string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-g.lines:
		if !ok {
			<-g.p.Done()
			return "", fmt.Errorf("loadgen exited: %v: %s", g.p.Err(), strings.TrimSpace(g.out.String()))
		}
		if want != "" && line != want {
			return "", fmt.Errorf("loadgen said %q, want %q: %s", line, want, strings.TrimSpace(g.out.String()))
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("loadgen: no %q after %v: %s", want, timeout, strings.TrimSpace(g.out.String()))
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
