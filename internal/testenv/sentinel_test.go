package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNewSentinel: the setup replicates and the sentinel reports the
// primary; a forced failover, or a SIGKILL of the primary, promotes the
// replica, which holds what was written on the primary.
func TestNewSentinel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		down func(*RedisSentinel, context.Context) error
	}{
		{"SENTINEL FAILOVER", (*RedisSentinel).Failover},
		{"SIGKILL", func(s *RedisSentinel, ctx context.Context) error {
			n, err := s.KillMaster(ctx)
			if err == nil && (n != s.Nodes()[0] || n.PID() != 0) {
				t.Errorf("KillMaster killed %v (PID %d after), want the first node", n.Addr(), n.PID())
			}
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := NewSentinel(t, RedisSentinelOptions{MasterName: "rankd-test"})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			nodes := s.Nodes()
			if len(nodes) != 2 || len(s.Addrs()) != 1 || s.Addrs()[0] != s.Sentinel().Addr() || s.MasterName() != "rankd-test" {
				t.Fatalf("nodes %d, sentinels %v, name %q", len(nodes), s.Addrs(), s.MasterName())
			}
			first, second := nodes[0].Addr(), nodes[1].Addr()
			if m, err := s.Master(ctx); err != nil || m != first {
				t.Fatalf("master = %q, %v; want %s", m, err, first)
			}
			if s.Node(second) != nodes[1] || s.Node("127.0.0.1:1") != nil {
				t.Error("Node does not find the nodes by address")
			}

			// Written on the primary, replicated.
			p := nodes[0].Client(t)
			if err := p.Set(ctx, "k", "v1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := p.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
				t.Fatalf("WAIT = %d, %v", n, err)
			}

			start := time.Now()
			if err := tt.down(s, ctx); err != nil {
				t.Fatal(err)
			}
			m, err := s.WaitMaster(ctx, first)
			if err != nil || m != second {
				t.Fatalf("master %q, %v; want %s", m, err, second)
			}
			t.Logf("promoted %v after %s", time.Since(start).Round(10*time.Millisecond), tt.name)
			c := nodes[1].Client(t)
			if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v1" {
				t.Fatalf("GET k on the promoted node = %q, %v", got, err)
			}
			if err := c.Set(ctx, "k", "v2", 0).Err(); err != nil {
				t.Fatalf("SET on the promoted node: %v", err)
			}
		})
	}
}

// TestRedisServerPause: a paused server answers nothing until resumed;
// the shared server cannot be paused.
func TestRedisServerPause(t *testing.T) {
	t.Parallel()
	srv := NewRedis(t, RedisOptions{})
	ctx := t.Context()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("a paused server answered PING")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Resume: %v", err)
	}
	// Paused at cleanup: the server still stops (SIGCONT, then SIGTERM).
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := Redis(t).Pause(); err == nil {
		t.Error("Pause of the shared server succeeded; want an error")
	}
}
