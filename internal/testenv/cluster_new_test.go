package testenv

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNewClusterRestart: a node of a persistent dedicated cluster killed
// with SIGKILL comes back on its port with its keys and its cluster config,
// and one paused with SIGSTOP answers again after SIGCONT; the shared
// cluster's nodes refuse to be stopped.
func TestNewClusterRestart(t *testing.T) {
	t.Parallel()
	cluster := NewCluster(t, RedisClusterOptions{Persist: true})
	nodes := cluster.Nodes()
	if len(nodes) != 3 || len(cluster.Addrs()) != 3 {
		t.Fatalf("%d nodes, %d addrs; want 3", len(nodes), len(cluster.Addrs()))
	}
	c := cluster.Client(t)
	ctx := t.Context()
	const n = 300
	for i := range n {
		if err := c.Set(ctx, "k:"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("SET %d: %v", i, err)
		}
	}
	node := nodes[1]
	addr := node.Addr()
	if err := node.Kill(); err != nil {
		t.Fatal(err)
	}
	if node.PID() != 0 {
		t.Fatal("PID of a killed node is not 0")
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	if node.Addr() != addr {
		t.Fatalf("restarted on %s, was %s", node.Addr(), addr)
	}
	if err := cluster.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		got, err := c.Get(ctx, "k:"+strconv.Itoa(i)).Int()
		if err != nil || got != i {
			t.Fatalf("GET %d after the restart = %d, %v", i, got, err)
		}
	}

	pid := node.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	probe := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer probe.Close()
	if err := probe.Ping(t.Context()).Err(); err == nil {
		t.Fatal("a stopped node answered PING")
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	if _, err := exec.LookPath("redis-cli"); err == nil {
		out, err := exec.Command("redis-cli", "-p", strings.Split(addr, ":")[1], "config", "get", "appendfsync").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "always") {
			t.Fatalf("appendfsync of a persistent node: %s %v", out, err)
		}
	}
	if shared := Cluster(t).Nodes(); len(shared) > 0 {
		if err := shared[0].Stop(); err == nil {
			t.Error("Stop of a shared cluster node succeeded; want an error")
		}
	}
}
