package devstack

import (
	"bufio"
	"bytes"
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
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The servers `rankd dev` embeds: a Kafka-protocol broker (kfake, in
// process) and a Redis (redis-server from PATH, else miniredis in process).

// broker is an in-process single-broker kfake cluster on a free
// loopback port with topics created, in memory only.
type broker struct {
	cluster *kfake.Cluster
}

func startBroker(partitions int, topics ...string) (*broker, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...))
	if err != nil {
		return nil, fmt.Errorf("starting the embedded broker: %w", err)
	}
	return &broker{cluster: c}, nil
}

func (b *broker) Addrs() []string { return b.cluster.ListenAddrs() }

func (b *broker) Close() { b.cluster.Close() }

// redisServer is a Redis for `rankd dev`.
type redisServer struct {
	Addr string
	Kind string // what it is, for the banner
	stop func() error
}

// Close stops the server and removes its files; later calls return the
// first one's result.
func (r *redisServer) Close() error { return r.stop() }

// startRedis starts redis-server from PATH on a free loopback port with a
// temp dir, or, when there is none, miniredis in process.
func startRedis(ctx context.Context) (*redisServer, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return startMiniredis()
	}
	var last error
	for range 3 { // the free port may be taken before redis-server binds it
		r, err := startRedisServer(ctx, path)
		if err == nil {
			return r, nil
		}
		last = err
	}
	return nil, last
}

// startMiniredis starts miniredis on a free loopback port. miniredis only
// counts TTLs down when told to, so a ticker moves its clock with the real
// one: dedupe keys and old periods expire as on a real Redis.
func startMiniredis() (*redisServer, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting miniredis: %w", err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return &redisServer{
		Addr: m.Addr(),
		Kind: "miniredis (in process; no redis-server on PATH)",
		stop: sync.OnceValue(func() error {
			close(done)
			<-stopped
			m.Close()
			return nil
		}),
	}, nil
}

// redisReadyTimeout bounds the wait for redis-server to answer PING.
const redisReadyTimeout = 10 * time.Second

func startRedisServer(ctx context.Context, path string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rankd-dev-redis-")
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", logFile, "--daemonize", "no")
	detach(cmd)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := sync.OnceValue(func() error {
		defer os.RemoveAll(dir)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return nil
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("redis-server did not stop on SIGTERM; killed")
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		info, err := rdb.Info(ctx, "server").Result()
		if err == nil {
			return &redisServer{Addr: addr, Kind: "redis-server " + redisVersion(info) + " (" + path + ", data in " + dir + ")", stop: stop}, nil
		}
		select {
		case <-exited:
			msg := tail(logFile)
			_ = stop()
			return nil, fmt.Errorf("redis-server exited at start: %s", msg)
		case <-ctx.Done():
			_ = stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = stop()
			return nil, fmt.Errorf("redis-server not answering on %s after %v: %v", addr, redisReadyTimeout, err)
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// redisVersion returns redis_version from INFO server.
func redisVersion(info string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// tail returns the last lines of a file, for an error message.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-5):], []byte("\n")))
}
