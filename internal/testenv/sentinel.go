package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/servers"
	"github.com/redis/go-redis/v9"
)

// RedisSentinelOptions configures NewSentinel; zero values take the
// defaults.
type RedisSentinelOptions struct {
	// MasterName is the name the sentinel monitors the primary under;
	// default "mymaster".
	MasterName string
	// DownAfter is the sentinel's down-after-milliseconds: a primary that
	// does not answer for this long is down; default 1s.
	DownAfter time.Duration
	// FailoverTimeout is the sentinel's failover-timeout; default 3s.
	FailoverTimeout time.Duration
	// Password, if set, is the sentinel's requirepass: its clients must
	// authenticate (the data nodes stay open).
	Password string
}

// RedisSentinel is a Redis Sentinel setup for tests: a primary, one
// replica of it and one sentinel (quorum 1) monitoring them, each a
// redis-server process on a free loopback port with its own temp dir.
type RedisSentinel struct {
	name     string
	password string         // the sentinel's requirepass
	nodes    []*RedisServer // the data nodes: the first primary, then its replica
	sentinel *RedisServer
}

// sentinelSetupTimeout bounds NewSentinel's waits (replication link, the
// sentinel's discovery of the replica).
const sentinelSetupTimeout = 30 * time.Second

// NewSentinel starts a primary, a replica (replicaof the primary) and a
// sentinel ("redis-server sentinel.conf --sentinel", its config file in a
// temp dir, where it rewrites it) monitoring the primary with quorum 1,
// and returns once the replica is in sync and the sentinel knows it, so
// that a failover can promote it. The processes stop at t's cleanup. It
// needs redis-server in PATH: without it the test is skipped (failed under
// CI=true).
func NewSentinel(t testing.TB, opts RedisSentinelOptions) *RedisSentinel {
	t.Helper()
	if opts.MasterName == "" {
		opts.MasterName = "mymaster"
	}
	if opts.DownAfter <= 0 {
		opts.DownAfter = time.Second
	}
	if opts.FailoverTimeout <= 0 {
		opts.FailoverTimeout = 3 * time.Second
	}
	// The dirs first: t's cleanups run last registered first, and the
	// processes must stop before their dirs go.
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	s := &RedisSentinel{name: opts.MasterName, password: opts.Password}
	t.Cleanup(func() {
		// The sentinel first, so that it does not fail over while the
		// data nodes stop.
		if s.sentinel != nil {
			s.sentinel.shutdown(syscall.SIGTERM)
		}
		for _, n := range s.nodes {
			n.shutdown(syscall.SIGTERM)
		}
	})
	// Full syncs start at once (the default waits 5s for more replicas).
	nodeArgs := []string{"--repl-diskless-sync-delay", "0"}
	primary, err := startLocalRedis(servers.RedisOptions{Dir: dirs[0], Args: nodeArgs})
	require(t, err)
	primary.dedicated = true
	s.nodes = append(s.nodes, primary)
	host, port, _ := net.SplitHostPort(primary.addr)
	replica, err := startLocalRedis(servers.RedisOptions{Dir: dirs[1], Args: append(nodeArgs, "--replicaof", host, port)})
	require(t, err)
	replica.dedicated = true
	s.nodes = append(s.nodes, replica)

	ctx, cancel := context.WithTimeout(context.Background(), sentinelSetupTimeout)
	defer cancel()
	if err := waitLinkUp(ctx, replica.addr); err != nil {
		t.Fatalf("testenv: replica %s of %s: %v", replica.addr, primary.addr, err)
	}
	s.sentinel, err = startSentinel(dirs[2], opts, primary.addr)
	require(t, err)
	s.sentinel.dedicated = true
	if err := s.WaitReplicas(ctx, 1); err != nil {
		t.Fatalf("testenv: sentinel %s: %v", s.sentinel.addr, err)
	}
	return s
}

// startSentinel runs a sentinel monitoring primary on a free port, trying
// a few ports in case another process takes the chosen one first.
func startSentinel(dir string, opts RedisSentinelOptions, primary string) (*RedisServer, error) {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 1\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		opts.MasterName, host, port, opts.DownAfter.Milliseconds(), opts.FailoverTimeout.Milliseconds())
	if opts.Password != "" {
		text += "requirepass " + opts.Password + "\n"
	}
	args := []string{"--sentinel", "--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no",
		"--dir", dir, "--logfile", servers.RedisLog(dir)}
	for range 3 {
		// Written anew for each try: the sentinel rewrites it.
		if err = os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		var srv *RedisServer
		if srv, err = startLocalRedis(servers.RedisOptions{Dir: dir, Conf: conf, Password: opts.Password, Args: args, NoDefaults: true}); err == nil {
			return srv, nil
		}
	}
	return nil, fmt.Errorf("sentinel: %w", err)
}

// MasterName returns the name the sentinel monitors the primary under.
func (s *RedisSentinel) MasterName() string { return s.name }

// Addrs returns the sentinels' addresses (one).
func (s *RedisSentinel) Addrs() []string { return []string{s.sentinel.addr} }

// Sentinel returns the sentinel's server (its lifecycle methods work).
func (s *RedisSentinel) Sentinel() *RedisServer { return s.sentinel }

// Nodes returns the data nodes: the first primary, then its replica. Their
// roles change with failovers; see Master.
func (s *RedisSentinel) Nodes() []*RedisServer { return append([]*RedisServer(nil), s.nodes...) }

// Node returns the data node at addr, or nil.
func (s *RedisSentinel) Node(addr string) *RedisServer {
	for _, n := range s.nodes {
		if n.addr == addr {
			return n
		}
	}
	return nil
}

// client returns a client of the sentinel; the caller closes it.
func (s *RedisSentinel) client() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.sentinel.addr, Password: s.password, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
}

// Master returns the address of the primary as the sentinel reports it
// now (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (s *RedisSentinel) Master(ctx context.Context) (string, error) {
	c := s.client()
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, s.name).Result()
	if err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %w", s.name, err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %q", s.name, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// KillMaster kills the node the sentinel reports as primary with SIGKILL,
// as a crash would, and returns it and its address.
func (s *RedisSentinel) KillMaster(ctx context.Context) (*RedisServer, error) {
	addr, err := s.Master(ctx)
	if err != nil {
		return nil, err
	}
	n := s.Node(addr)
	if n == nil {
		return nil, fmt.Errorf("testenv: the sentinel's master %s is none of the nodes", addr)
	}
	return n, n.Kill()
}

// Failover asks the sentinel to promote a replica now, without waiting
// for the primary to fail (SENTINEL FAILOVER); WaitMaster waits for the
// promotion.
func (s *RedisSentinel) Failover(ctx context.Context) error {
	c := s.client()
	defer c.Close()
	if err := c.Failover(ctx, s.name).Err(); err != nil {
		return fmt.Errorf("SENTINEL FAILOVER %s: %w", s.name, err)
	}
	return nil
}

// WaitMaster waits until the sentinel reports a primary other than old
// and that node says role:master, and returns its address.
func (s *RedisSentinel) WaitMaster(ctx context.Context, old string) (string, error) {
	var last error
	for {
		addr, err := s.Master(ctx)
		switch {
		case err != nil:
			last = err
		case addr == old:
			last = fmt.Errorf("the sentinel still reports %s", old)
		default:
			role, err := replicationField(ctx, addr, "role")
			if err == nil && role == "master" {
				return addr, nil
			}
			last = fmt.Errorf("the sentinel reports %s, which says role %q (%v)", addr, role, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("testenv: no new master: %w (%v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitReplicas waits until the sentinel knows n replicas of the primary
// that are up with their replication link ok: replicas a failover can
// promote.
func (s *RedisSentinel) WaitReplicas(ctx context.Context, n int) error {
	c := s.client()
	defer c.Close()
	var last string
	for {
		reps, err := c.Replicas(ctx, s.name).Result()
		good := 0
		for _, r := range reps {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" {
				good++
			}
		}
		if err == nil && good >= n {
			return nil
		}
		last = fmt.Sprintf("%d good replicas of %d (%v) %v", good, n, err, reps)
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for replicas: %w: %s", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitLinkUp waits until the replica at addr reports master_link_status:up.
func waitLinkUp(ctx context.Context, addr string) error {
	for {
		st, err := replicationField(ctx, addr, "master_link_status")
		if err == nil && st == "up" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replication link not up: %w (status %q, %v)", ctx.Err(), st, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replicationField returns a field of INFO replication of the server at
// addr.
func replicationField(ctx context.Context, addr, field string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", errors.New("INFO replication has no " + field)
}
