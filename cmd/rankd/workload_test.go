package main

import (
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/workload"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestProduce runs `rankd produce` against a broker: a seeded count, then
// a file, and reads back what arrived.
func TestProduce(t *testing.T) {
	broker := testenv.NewKafka(t, testenv.KafkaOptions{SeedTopics: map[string]int{"gift": 3, "like": 3, "comment": 3}})
	brokers := strings.Join(broker.Addrs(), ",")
	code, stdout, stderr := runCLI(t, "produce", "--brokers", brokers, "--count", "3000", "--rate", "0",
		"--seed", "9", "--start", "2026-11-21T12:00:00Z", "--step", "1s")
	if code != 0 || !strings.HasPrefix(stdout, "sent 3000 events in ") || !strings.Contains(stdout, "events/s)") {
		t.Fatalf("produce: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "seed 9") {
		t.Errorf("the seed is not printed: %s", stderr)
	}
	file := writeFile(t, "events.jsonl", `{"topic":"gift","id":"f1","ts":1,"anchor_id":"a1","coins":5}
{"id":"f2","ts":2,"anchor_id":"a2"}
`)
	if code, stdout, stderr := runCLI(t, "produce", "--brokers", brokers, "--file", file, "--topic", "like"); code != 0 || !strings.HasPrefix(stdout, "sent 2 events") {
		t.Fatalf("produce --file: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	ctx := ctxTimeout(t, 30*time.Second)
	got := map[string][]kafka.Message{}
	for _, topic := range []string{"gift", "like", "comment"} {
		for p := range 3 {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: broker.Addrs(), Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
			conn, err := kafka.DialLeader(ctx, "tcp", broker.Addrs()[0], topic, p)
			if err != nil {
				t.Fatal(err)
			}
			last, err := conn.ReadLastOffset()
			conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			for range last {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got[topic] = append(got[topic], m)
			}
			r.Close()
		}
	}
	n := len(got["gift"]) + len(got["like"]) + len(got["comment"])
	if n != 3002 || len(got["like"]) < 1800 {
		t.Fatalf("read back %d gift, %d like, %d comment messages; want 3002, mostly likes", len(got["gift"]), len(got["like"]), len(got["comment"]))
	}
	// the seeded workload is what workload.New gives, keyed by anchor
	wl, _ := workload.New(workload.Config{Seed: 9, Start: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), Step: time.Second})
	want := map[string]string{}
	for range 3000 {
		ev := wl.Next()
		want[string(ev.Value)] = string(ev.Key)
	}
	fromFile := 0
	for _, ms := range got {
		for _, m := range ms {
			key, ok := want[string(m.Value)]
			switch {
			case ok && key == string(m.Key):
			case strings.Contains(string(m.Value), `"id":"f`):
				fromFile++
			default:
				t.Fatalf("unexpected message %s key %s on %s", m.Value, m.Key, m.Topic)
			}
		}
	}
	if fromFile != 2 {
		t.Errorf("%d messages from the file, want 2", fromFile)
	}
}

// TestRollover runs `rankd rollover` against Redis.
func TestRollover(t *testing.T) {
	srv := testenv.Redis(t)
	prefix := testenv.Prefix(t)
	text := strings.Replace(strings.Replace(string(config.Example()), "addr: localhost:6379", "addr: "+srv.Addr(), 1),
		"prefix: rankd", "prefix: "+prefix, 1)
	path := writeFile(t, "rankd.yaml", text)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// one member on anchor_7d in the current day
	st, err := store.New(srv.Client(t), cfg.Boards(), store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.Apply(t.Context(), store.Group([]ranking.Update{{Board: "anchor_7d", Member: "a1", Value: 5, Time: now, MsgID: "m1"}})); err != nil {
		t.Fatal(err)
	}
	next := cfg.Board("anchor_7d").Calendar().Next(cfg.Board("anchor_7d").Calendar().At(now))
	code, stdout, stderr := runCLI(t, "rollover", "--config", path, "--at", next.Start.Add(time.Minute).Format(time.RFC3339))
	if code != 0 || !strings.Contains(stdout, "anchor_7d: rolled up to period "+next.ID+" (") {
		t.Fatalf("rollover: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	// the next day's window already holds a1 (S(next) = S(now))
	key := store.Key(prefix, store.Tag("anchor_7d", nil), "r", next.ID)
	if n, err := srv.Client(t).ZCard(t.Context(), key).Result(); err != nil || n != 1 {
		t.Errorf("ZCARD %s = %d, %v; want 1 after the rollover", key, n, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--board", "anchor_hot_30m"}, `"anchor_hot_30m": a periodic board; only rolling boards roll over`},
		{[]string{"--board", "nope"}, `"nope": no such board`},
		{[]string{"--at", "tomorrow"}, `--at "tomorrow": want RFC 3339`},
	} {
		code, _, stderr := runCLI(t, append([]string{"rollover", "--config", path}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("rollover %v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
