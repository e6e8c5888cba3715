package testenv

import (
	"context"
	"fmt"
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
	"github.com/rankd/rankd/internal/servers"
	"github.com/redis/go-redis/v9"
)

const (
	clusterNodes        = 3
	clusterReadyTimeout = 60 * time.Second
	installRedisCluster = "install redis-server and redis-cli (apt-get install redis-server redis-tools), or set REDIS_CLUSTER_ADDRS"
)

// RedisCluster is a Redis Cluster for tests: three masters run by this
// package, or the nodes named by REDIS_CLUSTER_ADDRS.
type RedisCluster struct {
	addrs []string
	nodes []*RedisServer // nil when the cluster comes from the environment
}

var sharedCluster struct {
	once sync.Once
	c    *RedisCluster
	err  error
}

// Cluster returns the Redis Cluster shared by the test binary, starting it
// on first use: the comma-separated REDIS_CLUSTER_ADDRS if set, else three
// local redis-server masters joined with redis-cli --cluster create, without
// replicas or persistence. It returns once every node reports cluster_state
// ok with all 16384 slots served. Without redis-server and redis-cli the test
// is skipped (failed under CI=true). Main stops it.
func Cluster(t testing.TB) *RedisCluster {
	t.Helper()
	sharedCluster.once.Do(func() {
		sharedCluster.c, sharedCluster.err = startSharedCluster()
	})
	require(t, sharedCluster.err)
	return sharedCluster.c
}

// Addrs returns the host:port of every node.
func (c *RedisCluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Client returns a cluster client, closed at t's cleanup.
func (c *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func startSharedCluster() (*RedisCluster, error) {
	if env := os.Getenv("REDIS_CLUSTER_ADDRS"); env != "" {
		var addrs []string
		for a := range strings.SplitSeq(env, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		return &RedisCluster{addrs: addrs}, nil
	}
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, errMissing{bin + " not found in PATH: " + installRedisCluster}
		}
	}
	c := &RedisCluster{}
	var dirs []string
	stop := func() {
		for _, n := range c.nodes {
			n.shutdown(syscall.SIGTERM)
		}
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}
	for range clusterNodes {
		dir, err := os.MkdirTemp("", "testenv-redis-cluster-")
		if err != nil {
			stop()
			return nil, err
		}
		dirs = append(dirs, dir)
		args := append([]string(nil),
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
		)
		node, err := startLocalRedis(servers.RedisOptions{Dir: dir, Args: args, More: clusterBus})
		if err != nil {
			stop()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
		c.addrs = append(c.addrs, node.addr)
	}
	if err := createCluster(c.addrs); err != nil {
		stop()
		return nil, err
	}
	atExit(stop)
	return c, nil
}

// createCluster joins the nodes at addrs into a cluster of masters and waits
// until every node serves the whole slot range.
func createCluster(addrs []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, tail(string(out), 20))
	}
	for _, addr := range addrs {
		if err := waitClusterNode(ctx, addr, len(addrs)); err != nil {
			return err
		}
	}
	return nil
}

// waitClusterNode waits until the node at addr reports cluster_state:ok, all
// slots ok and every node known.
func waitClusterNode(ctx context.Context, addr string, nodes int) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	want := []string{
		"cluster_state:ok",
		"cluster_slots_ok:16384",
		fmt.Sprintf("cluster_known_nodes:%d", nodes),
	}
	var info string
	for {
		var err error
		info, err = c.ClusterInfo(ctx).Result()
		if err == nil && containsAll(info, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster node %s not ready: %v\n%s", addr, err, info)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// containsAll reports whether every one of lines is a line of info.
func containsAll(info string, lines []string) bool {
	have := make(map[string]bool)
	for l := range strings.Lines(info) {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range lines {
		if !have[l] {
			return false
		}
	}
	return true
}

// clusterBus gives a cluster node a free cluster bus port.
func clusterBus(int) ([]string, error) {
	bus, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	return []string{"--cluster-port", strconv.Itoa(bus)}, nil
}
