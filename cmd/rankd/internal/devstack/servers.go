package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/rankd/rankd/internal/servers"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The servers `rankd dev` embeds: a Kafka-protocol broker (kfake, in
// process) and a Redis (redis-server from PATH, else miniredis in process).

// broker is an in-process single-broker kfake cluster with topics
// created, in memory only.
type broker struct {
	cluster *kfake.Cluster
}

// startBroker starts the broker listening on addr (host:port; port 0: a
// free one), which is also the address it advertises.
func startBroker(addr string, partitions int, topics ...string) (*broker, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kafka listen: %w (a Kafka or another rankd dev running? try --kafka 127.0.0.1:0 for any free port)", err)
	}
	listen := func(string, string) (net.Listener, error) {
		if l := ln; l != nil {
			ln = nil
			return l, nil
		}
		return nil, errors.New("the embedded broker listens once")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(listen), kfake.SeedTopics(int32(partitions), topics...))
	if err != nil {
		if ln != nil {
			ln.Close()
		}
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
// temp dir (servers.StartRedis), or, when there is none, miniredis in
// process.
func startRedis(ctx context.Context) (*redisServer, error) {
	r, err := servers.StartRedis(ctx, servers.RedisOptions{})
	if errors.Is(err, servers.ErrNoRedisServer) {
		return startMiniredis()
	}
	if err != nil {
		return nil, err
	}
	version := "?"
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		version = redisVersion(info)
	}
	_ = rdb.Close()
	return &redisServer{
		Addr: r.Addr(),
		Kind: "redis-server " + version + " (from PATH, data in " + r.Dir() + ")",
		stop: sync.OnceValue(func() error { r.Close(); return nil }),
	}, nil
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
