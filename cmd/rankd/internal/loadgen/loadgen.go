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
	if ChildKind() != "1" {
		return 0, false
	}
	return childMain(os.Stdin, os.Stdout), true
}

// ChildKind is the kind of child this process was started to be by Spawn
// ("1": the load generator), or "".
func ChildKind() string { return os.Getenv(childEnv) }

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
type Gen struct{ c *Proc }

// Start starts the child, hands it o and returns once every client has
// connected and had one answer; the clients then keep running. Call Begin
// and End to measure, or Close.
func Start(ctx context.Context, o Options) (*Gen, error) {
	if o.Clients < 1 || len(o.Targets) == 0 || o.Addr == "" {
		return nil, errors.New("loadgen: want an address, at least one client and one target")
	}
	c, err := Spawn(ctx, "1", o, readyTimeout)
	if err != nil {
		return nil, err
	}
	return &Gen{c: c}, nil
}

// PID returns the child's process id.
func (g *Gen) PID() int { return g.c.PID() }

// Begin opens the measured window.
func (g *Gen) Begin() error { return g.c.Send("start") }

// End closes the measured window, stops the clients and returns what they
// did in the window; the child exits.
func (g *Gen) End(ctx context.Context) (*Result, error) {
	if err := g.c.Send("stop"); err != nil {
		return nil, err
	}
	line, err := g.c.Await(ctx, "", stopGrace)
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
func (g *Gen) Close() { g.c.Close() }

// Proc is a child process of a kind (this executable started again with
// RANKD_LOADGEN=kind, whose main dispatches on ChildKind), talked to over
// its stdin and stdout, one line each.
type Proc struct {
	kind  string
	p     *proc.Process
	in    io.WriteCloser
	lines chan string
	out   *proc.TailBuffer
}

// Spawn starts a child of kind, sends it settings (one line of JSON) and
// waits up to timeout for its "ready".
func Spawn(ctx context.Context, kind string, settings any, timeout time.Duration) (*Proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting the %s child: finding this executable: %w", kind, err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+kind)
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
		return nil, fmt.Errorf("starting the %s child: %w", kind, err)
	}
	c := &Proc{kind: kind, p: p, in: in, lines: make(chan string, 4), out: out}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_ = stdout.Close()
		close(c.lines)
	}()
	line, _ := json.Marshal(settings)
	if err := c.Send(string(line)); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.Await(ctx, "ready", timeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// PID returns the child's process id.
func (c *Proc) PID() int { return c.p.PID() }

// Close stops the child if it still runs.
func (c *Proc) Close() {
	_ = c.in.Close()
	c.p.Stop(syscall.SIGKILL, time.Second)
}

// Send writes one line to the child.
func (c *Proc) Send(line string) error {
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		return fmt.Errorf("%s child: %w (%s)", c.kind, err, strings.TrimSpace(c.out.String()))
	}
	return nil
}

// Await returns the child's next line; with want, it must be want.
func (c *Proc) Await(ctx context.Context, want string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.p.Done()
			return "", fmt.Errorf("%s child exited: %v: %s", c.kind, c.p.Err(), strings.TrimSpace(c.out.String()))
		}
		if want != "" && line != want {
			return "", fmt.Errorf("%s child said %q, want %q: %s", c.kind, line, want, strings.TrimSpace(c.out.String()))
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("%s child: no %q after %v: %s", c.kind, want, timeout, strings.TrimSpace(c.out.String()))
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
