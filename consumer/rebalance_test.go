package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

// countingSink counts the messages its consumer applied and slows each
// batch down a little, so that consumption spans the rebalances.
type countingSink struct {
	inner Sink
	delay time.Duration
	n     atomic.Int64
}

func (s *countingSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	time.Sleep(s.delay)
	dead, err := s.inner.Apply(ctx, msgs)
	if err == nil {
		s.n.Add(int64(len(msgs)))
	}
	return dead, err
}

// committedTotal returns the sum of the group's committed offsets and
// checks them against what was applied.
func (f *fixture) committedTotal(client *kafka.Client, rec *recordingSink) int64 {
	f.T.Helper()
	lags, err := GroupLag(f.T.Context(), client, f.Group, f.Topics)
	if err != nil {
		return 0
	}
	rec.checkCommits(f.T, lags)
	var sum int64
	for _, l := range lags {
		if l.Committed > 0 {
			sum += l.Committed
		}
	}
	return sum
}

// TestRebalance runs two consumers (one worker each) of one group while
// events are being produced, adds a third mid-stream, then stops the first
// mid-stream: every partition moves at least once. Committed offsets never
// pass the applied ones, each consumer does part of the work, and the
// boards equal the oracle.
func TestRebalance(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 3)
	msgs := world.Workload(3, 4000, "rebal")
	w := f.NewWriter()
	rec := newRecordingSink(f.sink())
	cfg := f.consumerConfig()
	cfg.Workers = 1
	cfg.BatchCount = 50
	sinks := make([]*countingSink, 3)
	for i := range sinks {
		sinks[i] = &countingSink{inner: rec, delay: 5 * time.Millisecond}
	}
	c1 := f.start(cfg, sinks[0])
	c2 := f.start(cfg, sinks[1])

	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < len(msgs); i += 50 { // over 3 seconds or more
			if t.Context().Err() != nil {
				return
			}
			f.Produce(w, msgs[i:min(i+50, len(msgs))])
			time.Sleep(40 * time.Millisecond)
		}
	}()

	client := f.LagClient()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("500 commits", func() bool { return f.committedTotal(client, rec) >= 500 })
	c3 := f.start(cfg, sinks[2])
	waitFor("the third consumer's first batch", func() bool { return sinks[2].n.Load() > 0 })
	at := f.committedTotal(client, rec)
	waitFor("500 more commits", func() bool { return f.committedTotal(client, rec) >= at+500 })
	if err := c1.stop(); err != nil {
		t.Fatalf("first consumer: %v", err)
	}
	t.Logf("first consumer left after applying %d messages", sinks[0].n.Load())
	<-produced
	if t.Failed() {
		t.FailNow()
	}
	f.waitCommitted(time.Minute, c2, c3)
	f.committedTotal(client, rec)
	for i, r := range []*running{c2, c3} {
		if err := r.stop(); err != nil {
			t.Fatalf("consumer %d: %v", i+2, err)
		}
	}
	for i, s := range sinks {
		if s.n.Load() == 0 {
			t.Errorf("consumer %d applied nothing", i+1)
		}
	}
	t.Logf("messages applied per consumer: %d, %d, %d (of %d produced)",
		sinks[0].n.Load(), sinks[1].n.Load(), sinks[2].n.Load(), len(msgs))
	o, applied := f.Reference(msgs)
	f.Compare(o)
	if got := total(f.metrics().sinkUpdates); got != float64(applied) {
		t.Errorf("updates applied = %v, want %d", got, applied)
	}
}
