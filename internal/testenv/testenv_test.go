package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

func TestMain(m *testing.M) { Main(m) }

func TestRedis(t *testing.T) {
	t.Parallel()
	srv := Redis(t)
	c := srv.Client(t)
	ctx := t.Context()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	key := Prefix(t) + ":k"
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	if _, err := srv.UsedCPU(ctx); err != nil {
		t.Errorf("UsedCPU: %v", err)
	}
	if Redis(t) != srv {
		t.Error("Redis returned a second shared server")
	}
	if err := srv.Stop(); err == nil {
		t.Error("Stop of the shared server succeeded; want an error")
	}
}

func TestNewRedisRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		persist bool
		down    func(*RedisServer) error
		kept    bool
	}{
		{name: "persist stop", persist: true, down: (*RedisServer).Stop, kept: true},
		{name: "persist kill", persist: true, down: (*RedisServer).Kill, kept: true},
		{name: "no persist stop", persist: false, down: (*RedisServer).Stop, kept: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := NewRedis(t, RedisOptions{Persist: tt.persist})
			c := srv.Client(t)
			ctx := t.Context()
			addr, pid := srv.Addr(), srv.PID()
			if pid == 0 {
				t.Fatal("PID = 0 for a running server")
			}
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := tt.down(srv); err != nil {
				t.Fatal(err)
			}
			if got := srv.PID(); got != 0 {
				t.Fatalf("PID = %d after stop; want 0", got)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			if srv.Addr() != addr || srv.PID() == pid || srv.PID() == 0 {
				t.Fatalf("after Start: addr %s pid %d; before: addr %s pid %d", srv.Addr(), srv.PID(), addr, pid)
			}
			got, err := c.Get(ctx, "k").Result()
			switch {
			case tt.kept && (err != nil || got != "v"):
				t.Fatalf("GET after restart = %q, %v; want v", got, err)
			case !tt.kept && err != redis.Nil:
				t.Fatalf("GET after restart = %q, %v; want nil", got, err)
			}
		})
	}
}

func TestNewRedisRestartMethod(t *testing.T) {
	t.Parallel()
	srv := NewRedis(t, RedisOptions{Persist: true, Args: []string{"--maxmemory", "64mb"}})
	c := srv.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Restart = %q, %v; want v", got, err)
	}
	if got, err := c.ConfigGet(ctx, "maxmemory").Result(); err != nil || got["maxmemory"] != strconv.Itoa(64<<20) {
		t.Fatalf("maxmemory = %v, %v; want %d", got, err, 64<<20)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	cluster := Cluster(t)
	if n := len(cluster.Addrs()); n < 3 {
		t.Fatalf("%d nodes; want 3", n)
	}
	c := cluster.Client(t)
	ctx := t.Context()
	prefix := Prefix(t)
	const n = 300
	for i := range n {
		if err := c.Set(ctx, fmt.Sprintf("%s:%d", prefix, i), i, 0).Err(); err != nil {
			t.Fatalf("SET %d: %v", i, err)
		}
	}
	for i := range n {
		got, err := c.Get(ctx, fmt.Sprintf("%s:%d", prefix, i)).Int()
		if err != nil || got != i {
			t.Fatalf("GET %d = %d, %v", i, got, err)
		}
	}
	var masters atomic.Int32 // ForEachMaster runs fn concurrently
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		size, err := m.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		if size == 0 {
			return fmt.Errorf("master %s holds no key", m.Options().Addr)
		}
		masters.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := masters.Load(); n < 3 {
		t.Fatalf("%d masters; want 3", n)
	}
}

func TestKafka(t *testing.T) {
	t.Parallel()
	b := Kafka(t)
	topic := b.Topic(t, "events")
	b.CreateTopic(t, topic, 3)
	produce(t, b.Addrs(), topic, 0, 100)
	group := Prefix(t)
	got := consume(t, b.Addrs(), topic, group, 100)
	checkValues(t, got, 0, 100)

	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...)}
	resp, err := client.OffsetFetch(t.Context(), &kafka.OffsetFetchRequest{
		GroupID: group,
		Topics:  map[string][]int{topic: {0, 1, 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, p := range resp.Topics[topic] {
		committed += p.CommittedOffset
	}
	if committed != 100 {
		t.Fatalf("committed offsets sum to %d; want 100", committed)
	}
}

func TestNewKafkaRestart(t *testing.T) {
	t.Parallel()
	b := NewKafka(t, KafkaOptions{DataDir: t.TempDir(), SeedTopics: map[string]int{"seeded": 2}})
	produce(t, b.Addrs(), "seeded", 0, 20)
	group := Prefix(t)
	got := consume(t, b.Addrs(), "seeded", group, 10)
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	// The group resumes from its committed offsets: the two sessions read
	// each message once.
	got = append(got, consume(t, b.Addrs(), "seeded", group, 10)...)
	checkValues(t, got, 0, 20)
}

func TestBrokerProcess(t *testing.T) {
	t.Parallel()
	const topic = "gift"
	bp := StartBrokerProcess(t, BrokerProcessOptions{Topics: []string{topic}, Partitions: 3})
	group := Prefix(t)
	produce(t, bp.Addrs(), topic, 0, 50)
	checkValues(t, consume(t, bp.Addrs(), topic, group, 50), 0, 50)

	addr := bp.Addrs()[0]
	bp.Kill()
	if pid := bp.PID(); pid != 0 {
		t.Fatalf("PID = %d after Kill; want 0", pid)
	}
	if err := bp.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := bp.Addrs()[0]; got != addr {
		t.Fatalf("address after Restart = %s; want %s", got, addr)
	}
	produce(t, bp.Addrs(), topic, 50, 50)
	// Committed offsets survived the crash: the group resumes after the
	// first fifty messages.
	checkValues(t, consume(t, bp.Addrs(), topic, group, 50), 50, 50)
}

func TestKcat(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("kcat"); err != nil {
		Unavailable(t, "kcat not found in PATH: install kcat (apt-get install kcat)")
	}
	b := Kafka(t)
	topic := b.Topic(t, "kcat")
	b.CreateTopic(t, topic, 1)
	broker := strings.Join(b.Addrs(), ",")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	want := []string{"a", "b", "c"}
	p := exec.CommandContext(ctx, "kcat", "-b", broker, "-t", topic, "-P")
	p.Stdin = strings.NewReader(strings.Join(want, "\n") + "\n")
	if out, err := p.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	produce(t, b.Addrs(), topic, 0, 1) // and one from kafka-go: "0"

	out, err := exec.CommandContext(ctx, "kcat", "-b", broker, "-t", topic, "-C", "-e", "-q", "-o", "beginning").Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	got := strings.Fields(string(out))
	if want := append(want, "0"); !slices.Equal(got, want) {
		t.Fatalf("kcat consumed %q; want %q", got, want)
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"TestApply", "testapply"},
		{"TestApply/sub case#01", "testapply_sub_case_01"},
		{"Test__x--y", "test_x_y"},
		{"///", "t"},
		{strings.Repeat("a", 100), strings.Repeat("a", maxNameLen)},
	}
	for _, tt := range tests {
		if got := sanitize(tt.in); got != tt.want {
			t.Errorf("sanitize(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestPrefixUnique(t *testing.T) {
	t.Parallel()
	a, b := Prefix(t), Prefix(t)
	if a == b {
		t.Fatalf("Prefix twice = %q", a)
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			t.Fatalf("Prefix %q holds %q", a, r)
		}
	}
}

func TestParseUsedCPU(t *testing.T) {
	t.Parallel()
	info := "# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.25\r\nused_cpu_sys_children:9\r\n"
	if got, err := parseUsedCPU(info); err != nil || got != 3.75 {
		t.Fatalf("parseUsedCPU = %v, %v; want 3.75", got, err)
	}
	if _, err := parseUsedCPU("# CPU\r\n"); err == nil {
		t.Fatal("parseUsedCPU of an empty section succeeded")
	}
}

// produce writes n messages whose values are from, from+1, ... to topic.
func produce(t *testing.T, addrs []string, topic string, from, n int) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(addrs...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		BatchSize:    1000,
		BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll,
	}
	defer w.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		v := strconv.Itoa(from + i)
		msgs[i] = kafka.Message{Key: []byte(v), Value: []byte(v)}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("writing to %s: %v", topic, err)
	}
}

// consume reads n messages of topic as a member of group, commits them and
// leaves the group; it returns their values.
func consume(t *testing.T, addrs []string, topic, group string, n int) []int {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: addrs,
		GroupID: group,
		Topic:   topic,
		MaxWait: 250 * time.Millisecond,
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var (
		msgs []kafka.Message
		vals []int
	)
	for range n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("reading %s after %d messages: %v", topic, len(msgs), err)
		}
		v, err := strconv.Atoi(string(m.Value))
		if err != nil {
			t.Fatalf("message value %q: %v", m.Value, err)
		}
		msgs = append(msgs, m)
		vals = append(vals, v)
	}
	if err := r.CommitMessages(ctx, msgs...); err != nil {
		t.Fatalf("committing: %v", err)
	}
	return vals
}

// checkValues fails t unless got holds exactly from, from+1, ..., from+n-1
// in any order.
func checkValues(t *testing.T, got []int, from, n int) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(got))
	want := make([]int, n)
	for i := range want {
		want[i] = from + i
	}
	if !slices.Equal(sorted, want) {
		t.Fatalf("values %v; want %d..%d", sorted, from, from+n-1)
	}
}

func TestDockerHealthy(t *testing.T) {
	t.Parallel()
	start := time.Now()
	healthy := DockerHealthy()
	t.Logf("DockerHealthy() = %v in %v", healthy, time.Since(start))
	if again := DockerHealthy(); again != healthy {
		t.Fatalf("DockerHealthy changed its answer: %v then %v", healthy, again)
	}
}
