package servers_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/servers"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// TestRedis starts redis-server, talks to it, stops it: the port is closed
// and the temp dir gone.
func TestRedis(t *testing.T) {
	r, err := servers.StartRedis(t.Context(), servers.RedisOptions{Args: []string{"--maxmemory", "64mb"}})
	if errors.Is(err, servers.ErrNoRedisServer) {
		testenv.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.ConfigGet(t.Context(), "maxmemory").Result(); err != nil || got["maxmemory"] != "67108864" {
		t.Errorf("maxmemory %v, %v: the extra arguments were not passed", got, err)
	}
	if r.PID() <= 0 {
		t.Errorf("PID %d", r.PID())
	}
	r.Close()
	if err := rdb.Ping(t.Context()).Err(); err == nil {
		t.Error("redis-server still answers after Close")
	}
	if _, err := os.Stat(r.Dir()); !os.IsNotExist(err) {
		t.Errorf("its dir %s is still there: %v", r.Dir(), err)
	}
}

// TestBroker starts the broker child (this test binary again), writes and
// reads a message, stops it.
func TestBroker(t *testing.T) {
	b, err := servers.StartBroker(t.Context(), servers.BrokerOptions{Topics: []string{"t1"}, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.PID() == os.Getpid() || b.PID() <= 0 {
		t.Fatalf("broker PID %d (this process %d)", b.PID(), os.Getpid())
	}
	conn, err := kafka.DialContext(t.Context(), "tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions("t1")
	conn.Close()
	if err != nil || len(parts) != 3 {
		t.Fatalf("t1 has %d partitions (%v), want 3", len(parts), err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.Addr()), Topic: "t1", BatchTimeout: time.Millisecond}
	if err := w.WriteMessages(t.Context(), kafka.Message{Value: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var got int
	for _, p := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addr()}, Topic: "t1", Partition: p.ID, MaxWait: 100 * time.Millisecond})
		lag, err := r.ReadLag(t.Context())
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		got += int(lag)
	}
	if got != 1 {
		t.Errorf("%d messages in t1, want 1", got)
	}
	b.Close()
	if c, err := kafka.Dial("tcp", b.Addr()); err == nil {
		c.Close()
		t.Error("the broker still accepts connections after Close")
	}
}
