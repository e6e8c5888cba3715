package testenv

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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/proc"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

const (
	// redisImage is the image used when a Docker engine is available; it
	// matches the major version Debian ships.
	redisImage = "redis:7.0"

	installRedis = "install redis-server (apt-get install redis-server) or run a Docker engine, or set REDIS_ADDR"

	redisReadyTimeout = 20 * time.Second
	redisStopGrace    = 15 * time.Second
)

// errSharedRedis is returned by the lifecycle methods of a server that is
// shared by the package or not run by this package.
var errSharedRedis = errors.New("testenv: only a server from NewRedis can be stopped or started")

// RedisOptions configures a dedicated server started by NewRedis.
type RedisOptions struct {
	// Persist keeps the data across Stop/Start and Kill/Start: RDB snapshots
	// (every second with a change, and at shutdown) plus an append-only file
	// fsynced on every write. Without it the server keeps nothing on disk.
	Persist bool

	// Args are extra redis-server arguments, such as "--maxmemory", "64mb".
	Args []string
}

// RedisServer is a Redis server for tests: a redis-server process run by this
// package, a container, or a server named by REDIS_ADDR.
type RedisServer struct {
	addr      string
	dedicated bool // the lifecycle methods are allowed

	// Set only when this package runs the process.
	port int
	dir  string
	conf string   // config file, the first argument when set (sentinel.conf)
	pass string   // the server's requirepass, sent before PING when waiting for it
	args []string // redis-server arguments, without the port

	mu   sync.Mutex
	proc *proc.Process
}

var sharedRedis struct {
	once sync.Once
	srv  *RedisServer
	err  error
}

// Redis returns the Redis server shared by the test binary, starting it on
// first use: REDIS_ADDR if set, else a container when a Docker engine is
// healthy, else redis-server from PATH on a free loopback port without
// persistence. Without any of them the test is skipped (failed under
// CI=true). Tests sharing it isolate their keys with Prefix. Main stops it.
func Redis(t testing.TB) *RedisServer {
	t.Helper()
	sharedRedis.once.Do(func() {
		sharedRedis.srv, sharedRedis.err = startSharedRedis()
	})
	require(t, sharedRedis.err)
	return sharedRedis.srv
}

func startSharedRedis() (*RedisServer, error) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return &RedisServer{addr: addr}, nil
	}
	var containerErr error
	if DockerHealthy() {
		srv, err := startRedisContainer()
		if err == nil {
			return srv, nil
		}
		containerErr = err
	}
	dir, err := os.MkdirTemp("", "testenv-redis-")
	if err != nil {
		return nil, err
	}
	srv, err := startLocalRedis(dir, redisArgs(dir, RedisOptions{}), false)
	if err != nil {
		_ = os.RemoveAll(dir)
		if containerErr != nil {
			return nil, fmt.Errorf("%w (redis container: %v)", err, containerErr)
		}
		return nil, err
	}
	atExit(func() {
		srv.shutdown(syscall.SIGTERM)
		_ = os.RemoveAll(dir)
	})
	return srv, nil
}

func startRedisContainer() (*RedisServer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ctr, err := tcredis.Run(ctx, redisImage)
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("starting redis container: %w", err)
	}
	uri, err := ctr.ConnectionString(ctx)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("redis container address: %w", err)
	}
	opts, err := redis.ParseURL(uri)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("redis container address %q: %w", uri, err)
	}
	atExit(func() { _ = testcontainers.TerminateContainer(ctr) })
	return &RedisServer{addr: opts.Addr}, nil
}

// NewRedis starts a redis-server process for t alone, on a free loopback
// port with its data in a temp dir, and stops it at t's cleanup. Unlike the
// shared server it may be stopped, killed and started again (on the same
// port). It needs redis-server in PATH: without it the test is skipped
// (failed under CI=true).
func NewRedis(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	dir := t.TempDir()
	srv, err := startLocalRedis(dir, redisArgs(dir, opts), false)
	require(t, err)
	srv.dedicated = true
	t.Cleanup(func() { srv.shutdown(syscall.SIGTERM) })
	return srv
}

// redisArgs returns redis-server's arguments, without the port.
func redisArgs(dir string, opts RedisOptions) []string {
	args := []string{
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", dir,
		"--logfile", redisLog(dir),
	}
	if opts.Persist {
		args = append(args,
			"--save", "1 1",
			"--dbfilename", "dump.rdb",
			"--appendonly", "yes",
			"--appendfsync", "always",
		)
	} else {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	return append(args, opts.Args...)
}

func redisLog(dir string) string { return filepath.Join(dir, "redis.log") }

// startLocalRedis runs redis-server with args on a free port, trying a few
// ports in case another process takes the chosen one first. With clusterBus
// it also gives the node a free cluster bus port.
func startLocalRedis(dir string, args []string, clusterBus bool) (*RedisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errMissing{"redis-server not found in PATH: " + installRedis}
	}
	var err error
	for range 3 {
		var port int
		if port, err = proc.FreePort(); err != nil {
			return nil, err
		}
		srvArgs := args
		if clusterBus {
			var bus int
			if bus, err = proc.FreePort(); err != nil {
				return nil, err
			}
			srvArgs = append(append([]string(nil), args...), "--cluster-port", strconv.Itoa(bus))
		}
		srv := &RedisServer{
			addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			port: port,
			dir:  dir,
			args: srvArgs,
		}
		if err = srv.start(); err == nil {
			return srv, nil
		}
	}
	return nil, err
}

// Addr returns the server's host:port.
func (s *RedisServer) Addr() string { return s.addr }

// Dir returns the server's working directory (its dump.rdb), "" when this
// package does not run the process.
func (s *RedisServer) Dir() string { return s.dir }

// Client returns a client of the server, closed at t's cleanup.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// PID returns the process id of the redis-server this package runs, or 0
// when it is not running or not run by this package.
func (s *RedisServer) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.Exited() {
		return 0
	}
	return s.proc.PID()
}

// Stop shuts the server down with SIGTERM and waits for it to exit; with
// RedisOptions.Persist the data is on disk when Stop returns. Only servers
// from NewRedis can be stopped.
func (s *RedisServer) Stop() error {
	if !s.dedicated {
		return errSharedRedis
	}
	s.shutdown(syscall.SIGTERM)
	return nil
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it to
// exit. Only servers from NewRedis can be killed.
func (s *RedisServer) Kill() error {
	if !s.dedicated {
		return errSharedRedis
	}
	s.shutdown(syscall.SIGKILL)
	return nil
}

// Start starts a stopped or killed server again on the same port and waits
// until it answers PING (after loading its data, with Persist). It does
// nothing if the server runs. Only servers from NewRedis can be started.
func (s *RedisServer) Start() error {
	if !s.dedicated {
		return errSharedRedis
	}
	return s.start()
}

// Restart stops the server (SIGTERM) and starts it again on the same port.
func (s *RedisServer) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// UsedCPU returns the CPU time the server has used, in seconds: the sum of
// used_cpu_sys and used_cpu_user from INFO cpu. Benchmarks read it before
// and after a run to report Redis' share of the work.
func (s *RedisServer) UsedCPU(ctx context.Context) (float64, error) {
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	return parseUsedCPU(info)
}

func parseUsedCPU(info string) (float64, error) {
	var sum float64
	found := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || (key != "used_cpu_sys" && key != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", key, err)
		}
		sum += f
		found++
	}
	if found != 2 {
		return 0, errors.New("INFO cpu: used_cpu_sys or used_cpu_user missing")
	}
	return sum, nil
}

// start runs the process if it is not running and waits until it answers.
func (s *RedisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && !s.proc.Exited() {
		return nil
	}
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(append(args, "--port", strconv.Itoa(s.port)), s.args...)
	cmd := exec.Command("redis-server", args...)
	cmd.Dir = s.dir
	proc, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	if err := waitRedis(s.addr, s.pass, proc); err != nil {
		proc.Stop(syscall.SIGKILL, redisStopGrace)
		logTail, _ := os.ReadFile(redisLog(s.dir))
		return fmt.Errorf("redis-server on %s: %w\n%s", s.addr, err, tail(string(logTail), 20))
	}
	s.proc = proc
	return nil
}

// shutdown sends sig to the process, if this package runs it, and waits for
// it to exit. A paused process is continued first, so that it can act on
// SIGTERM.
func (s *RedisServer) shutdown(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		if !s.proc.Exited() {
			_ = syscall.Kill(s.proc.PID(), syscall.SIGCONT)
		}
		s.proc.Stop(sig, redisStopGrace)
	}
}

// Pause stops the server with SIGSTOP: it keeps its connections open but
// answers nothing, as a hung host would, until Resume. Only servers this
// package runs for one test (NewRedis, NewCluster, NewSentinel) can be
// paused.
func (s *RedisServer) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *RedisServer) Resume() error { return s.signal(syscall.SIGCONT) }

// signal sends sig to the running process of a dedicated server.
func (s *RedisServer) signal(sig syscall.Signal) error {
	if !s.dedicated {
		return errSharedRedis
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.Exited() {
		return fmt.Errorf("testenv: redis-server on %s is not running", s.addr)
	}
	return syscall.Kill(s.proc.PID(), sig)
}

// waitRedis waits until the server at addr answers PING with PONG (after
// AUTH with pass, when set); it fails early if proc exits.
func waitRedis(addr, pass string, proc *proc.Process) error {
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		if proc.Exited() {
			return fmt.Errorf("exited: %v", proc.Err())
		}
		if pingRedisAuth(addr, pass) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v", redisReadyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pingRedis sends one PING in RESP and expects +PONG (a loading server
// answers -LOADING).
func pingRedis(addr string) error { return pingRedisAuth(addr, "") }

// pingRedisAuth is pingRedis after AUTH pass, when pass is set.
func pingRedisAuth(addr, pass string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	r := bufio.NewReader(conn)
	if pass != "" {
		if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(pass), pass); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if line != "+OK\r\n" {
			return fmt.Errorf("AUTH answered %q", strings.TrimSpace(line))
		}
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
