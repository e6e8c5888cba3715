package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// Redis is a redis-server child process on a loopback port, without
// persistence, its files in a temp dir.
type Redis struct {
	addr string
	dir  string
	proc *proc.Process
}

// StartRedis starts redis-server from PATH on a free loopback port with
// args added to its command line (such as "--maxmemory", "4gb"), and
// returns once it answers PING.
func StartRedis(ctx context.Context, args ...string) (*Redis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedisServer
	}
	var last error
	for range 3 { // the free port may be taken before redis-server binds it
		r, err := startRedis(ctx, path, args)
		if err == nil {
			return r, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func startRedis(ctx context.Context, path string, extra []string) (*Redis, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rankd-redis-")
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "redis.log")
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--daemonize", "no", "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", logFile}, extra...)
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	proc, err := proc.Start(cmd)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	r := &Redis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, proc: proc}
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		if proc.Exited() {
			msg := logTail(logFile, 10)
			r.Close()
			return nil, fmt.Errorf("redis-server exited at start: %v\n%s", proc.Err(), msg)
		}
		if err := pingRedis(r.addr); err == nil {
			return r, nil
		} else if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("redis-server on %s not answering PING after %v: %w", r.addr, redisReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			r.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addr returns the server's host:port.
func (r *Redis) Addr() string { return r.addr }

// Dir returns the server's working directory (its log and any data).
func (r *Redis) Dir() string { return r.dir }

// PID returns the server's process id.
func (r *Redis) PID() int { return r.proc.PID() }

// Close stops the server (SIGTERM, then SIGKILL after a grace) and removes
// its files.
func (r *Redis) Close() {
	r.proc.Stop(syscall.SIGTERM, redisStopGrace)
	_ = os.RemoveAll(r.dir)
}

// pingRedis sends one PING in RESP and expects +PONG.
func pingRedis(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
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
