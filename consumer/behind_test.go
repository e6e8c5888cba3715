package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

// behindSink records, at every Apply, the batch's size and whether the
// consumer said it was behind.
type behindSink struct {
	inner Sink
	c     atomic.Pointer[Consumer]
	mu    sync.Mutex
	seen  []struct {
		n      int
		behind bool
	}
}

func (s *behindSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	if c := s.c.Load(); c != nil {
		s.mu.Lock()
		s.seen = append(s.seen, struct {
			n      int
			behind bool
		}{len(msgs), c.Behind()})
		s.mu.Unlock()
	}
	return s.inner.Apply(ctx, msgs)
}

// TestBehind: a consumer started on a backlog of 3100 messages with
// batches of 200 is behind while its batches are full, not at its last
// batch (cut by the linger, with nothing waiting), and not once it has
// caught up; nor after a backlog that ends with a full batch.
func TestBehind(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 1)
	w := f.NewWriter()
	f.Produce(w, world.Workload(7, 3100, "behind"))
	cfg := f.consumerConfig()
	cfg.Workers = 1
	sink := &behindSink{inner: f.sink()}
	c, err := New(cfg, sink, WithRegisterer(f.reg), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Behind() {
		t.Error("behind before any batch")
	}
	sink.c.Store(c)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	f.waitCommitted(2 * time.Minute)
	sink.mu.Lock()
	full, behindWhenFull := 0, 0
	for _, s := range sink.seen {
		if s.n == cfg.BatchCount {
			full++
			if s.behind {
				behindWhenFull++
			}
		}
	}
	last := sink.seen[len(sink.seen)-1]
	if full == 0 || behindWhenFull != full || last.n == cfg.BatchCount {
		t.Errorf("batches (size, behind): %v; want every full batch behind and a last one not full", sink.seen)
	}
	// the last batch was cut by the linger with nothing waiting
	if last.behind {
		t.Errorf("the last batch %v was behind", last)
	}
	sink.mu.Unlock()
	caughtUp := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); c.Behind(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still behind after 30 s with nothing to consume", what)
			}
		}
	}
	caughtUp("after 3100")
	// 400 more, produced at once to an idle consumer: usually two full
	// batches, the second the last; the worker then finds nothing waiting
	f.Produce(w, world.Workload(8, 400, "behind2"))
	f.waitCommitted(2 * time.Minute)
	caughtUp("after a backlog ending with a full batch")
}
