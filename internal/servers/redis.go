package servers

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rankd/rankd/internal/proc"
)

const (
	redisReadyTimeout = 20 * time.Second
	redisStopGrace    = 15 * time.Second
)

// ErrNoRedisServer is returned by StartRedis when redis-server is not in
// PATH.
var ErrNoRedisServer = errors.New("redis-server not found in PATH: install it (apt-get install redis-server) or give the address of a Redis")

// RedisOptions configures StartRedis.
type RedisOptions struct {
	// Dir is the server's working directory: its log (RedisLog) and any
	// data. "": a temp dir, removed by Close.
	Dir string
	// Persist keeps the data on disk (see RedisArgs).
	Persist bool
	// Args are more redis-server arguments, after RedisArgs(Dir, Persist).
	Args []string
	// NoDefaults leaves RedisArgs out: Args are the whole command line
	// after the port (a sentinel's).
	NoDefaults bool
	// More, if set, returns more arguments once the port is chosen (a
	// cluster node's bus port).
	More func(port int) ([]string, error)
	// Conf, if set, is a config file given as the first argument (a
	// sentinel's).
	Conf string
	// TLS makes the port a TLS port (--tls-port; Args should hold --port
	// 0) and the readiness check a PING over TLS with this config, to
	// which -NOAUTH counts as an answer.
	TLS *tls.Config
	// Password is sent with AUTH before the readiness PING.
	Password string
}

// RedisArgs returns the arguments of a server in dir on the loopback
// interface, in the foreground, logging to RedisLog(dir): without
// persistence, or with persist RDB snapshots (every second with a change,
// and at shutdown) plus an append-only file fsynced on every write.
func RedisArgs(dir string, persist bool) []string {
	args := []string{"--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no", "--dir", dir, "--logfile", RedisLog(dir)}
	if persist {
		return append(args, "--save", "1 1", "--dbfilename", "dump.rdb", "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, "--save", "", "--appendonly", "no")
}

// RedisLog is the log file of a server in dir.
func RedisLog(dir string) string { return filepath.Join(dir, "redis.log") }

// Redis is a redis-server child process on a loopback port.
type Redis struct {
	addr     string
	port     int
	dir      string
	ownDir   bool     // a temp dir of StartRedis, removed by Close
	argv     []string // after the program name
	tls      *tls.Config
	password string

	mu   sync.Mutex
	proc *proc.Process
}

// StartRedis starts redis-server from PATH on a free loopback port and
// returns once it answers PING. It tries a few ports: another process may
// take the one chosen before redis-server binds it.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNoRedisServer
	}
	ownDir := opts.Dir == ""
	if ownDir {
		dir, err := os.MkdirTemp("", "rankd-redis-")
		if err != nil {
			return nil, err
		}
		opts.Dir = dir
	}
	if !opts.NoDefaults {
		opts.Args = append(RedisArgs(opts.Dir, opts.Persist), opts.Args...)
	}
	var err error
	for range 3 {
		var r *Redis
		if r, err = newRedis(opts, ownDir); err == nil {
			if err = r.start(ctx); err == nil {
				return r, nil
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ownDir {
		_ = os.RemoveAll(opts.Dir)
	}
	return nil, err
}

func newRedis(opts RedisOptions, ownDir bool) (*Redis, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	var argv []string
	if opts.Conf != "" {
		argv = append(argv, opts.Conf)
	}
	portFlag := "--port"
	if opts.TLS != nil {
		portFlag = "--tls-port"
	}
	argv = append(append(argv, portFlag, strconv.Itoa(port)), opts.Args...)
	if opts.More != nil {
		more, err := opts.More(port)
		if err != nil {
			return nil, err
		}
		argv = append(argv, more...)
	}
	return &Redis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: opts.Dir, ownDir: ownDir,
		argv: argv, tls: opts.TLS, password: opts.Password}, nil
}

// Addr returns the server's host:port.
func (r *Redis) Addr() string { return r.addr }

// Port returns the server's port.
func (r *Redis) Port() int { return r.port }

// Dir returns the server's working directory (its log and any data).
func (r *Redis) Dir() string { return r.dir }

// PID returns the server's process id, or 0 when it is not running.
func (r *Redis) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return runningPID(r.proc)
}

// runningPID returns p's process id, or 0 when p is nil or has exited.
func runningPID(p *proc.Process) int {
	if p == nil || p.Exited() {
		return 0
	}
	return p.PID()
}

// Start starts a stopped server again on the same port and returns once
// it answers (after loading its data, when it persists); it does nothing
// if the server runs.
func (r *Redis) Start() error { return r.start(context.Background()) }

// Stop sends sig to the server (SIGTERM: a clean shutdown; SIGKILL: as a
// crash would), SIGKILL after a grace, and waits for it to exit. A paused
// server is continued first, so that it can act on SIGTERM.
func (r *Redis) Stop(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		if !r.proc.Exited() {
			_ = syscall.Kill(r.proc.PID(), syscall.SIGCONT)
		}
		r.proc.Stop(sig, redisStopGrace)
	}
}

// Signal sends sig to the running server (SIGSTOP pauses it, SIGCONT
// continues it).
func (r *Redis) Signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil || r.proc.Exited() {
		return fmt.Errorf("redis-server on %s is not running", r.addr)
	}
	return syscall.Kill(r.proc.PID(), sig)
}

// Close stops the server (SIGTERM) and removes its temp dir, if
// StartRedis made one.
func (r *Redis) Close() {
	r.Stop(syscall.SIGTERM)
	if r.ownDir {
		_ = os.RemoveAll(r.dir)
	}
}

// start runs the process if it is not running and waits until it answers.
func (r *Redis) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil && !r.proc.Exited() {
		return nil
	}
	cmd := exec.Command("redis-server", r.argv...)
	cmd.Dir = r.dir
	p, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	if err := r.wait(ctx, p); err != nil {
		p.Stop(syscall.SIGKILL, redisStopGrace)
		return fmt.Errorf("redis-server on %s: %w\n%s", r.addr, err, logTail(RedisLog(r.dir), 20))
	}
	r.proc = p
	return nil
}

// wait waits until the server answers PING; it fails early if p exits.
func (r *Redis) wait(ctx context.Context, p *proc.Process) error {
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		if p.Exited() {
			return fmt.Errorf("exited: %v", p.Err())
		}
		err := r.ping()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v: %v", redisReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping sends one PING in RESP (after AUTH, with a password; over TLS, with
// a TLS config) and expects +PONG (a loading server answers -LOADING).
func (r *Redis) ping() error {
	var conn net.Conn
	var err error
	if r.tls != nil {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: r.tls}
		conn, err = d.Dial("tcp", r.addr)
	} else {
		conn, err = net.DialTimeout("tcp", r.addr, time.Second)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	br := bufio.NewReader(conn)
	if r.password != "" {
		if err := command(conn, br, "+OK", "AUTH", r.password); err != nil {
			return err
		}
	}
	want := "+PONG"
	if r.tls != nil {
		want = "+PONG|-NOAUTH" // a TLS server with the default user off
	}
	return command(conn, br, want, "PING")
}

// command sends args as a RESP array and checks that the reply line
// starts with one of want ("|"-separated).
func command(w io.Writer, br *bufio.Reader, want string, args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	for w := range strings.SplitSeq(want, "|") {
		if strings.HasPrefix(line, w) {
			return nil
		}
	}
	return fmt.Errorf("%s answered %q", args[0], strings.TrimSpace(line))
}

// logTail returns the last n lines of a file.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
