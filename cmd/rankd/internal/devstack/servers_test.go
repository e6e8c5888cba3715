package devstack

import (
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// TestRedis starts the dev Redis both ways, redis-server from PATH and,
// with an empty PATH, miniredis; each answers, and Close leaves nothing
// behind.
func TestRedis(t *testing.T) {
	t.Run("redis-server", func(t *testing.T) {
		if _, err := exec.LookPath("redis-server"); err != nil {
			testenv.Unavailable(t, "redis-server not found in PATH: apt-get install redis-server")
		}
		r := checkRedis(t, "redis-server ")
		m := regexp.MustCompile(`data in (\S+)\)$`).FindStringSubmatch(r.Kind)
		if m == nil {
			t.Fatalf("kind %q names no data dir", r.Kind)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
			t.Errorf("data dir %s left behind (stat: %v)", m[1], err)
		}
		if c, err := net.DialTimeout("tcp", r.Addr, time.Second); err == nil {
			c.Close()
			t.Errorf("redis-server still answers on %s after Close", r.Addr)
		}
	})
	t.Run("miniredis", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		r := checkRedis(t, "miniredis ")
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if c, err := net.DialTimeout("tcp", r.Addr, time.Second); err == nil {
			c.Close()
			t.Errorf("miniredis still answers on %s after Close", r.Addr)
		}
	})
}

// checkRedis starts the dev Redis, checks its kind and that a key with a
// TTL expires in real time (miniredis's clock is moved by a ticker).
func checkRedis(t *testing.T, kind string) *redisServer {
	t.Helper()
	r, err := startRedis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if !strings.HasPrefix(r.Kind, kind) {
		t.Errorf("kind %q, want %q...", r.Kind, kind)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if err := rdb.Set(t.Context(), "k", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(t.Context(), "k").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("a key with a TTL of 1s still exists after 5s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

// TestBroker starts the embedded broker with its topics and writes to one.
func TestBroker(t *testing.T) {
	b, err := startBroker("127.0.0.1:0", 3, "gift", "dl")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conn, err := kafka.DialContext(t.Context(), "tcp", b.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions("gift", "dl")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 6 {
		t.Errorf("%d partitions, want 3 per topic", len(parts))
	}
}
