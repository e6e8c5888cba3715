package replay

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// running is a consumer of the world's topics running in the background.
type running struct {
	c      *consumer.Consumer
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// runConsumer runs a consumer of the world's topics on its store until
// stop or the test's end.
func runConsumer(t *testing.T, f *world.World, reg *prometheus.Registry) *running {
	t.Helper()
	opts := []consumer.Option{consumer.WithRegisterer(reg), consumer.WithLogger(testLogger(t))}
	sink, err := consumer.NewRankingSink(f.Cfg.Schemas(), f.Router, f.Store, append(opts, consumer.WithTopicMap(f.TopicMap))...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(consumer.Config{Brokers: f.Broker.Addrs(), Group: f.Group, Topics: f.Topics, Workers: 2,
		BatchCount: 100, Linger: 5 * time.Millisecond, DeadLetterTopic: f.DLQ,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: time.Second,
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, LagInterval: 200 * time.Millisecond}, sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan struct{})}
	go func() { r.err = c.Run(ctx); close(r.done) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// stop stops the consumer and returns Run's error.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// stopped returns Run's error once it returned by itself.
func (r *running) stopped() error {
	select {
	case <-r.done:
		if r.err == nil {
			return context.Canceled
		}
		return r.err
	default:
		return nil
	}
}

// TestRedisWiped: Redis loses everything (a FLUSHALL) while the group has
// committed offsets. The consumer must halt those partitions (nothing
// applied or committed, /readyz 503 naming the cause, the metric up), and
// resume by itself once the boards are rebuilt from the log (Rebuild, as
// `rankd replay` does); then every board equals the oracle.
func TestRedisWiped(t *testing.T) {
	f := world.New(t, testenv.Redis(t), 3)
	ctx := t.Context()
	msgs := world.Workload(12, 1000, "wp")
	first, second := msgs[:600], msgs[600:]

	r := runConsumer(t, f, prometheus.NewRegistry())
	f.Produce(f.NewWriter(), first)
	f.WaitCommitted(time.Minute, r.stopped)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.RDB.Keys(ctx, f.Prefix+":*").Val() { // everything of this test's prefix is gone
		f.RDB.Del(ctx, k)
	}

	// A new instance finds committed offsets and no positions.
	reg := prometheus.NewRegistry()
	r = runConsumer(t, f, reg)
	c := r.c
	f.Produce(f.NewWriter(), second)
	deadline := time.Now().Add(30 * time.Second)
	for len(c.Halted()) < 9 {
		if time.Now().After(deadline) {
			t.Fatalf("halted %v, want all 9 partitions (3 topics x 3)", c.Halted())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := testutil.GatherAndCount(reg, "rankd_sink_partitions_behind"); err != nil || n != 1 {
		t.Fatalf("rankd_sink_partitions_behind: %d series, %v", n, err)
	}
	if got := gauge(t, reg, "rankd_sink_partitions_behind"); got != 9 {
		t.Fatalf("rankd_sink_partitions_behind = %v, want 9", got)
	}
	if err := c.NotReady(); err == nil || !strings.Contains(err.Error(), "redis holds no position") {
		t.Fatalf("NotReady() = %v, want the cause (/readyz 503 with it)", err)
	}
	time.Sleep(time.Second) // it would have applied and committed the second part by now
	if n, _ := f.RDB.Keys(ctx, f.Prefix+":{*").Result(); len(n) != 0 {
		t.Fatalf("%d board keys written while halted, want 0", len(n))
	}

	// Rebuild while the consumer waits.
	boards := boardNames(f)
	// Until its switch, the replay's marks of the new generation neither
	// resume the halted partitions (they would apply to the old generation,
	// whose dedupe keys are gone) nor count for finality: the observer,
	// told of the verification before the switch, waits past the
	// consumer's recheck of its halted partitions (every 2 s).
	obs := &beforeSwitch{check: func() {
		time.Sleep(2500 * time.Millisecond)
		if h := c.Halted(); len(h) != 9 {
			t.Errorf("before the replay's switch, %d partitions halted, want 9 (resumed from the replay's marks): %v", len(h), h)
		}
		if m, err := f.Store.LastMarks(ctx); err != nil || len(m) != 0 {
			t.Errorf("before the replay's switch, latest marks %v, %v; want none (a replay's marks are not live ones)", m, err)
		}
	}}
	rb := &Rebuild{Replay: Config{Brokers: f.Broker.Addrs(), Topics: f.Topics, BatchCount: 97},
		Schemas: f.Cfg.Schemas(), Router: f.Router, Boards: boards, Group: f.Group,
		Logger: testLogger(t), SinkOptions: []consumer.Option{consumer.WithTopicMap(f.TopicMap)}, Observer: obs}
	if _, err := rb.Run(ctx, f.Store); err != nil {
		t.Fatal(err)
	}
	if !obs.checked {
		t.Fatal("the rebuild never verified before its switch")
	}
	if m, err := f.Store.LastMarks(ctx); err != nil || len(m) != 9 {
		t.Errorf("after the switch, %d latest marks, %v; want 9 (raised with the positions)", len(m), err)
	}

	// The consumer resumes on its own.
	f.WaitCommitted(time.Minute, r.stopped)
	if h := c.Halted(); len(h) != 0 {
		t.Fatalf("still halted after the rebuild: %v", h)
	}
	o, _ := f.Reference(msgs)
	f.Compare(o)
}

// beforeSwitch is an Observer that runs check when the rebuild verified
// the new generation, before its switch.
type beforeSwitch struct {
	noObserver
	check   func()
	checked bool
}

func (o *beforeSwitch) Verified([]BoardSize) { o.check(); o.checked = true }

// gauge returns the value of the one series of the gauge name on reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
