package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is one test's world (world.World: the example config, topics,
// group, dead-letter topic and key prefix of its own) plus the registry
// its sinks and consumers share.
type fixture struct {
	*world.World
	reg *prometheus.Registry
}

// newFixture creates the test's world on rsrv (see world.New).
func newFixture(t *testing.T, rsrv *testenv.RedisServer, partitions int) *fixture {
	t.Helper()
	return &fixture{World: world.New(t, rsrv, partitions), reg: prometheus.NewRegistry()}
}

// sink returns a RankingSink of the fixture on its registry.
func (f *fixture) sink() *RankingSink {
	f.T.Helper()
	s, err := NewRankingSink(f.Cfg.Schemas(), f.Router, f.Store, WithTopicMap(f.TopicMap), WithRegisterer(f.reg))
	if err != nil {
		f.T.Fatal(err)
	}
	return s
}

// consumerConfig returns a Config tuned for fast tests: short group timers,
// small batches, fast retries.
func (f *fixture) consumerConfig() Config {
	return Config{
		Brokers:           f.Broker.Addrs(),
		Group:             f.Group,
		Topics:            f.Topics,
		Workers:           2,
		BatchCount:        200,
		Linger:            10 * time.Millisecond,
		DeadLetterTopic:   f.DLQ,
		ShutdownTimeout:   5 * time.Second,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 250 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		RebalanceTimeout:  6 * time.Second,
		RetryMin:          20 * time.Millisecond,
		RetryMax:          400 * time.Millisecond,
		CommitTimeout:     5 * time.Second,
		LagInterval:       200 * time.Millisecond,
	}
}

// testLogger logs warnings and errors to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// running is a Consumer running in the background.
type running struct {
	c      *Consumer
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs a Consumer of cfg until stop (or the test's end).
func (f *fixture) start(cfg Config, sink Sink, opts ...Option) *running {
	f.T.Helper()
	opts = append([]Option{WithRegisterer(f.reg), WithLogger(testLogger(f.T))}, opts...)
	c, err := New(cfg, sink, opts...)
	if err != nil {
		f.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = c.Run(ctx)
	}()
	f.T.Cleanup(func() { r.stop() })
	return r
}

// waitReady waits until every worker of r has joined the group, so that
// nothing produced afterwards is fetched across the workers' joining
// rebalance (which redelivers an in-flight batch: exact on the boards thanks
// to dedupe, but its dead letters would be written twice).
func (f *fixture) waitReady(r *running) {
	f.T.Helper()
	for deadline := time.Now().Add(30 * time.Second); !r.c.Ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || r.exited() {
			f.T.Fatal("consumer did not join its group within 30 s")
		}
	}
}

// stop cancels the consumer and waits for Run; it returns Run's error.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// exited reports whether Run has returned.
func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitCommitted waits until the group has committed every message of its
// topics (ListOffsets vs OffsetFetch), failing the test after timeout or
// when a consumer's Run returned early.
func (f *fixture) waitCommitted(timeout time.Duration, rs ...*running) {
	f.T.Helper()
	client := f.LagClient()
	deadline := time.Now().Add(timeout)
	var last []PartitionLag
	for {
		lags, err := GroupLag(f.T.Context(), client, f.Group, f.Topics)
		if err == nil {
			last = lags
			var total int64
			for _, l := range lags {
				total += l.Lag
			}
			if total == 0 && len(lags) > 0 {
				return
			}
		}
		for _, r := range rs {
			if r.exited() {
				f.T.Fatalf("consumer exited early: %v", r.err)
			}
		}
		if time.Now().After(deadline) {
			f.T.Fatalf("group %s not caught up after %v (last error %v): %+v", f.Group, timeout, err, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metrics returns the collectors the fixture's sinks and consumers share
// on f.reg (newMetrics hands out the ones registered there), to read with
// testutil.ToFloat64 (one series), testutil.CollectAndCount (how many
// series) or total.
func (f *fixture) metrics() *metrics {
	f.T.Helper()
	m, err := newMetrics(f.reg)
	if err != nil {
		f.T.Fatal(err)
	}
	return m
}

// total is what testutil.ToFloat64 reads of one series, summed over every
// series of c: counter and gauge values, histogram observation counts.
func total(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			panic(err)
		}
		switch {
		case pb.Counter != nil:
			sum += pb.Counter.GetValue()
		case pb.Gauge != nil:
			sum += pb.Gauge.GetValue()
		case pb.Histogram != nil:
			sum += float64(pb.Histogram.GetSampleCount())
		default:
			panic(fmt.Sprintf("total: a metric of another type: %v", &pb))
		}
	}
	return sum
}

// recordingSink wraps a Sink and records, per topic and partition, the
// highest offset of every batch that Apply returned without error.
type recordingSink struct {
	inner Sink
	mu    sync.Mutex
	high  map[topicPart]int64
}

func newRecordingSink(inner Sink) *recordingSink {
	return &recordingSink{inner: inner, high: map[topicPart]int64{}}
}

func (s *recordingSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	dead, err := s.inner.Apply(ctx, msgs)
	if err != nil {
		return dead, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		k := topicPart{m.Topic, m.Partition}
		if h, ok := s.high[k]; !ok || m.Offset > h {
			s.high[k] = m.Offset
		}
	}
	return dead, nil
}

// checkCommits fails the test when a committed offset is beyond the highest
// applied offset + 1 of its partition.
func (s *recordingSink) checkCommits(t *testing.T, lags []PartitionLag) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range lags {
		if l.Committed < 0 {
			continue
		}
		h, ok := s.high[topicPart{l.Topic, l.Partition}]
		if !ok || l.Committed > h+1 {
			t.Errorf("%s/%d committed at %d, but the highest applied offset is %d (applied: %v)",
				l.Topic, l.Partition, l.Committed, h, ok)
		}
	}
}

// errInjected is the transient failure that test sinks report.
var errInjected = errors.New("injected transient failure")
