package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/servers"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

const (
	// redisImage is the image used when a Docker engine is available; it
	// matches the major version Debian ships.
	redisImage = "redis:7.0"

	installRedis = "install redis-server (apt-get install redis-server) or run a Docker engine, or set REDIS_ADDR"
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
// package (servers.Redis), a container, or a server named by REDIS_ADDR.
type RedisServer struct {
	addr      string
	dedicated bool           // the lifecycle methods are allowed
	srv       *servers.Redis // set only when this package runs the process
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
	srv, err := startLocalRedis(servers.RedisOptions{Dir: dir})
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
	srv, err := startLocalRedis(servers.RedisOptions{Dir: dir, Persist: opts.Persist, Args: opts.Args})
	require(t, err)
	srv.dedicated = true
	t.Cleanup(func() { srv.shutdown(syscall.SIGTERM) })
	return srv
}

// startLocalRedis runs redis-server with opts on a free port.
func startLocalRedis(opts servers.RedisOptions) (*RedisServer, error) {
	srv, err := servers.StartRedis(context.Background(), opts)
	if errors.Is(err, servers.ErrNoRedisServer) {
		return nil, errMissing{"redis-server not found in PATH: " + installRedis}
	}
	if err != nil {
		return nil, err
	}
	return &RedisServer{addr: srv.Addr(), srv: srv}, nil
}

// Addr returns the server's host:port.
func (s *RedisServer) Addr() string { return s.addr }

// Dir returns the server's working directory (its dump.rdb), "" when this
// package does not run the process.
func (s *RedisServer) Dir() string {
	if s.srv == nil {
		return ""
	}
	return s.srv.Dir()
}

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
	if s.srv == nil {
		return 0
	}
	return s.srv.PID()
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
	return s.srv.Start()
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

// shutdown sends sig to the process, if this package runs it, and waits for
// it to exit.
func (s *RedisServer) shutdown(sig syscall.Signal) {
	if s.srv != nil {
		s.srv.Stop(sig)
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
	return s.srv.Signal(sig)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
