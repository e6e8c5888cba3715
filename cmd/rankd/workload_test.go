package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestWorkload checks the standard workload: its mix, skew and fields, that
// every event decodes and routes through the example config, and that a
// seed reproduces it.
func TestWorkload(t *testing.T) {
	const n = 50000
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	wl, err := newWorkload(workloadConfig{Seed: 42, Start: start, Step: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		t.Fatal(err)
	}
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	topics := map[string]int{}
	anchors := map[string]int{}
	ids := map[string]bool{}
	var coins, news, updates int
	gifts := map[string]int{}
	for i := range n {
		ev := wl.next()
		topics[ev.Topic]++
		if ids[ev.ID] {
			t.Fatalf("id %s twice", ev.ID)
		}
		ids[ev.ID] = true
		if want := start.Add(time.Duration(i) * 10 * time.Millisecond); !ev.Time.Equal(want) {
			t.Fatalf("event %d at %v, want %v", i, ev.Time, want)
		}
		var f map[string]any
		if err := json.Unmarshal(ev.Value, &f); err != nil {
			t.Fatalf("event %d is not JSON: %v: %s", i, err, ev.Value)
		}
		if f["id"] != ev.ID || int64(f["ts"].(float64)) != ev.Time.UnixMilli() || f["anchor_id"] != string(ev.Key) {
			t.Fatalf("event %d: id, ts or key differ from the JSON: %+v %s", i, ev, ev.Value)
		}
		anchor := f["anchor_id"].(string)
		anchors[anchor]++
		if f["room_id"] != "r"+anchor[1:] {
			t.Fatalf("room %v of anchor %s", f["room_id"], anchor)
		}
		switch ev.Topic {
		case "gift":
			gifts[f["gift_id"].(string)]++
			coins += int(f["coins"].(float64))
		case "comment":
			if f["news_id"] != nil {
				news++
			}
		}
		e, err := cfg.Schemas()[ev.Topic].Decode(ev.Topic, 0, int64(i), ev.Value, nil, ev.Time)
		if err != nil {
			t.Fatalf("event %d does not decode: %v: %s", i, err, ev.Value)
		}
		ups, err := router.Route(e)
		if err != nil {
			t.Fatalf("event %d does not route: %v: %s", i, err, ev.Value)
		}
		updates += len(ups)
	}
	share := func(topic string) float64 { return float64(topics[topic]) / n }
	for topic, want := range map[string]float64{"like": 0.7, "comment": 0.2, "gift": 0.1} {
		if got := share(topic); math.Abs(got-want) > 0.01 {
			t.Errorf("%s: %.3f of the events, want %.2f", topic, got, want)
		}
	}
	counts := slices.Sorted(func(yield func(int) bool) {
		for _, c := range anchors {
			if !yield(c) {
				return
			}
		}
	})
	top := counts[len(counts)-1]
	if float64(top)/n < 0.05 || len(anchors) < 5000 {
		t.Errorf("anchors not zipf-like: the top one has %d of %d events, %d distinct", top, n, len(anchors))
	}
	if s := float64(news) / float64(topics["comment"]); math.Abs(s-0.3) > 0.03 {
		t.Errorf("%.2f of comments have a news_id, want 0.3", s)
	}
	if len(gifts) != len(giftTable) || gifts["rose"] < gifts["carnival"] {
		t.Errorf("gift mix %v", gifts)
	}
	t.Logf("%d events: %v, %d anchors (top %d), gifts %v, %d coins, %d updates", n, topics, len(anchors), top, gifts, coins, updates)

	again, _ := newWorkload(workloadConfig{Seed: 42, Start: start, Step: 10 * time.Millisecond})
	first, _ := newWorkload(workloadConfig{Seed: 42, Start: start, Step: 10 * time.Millisecond})
	other, _ := newWorkload(workloadConfig{Seed: 43, Start: start, Step: 10 * time.Millisecond})
	for range 100 {
		a, b, c := again.next(), first.next(), other.next()
		if string(a.Value) != string(b.Value) || a.Topic != b.Topic || string(a.Key) != string(b.Key) {
			t.Fatalf("same seed, different events:\n%s\n%s", a.Value, b.Value)
		}
		if a.ID == c.ID {
			t.Fatalf("seeds 42 and 43 share id %s", a.ID)
		}
	}
}

func TestWorkloadTopicsAndClock(t *testing.T) {
	wl, err := newWorkload(workloadConfig{Seed: 1, Topics: []string{"gift", "comment"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	before := time.Now().Add(-time.Second)
	for range 3000 {
		ev := wl.next()
		seen[ev.Topic]++
		if ev.Time.Before(before) || ev.Time.After(time.Now().Add(time.Second)) {
			t.Fatalf("without Start, ts %v is not the wall clock", ev.Time)
		}
	}
	if seen["like"] != 0 || seen["gift"] == 0 || seen["comment"] < seen["gift"] {
		t.Errorf("topics gift,comment gave %v (want comment:gift ~ 2:1, no like)", seen)
	}
	if _, err := newWorkload(workloadConfig{Topics: []string{"follow"}}); err == nil {
		t.Error("unknown topic accepted")
	}
}

// fakeWriter records what pace writes.
type fakeWriter struct {
	mu    sync.Mutex
	msgs  []kafka.Message
	calls int
	fail  error
}

func (f *fakeWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.calls++
	f.msgs = append(f.msgs, msgs...)
	return nil
}

func TestPace(t *testing.T) {
	wl, _ := newWorkload(workloadConfig{Seed: 3})
	t.Run("count", func(t *testing.T) {
		w := &fakeWriter{}
		n, err := pace(t.Context(), w, workloadSource(wl), paceOptions{Count: 10000})
		if err != nil || n != 10000 || len(w.msgs) != 10000 || w.calls != 3 {
			t.Fatalf("pace = %d, %v; wrote %d in %d calls; want 10000 in 3 (chunks of %d)", n, err, len(w.msgs), w.calls, paceChunk)
		}
	})
	t.Run("rate and count", func(t *testing.T) {
		w := &fakeWriter{}
		n, err := pace(t.Context(), w, workloadSource(wl), paceOptions{Rate: 20000, Count: 500})
		if err != nil || n != 500 || w.calls < 2 {
			t.Fatalf("pace = %d, %v in %d calls; want 500 in several paced calls", n, err, w.calls)
		}
	})
	t.Run("source ends", func(t *testing.T) {
		w := &fakeWriter{}
		src := fileSource(strings.NewReader("{\"topic\":\"gift\",\"anchor_id\":\"a1\"}\n\n# comment\n{\"anchor_id\":7}\nnot json\n"), "like", "anchor_id")
		n, err := pace(t.Context(), w, src, paceOptions{})
		if err != nil || n != 3 {
			t.Fatalf("pace = %d, %v; want 3", n, err)
		}
		got := fmt.Sprint(w.msgs[0].Topic, string(w.msgs[0].Key), w.msgs[1].Topic, string(w.msgs[1].Key), w.msgs[2].Topic, string(w.msgs[2].Value))
		if got != "gifta1like7likenot json" {
			t.Errorf("messages %q", got)
		}
	})
	t.Run("no topic", func(t *testing.T) {
		_, err := pace(t.Context(), &fakeWriter{}, fileSource(strings.NewReader("{}\n"), "", "anchor_id"), paceOptions{})
		if err == nil || !strings.Contains(err.Error(), "line 1: no topic") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("write error", func(t *testing.T) {
		_, err := pace(t.Context(), &fakeWriter{fail: fmt.Errorf("broker down")}, workloadSource(wl), paceOptions{Count: 5})
		if err == nil || !strings.Contains(err.Error(), "broker down") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		n, err := pace(ctx, &fakeWriter{}, workloadSource(wl), paceOptions{Rate: 10})
		if err != nil || n != 0 {
			t.Fatalf("pace after cancel = %d, %v; want 0, nil", n, err)
		}
	})
}

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
	// the seeded workload is what newWorkload gives, keyed by anchor
	wl, _ := newWorkload(workloadConfig{Seed: 9, Start: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), Step: time.Second})
	want := map[string]string{}
	for range 3000 {
		ev := wl.next()
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
