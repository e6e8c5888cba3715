package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/cmd/rankd/internal/produce"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/workload"
)

// The SIGKILL crash test: `rankd run` (the binary, with the example config)
// consumes from a broker process into a redis-server while it is killed
// with SIGKILL at random moments and started again, and a burst of events
// is produced in the background at every start. After the last start
// drains the topics (committed offsets = end offsets), every board (every
// dims and period) must equal the oracle fed with the same events routed
// through the same config: nothing lost, nothing counted twice, nothing
// dead-lettered but the deliberately bad messages. RANKD_CRASH_SEED=N
// replays the events and the random delays of a run.
const (
	crashPartitions = 4
	crashBefore     = 20000 // events produced before the first start
	crashDuring     = 36000 // events produced while rankd is being killed, a burst per start
	crashCycles     = 6     // SIGKILLs
)

// crashBad are messages that every run must dead-letter (once or more: the
// dead-letter topic is at least once), and nothing else may be.
var crashBad = []kafka.Message{
	{Topic: "gift", Key: []byte("bad"), Value: []byte(`not json at all`)},
	{Topic: "like", Key: []byte("bad"), Value: []byte(`{"id":"bad-1","ts":"yesterday","anchor_id":"a1"}`)},
	{Topic: "gift", Key: []byte("bad"), Value: []byte(`{"id":"bad-2","ts":1700000000000,"coins":5}`)},
	{Topic: "comment", Key: []byte("bad"), Value: []byte(`{"id":"bad-3","ts":9999999999999,"news_id":"n1"}`)},
}

func testCrash(t *testing.T, bin string) {
	seed := time.Now().UnixNano() % 1e6
	if s := os.Getenv("RANKD_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("RANKD_CRASH_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay with RANKD_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc4a5))
	for _, k := range []string{"RANKD_KAFKA_BROKERS", "RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS", "RANKD_REDIS_PASSWORD", "RANKD_HTTP_LISTEN"} {
		t.Setenv(k, "") // the in-process config must see what the subprocess sees
	}

	broker := testenv.StartBrokerProcess(t, testenv.BrokerProcessOptions{
		Topics: []string{"gift", "like", "comment", "rankd-dead-letter"}, Partitions: crashPartitions})
	rsrv := testenv.NewRedis(t, testenv.RedisOptions{})
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfgPath := writeCrashConfig(t, broker.Addrs()[0], rsrv.Addr(), strings.TrimPrefix(base, "http://"))
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}

	// Event times: 30 hours spread over every event, ending 4 hours ago,
	// so the 30m, day and rolling boards get many periods. Event times
	// grow with offsets in every partition, so with lateness judged per
	// partition no event is late under the default grace (5m), whatever
	// the consumption order, the kills and the backlog.
	total := crashBefore + crashDuring
	step := 30 * time.Hour / time.Duration(total)
	wl, err := workload.New(workload.Config{Seed: seed, Start: time.Now().Add(-34 * time.Hour).Truncate(time.Second), Step: step})
	if err != nil {
		t.Fatal(err)
	}
	w := produce.NewWriter(broker.Addrs())
	t.Cleanup(func() { _ = w.Close() })
	var (
		mu       sync.Mutex
		produced []kafka.Message
	)
	produce := func(ctx context.Context, n int) error { // at full speed, recording what was acknowledged
		src := func() (kafka.Message, bool, error) {
			ev := wl.Next()
			return kafka.Message{Topic: ev.Topic, Key: ev.Key, Value: ev.Value}, true, nil
		}
		rec := &recordingWriter{w: w, mu: &mu, out: &produced}
		_, err := produce.Pace(ctx, rec, src, produce.Options{Count: int64(n)})
		return err
	}
	ctx := ctxTimeout(t, 3*time.Minute)
	if err := produce(ctx, crashBefore/2); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(ctx, crashBad...); err != nil {
		t.Fatal(err)
	}
	if err := produce(ctx, crashBefore-crashBefore/2); err != nil {
		t.Fatal(err)
	}

	env := cleanEnv("")
	args := []string{"run", "--config", cfgPath, "--log-format", "text", "--log-level", "warn",
		"--session-timeout", "1s", "--heartbeat-interval", "100ms", "--rebalance-timeout", "1s"}
	lag := newLagReader(t, broker.Addrs(), cfg.Kafka.Group, cfg.Kafka.Topics)
	start := time.Now()
	var outputs []string
	dups := 0.0 // duplicates skipped by the runs: redeliveries of applied but uncommitted batches
	// Each start meets a burst of new events produced in the background, so
	// that there is a backlog to be in the middle of. Odd cycles kill at a
	// random time after the start (often while the group rebalances), even
	// ones a random moment after the new process committed its first batch
	// (mid-stream).
	for cycle := 1; cycle <= crashCycles; cycle++ {
		before, _ := lag.totals()
		p := startRankd(t, bin, env, args...)
		started := time.Now()
		bg := make(chan error, 1)
		go func() { bg <- produce(ctx, crashDuring/crashCycles) }()
		how := ""
		if cycle%2 == 1 {
			d := time.Duration(200+rng.IntN(3800)) * time.Millisecond
			time.Sleep(d)
			how = fmt.Sprintf("%v after the start", d)
		} else {
			for {
				if c, end := lag.totals(); c > before || (c == end && time.Since(started) > time.Second) {
					break // committed a batch, or nothing left to commit
				}
				if p.exited() || time.Since(started) > 30*time.Second {
					t.Fatalf("cycle %d: no commit within %v (exited: %v):\n%s", cycle, time.Since(started), p.exited(), p.out.tail(40))
				}
				time.Sleep(20 * time.Millisecond)
			}
			d := time.Duration(rng.IntN(60)) * time.Millisecond
			time.Sleep(d)
			how = fmt.Sprintf("%v after its first commit (%v after the start)", d, time.Since(started).Round(time.Millisecond))
		}
		if p.exited() {
			t.Fatalf("cycle %d: rankd exited by itself (%v):\n%s", cycle, p.err, p.out.tail(40))
		}
		dups += scrapeCounter(base+"/metrics", "rankd_sink_duplicates_total")
		p.kill()
		if err := <-bg; err != nil {
			t.Fatalf("background producer: %v", err)
		}
		outputs = append(outputs, p.out.String())
		committed, end := lag.totals()
		mu.Lock()
		n := len(produced)
		mu.Unlock()
		t.Logf("cycle %d: SIGKILL %s: %d produced, %d of %d offsets committed", cycle, how, n, committed, end)
	}
	t.Logf("%d kills in %v; draining", crashCycles, time.Since(start).Round(time.Millisecond))

	p := startRankd(t, bin, env, args...)
	drainStart := time.Now()
	p.waitHTTP(30*time.Second, base+"/healthz", func(code int, _ []byte) bool { return code == 200 }) // up: SIGINT is handled
	for {
		committed, end := lag.totals()
		if committed == end && end > 0 {
			break
		}
		if p.exited() {
			t.Fatalf("rankd exited while draining (%v):\n%s", p.err, p.out.tail(40))
		}
		if time.Since(drainStart) > 90*time.Second {
			t.Fatalf("not drained after 90s: %d of %d offsets committed\n%s", committed, end, p.out.tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("drained in %v", time.Since(drainStart).Round(time.Millisecond))
	dups += scrapeCounter(base+"/metrics", "rankd_sink_duplicates_total")
	t.Logf("duplicates skipped over all runs (redelivered after a kill): %v", dups)
	if dups == 0 {
		t.Log("no kill landed between an apply and its commit this time: the run proved less than usual")
	}
	if code := p.interrupt(15 * time.Second); code != 0 {
		t.Fatalf("rankd run exited %d after SIGINT, want 0:\n%s", code, p.out.tail(40))
	}
	outputs = append(outputs, p.out.String())
	for i, out := range outputs {
		if strings.Contains(out, "panic") || strings.Contains(out, "DATA RACE") {
			t.Errorf("run %d:\n%s", i+1, out)
		}
	}

	mu.Lock()
	msgs := slices.Clone(produced)
	mu.Unlock()
	if len(msgs) != total {
		t.Fatalf("produced %d events, want %d", len(msgs), total)
	}
	compareWithOracle(t, cfg, rsrv.Client(t), msgs)
	checkDeadLetters(t, broker.Addrs(), cfg.Kafka.DeadLetterTopic)
}

// writeCrashConfig writes the example config with the test's addresses and
// a long retention on the boards of the Shanghai anchor (all but the total
// boards; the grace stays the default 5m), and returns its path.
func writeCrashConfig(t *testing.T, broker, redisAddr, listen string) string {
	t.Helper()
	text := string(config.Example())
	for _, r := range [][2]string{
		{"brokers: [localhost:9092]", "brokers: [" + broker + "]"},
		{"addr: localhost:6379", "addr: " + redisAddr},
		{`listen: ":8080"`, `listen: "` + listen + `"`},
		// periods of 34 hours ago stay readable through the test
		{"x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n", "x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n  retention: 240h\n"},
	} {
		if strings.Count(text, r[0]) != 1 {
			t.Fatalf("config/example.yaml: %q is not there exactly once; update the crash test", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	path := filepath.Join(t.TempDir(), "rankd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
