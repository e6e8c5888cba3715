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

// blockingSink holds every Apply until released, telling when one starts.
type blockingSink struct {
	inner   Sink
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (s *blockingSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	if s.calls.Add(1) == 1 {
		close(s.entered)
	}
	<-s.release
	return s.inner.Apply(ctx, msgs)
}

// TestShutdownFinishesBatch cancels Run while a batch is being applied: the
// worker stops fetching, finishes that batch, commits it and returns nil;
// nothing else is applied after the cancel.
func TestShutdownFinishesBatch(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 3)
	f.Produce(f.NewWriter(), world.Workload(5, 500, "shutdown"))
	rec := newRecordingSink(f.sink())
	s := &blockingSink{inner: rec, entered: make(chan struct{}), release: make(chan struct{})}
	cfg := f.consumerConfig()
	cfg.Workers = 1
	r := f.start(cfg, s)
	select {
	case <-s.entered:
	case <-time.After(time.Minute):
		t.Fatal("no batch applied")
	}
	r.cancel()
	time.Sleep(200 * time.Millisecond) // Apply keeps going past the cancel
	close(s.release)
	if err := r.stop(); err != nil {
		t.Fatalf("Run = %v, want a clean shutdown", err)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d batches applied, want only the one in hand at the cancel", n)
	}
	lags, err := GroupLag(t.Context(), f.LagClient(), f.Group, f.Topics)
	if err != nil {
		t.Fatal(err)
	}
	rec.checkCommits(t, lags)
	for k, h := range rec.high {
		for _, l := range lags {
			if l.Topic == k.topic && l.Partition == k.partition && l.Committed != h+1 {
				t.Errorf("%s/%d committed at %d, want %d: the batch in hand was not committed", k.topic, k.partition, l.Committed, h+1)
			}
		}
	}
	if len(rec.high) == 0 {
		t.Fatal("the batch in hand was not applied")
	}
}
