package consumer

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

// faultySink applies every batch with the inner sink and then, on chosen
// batches, reports a transient error anyway: the batch is in Redis but the
// consumer must not commit it.
type faultySink struct {
	inner   Sink
	mu      sync.Mutex
	n       int // batches seen
	once    int // this batch fails once after applying (retry path)
	crash   int // from this batch on, every batch fails after applying
	onCrash func()
}

func (s *faultySink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	dead, err := s.inner.Apply(ctx, msgs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	switch {
	case s.n == s.once:
		return nil, errInjected
	case s.n >= s.crash:
		if s.n == s.crash {
			s.onCrash()
		}
		return nil, errInjected
	}
	return dead, nil
}

// TestCrashBetweenApplyAndCommit stops a worker between apply and commit:
// one batch is applied and then reported failed once (the worker retries
// the same batch: its updates are duplicates), and later every batch is
// applied and never committed while the consumer is stopped, as a crash
// would leave it. A fresh Consumer of the same group resumes from the
// committed offsets and redelivers the applied-but-uncommitted batches:
// the boards equal the oracle, nothing lost, nothing counted twice.
func TestCrashBetweenApplyAndCommit(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 3)
	msgs := world.Workload(2, 2500, "crash")
	f.Produce(f.NewWriter(), msgs)

	cfg := f.consumerConfig()
	cfg.BatchCount = 100
	cfg.ShutdownTimeout = 500 * time.Millisecond
	crashCh := make(chan struct{})
	faulty := &faultySink{inner: f.sink(), once: 3, crash: 8, onCrash: func() { close(crashCh) }}
	first := f.start(cfg, faulty)
	select {
	case <-crashCh:
	case <-time.After(time.Minute):
		t.Fatal("the consumer never reached the crash batch")
	}
	err := first.stop()
	if err == nil || !strings.Contains(err.Error(), "shutdown timeout") {
		t.Fatalf("Run after the crash = %v, want a shutdown timeout error naming the batch in hand", err)
	}
	if testutil.ToFloat64(f.metrics().retries.WithLabelValues("apply")) < 1 {
		t.Error("no apply retry counted after the injected failure")
	}
	lags, err := GroupLag(t.Context(), f.LagClient(), f.Group, f.Topics)
	if err != nil {
		t.Fatal(err)
	}
	var pending int64
	for _, l := range lags {
		pending += l.Lag
	}
	if pending == 0 {
		t.Fatal("everything was committed before the crash; the test proves nothing")
	}
	t.Logf("after the crash: %d messages not committed", pending)

	dupsBefore := testutil.ToFloat64(f.metrics().duplicates)
	second := f.start(f.consumerConfig(), f.sink())
	f.waitCommitted(time.Minute, second)
	if err := second.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if testutil.ToFloat64(f.metrics().duplicates) <= dupsBefore {
		t.Error("the resumed consumer saw no duplicates; the crashed batches were not redelivered")
	}
	o, applied := f.Reference(msgs)
	f.Compare(o)
	if got := total(f.metrics().sinkUpdates); got != float64(applied) {
		t.Errorf("updates applied = %v over both runs, want %d: something was counted twice or lost", got, applied)
	}
}
