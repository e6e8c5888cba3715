package testenv

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/servers"
)

// RedisClusterOptions configures a dedicated cluster started by NewCluster.
type RedisClusterOptions struct {
	// Persist gives every node RedisOptions.Persist (an append-only file
	// fsynced on every write, plus RDB snapshots), so that a node killed
	// with SIGKILL and started again comes back with its data and its
	// cluster config (nodes.conf).
	Persist bool
}

// NewCluster starts a Redis Cluster of three masters for t alone, like
// Cluster's local fallback (no replicas, cluster-node-timeout 5s) but with
// its own nodes, which Nodes returns: unlike the shared cluster's they may
// be stopped, killed, paused (by PID) and started again, each on its port
// and cluster bus port. It returns once every node serves all 16384 slots
// and stops the nodes at t's cleanup. It needs redis-server and redis-cli
// in PATH: without them the test is skipped (failed under CI=true).
func NewCluster(t testing.TB, opts RedisClusterOptions) *RedisCluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			require(t, errMissing{bin + " not found in PATH: " + installRedisCluster})
		}
	}
	// The dirs first: t's cleanups run last registered first, and a node
	// must stop before its dir goes (it saves its data at SIGTERM, and
	// refuses to exit when it cannot).
	dirs := make([]string, clusterNodes)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	c := &RedisCluster{}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.shutdown(syscall.SIGTERM)
		}
	})
	for _, dir := range dirs {
		args := append([]string(nil),
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
		)
		node, err := startLocalRedis(servers.RedisOptions{Dir: dir, Persist: opts.Persist, Args: args, More: clusterBus})
		require(t, err)
		node.dedicated = true
		c.nodes = append(c.nodes, node)
		c.addrs = append(c.addrs, node.addr)
	}
	require(t, createCluster(c.addrs))
	return c
}

// Nodes returns the servers of the cluster's nodes, in the order of Addrs:
// for a cluster from NewCluster their lifecycle methods work; for the shared
// cluster they return an error; for REDIS_CLUSTER_ADDRS there are none.
func (c *RedisCluster) Nodes() []*RedisServer { return append([]*RedisServer(nil), c.nodes...) }

// WaitReady waits up to timeout until every node reports cluster_state ok
// with all slots served and every node known, as after a node restart.
func (c *RedisCluster) WaitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	for _, addr := range c.addrs {
		errs = append(errs, waitClusterNode(ctx, addr, len(c.addrs)))
	}
	return errors.Join(errs...)
}
