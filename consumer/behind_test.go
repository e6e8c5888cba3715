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

// slowSink sleeps delay in every Apply.
type slowSink struct {
	inner Sink
	delay time.Duration
}

func (s *slowSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	time.Sleep(s.delay)
	return s.inner.Apply(ctx, msgs)
}

// TestLatency: a batch whose apply takes 300 ms shows in Latency as at
// least 300 ms (fetch to commit), and stops showing once no batch was
// committed for latencyWindow; Latency is 0 before any batch.
func TestLatency(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 1)
	cfg := f.consumerConfig()
	cfg.Workers = 1
	const delay = 300 * time.Millisecond
	r := f.start(cfg, &slowSink{inner: f.sink(), delay: delay})
	if got := r.c.Latency(); got != 0 {
		t.Errorf("latency before any batch: %v, want 0", got)
	}
	f.Produce(f.NewWriter(), world.Workload(9, 50, "latency"))
	var seen time.Duration
	for deadline := time.Now().Add(time.Minute); seen == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no batch latency within a minute")
		}
		seen = r.c.Latency()
	}
	if seen < delay {
		t.Errorf("latency of a batch applied in %v: %v", delay, seen)
	}
	// the window, exactly: a worker's batch committed now counts, one
	// committed just before the window does not
	w := &worker{}
	c := &Consumer{workers: []*worker{w}}
	w.latency.Store(int64(delay))
	w.latestAt.Store(mono())
	if got := c.Latency(); got != delay {
		t.Errorf("latency of a batch committed within the window: %v, want %v", got, delay)
	}
	w.latestAt.Store(mono() - int64(latencyWindow) - 1)
	if got := c.Latency(); got != 0 {
		t.Errorf("latency of a batch committed before the window: %v, want 0", got)
	}
}
