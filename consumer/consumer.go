package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"
)

// Consumer runs the workers of one consumer group in this process and
// delivers their batches to a Sink.
type Consumer struct {
	cfg  Config
	sink Sink
	log  *slog.Logger
	now  func() time.Time
	m    *metrics
	// applying is the rankd_consumer_applying gauge of Applying.
	applying prometheus.GaugeFunc

	started atomic.Bool

	lastCommit atomic.Int64 // unix ns of the last successful commit (or of Run's start)
	lagOK      atomic.Int64 // unix ns of the last successful lag computation
	lagTotal   atomic.Int64 // total lag at that computation
	mu         sync.Mutex
	workers    []*worker // while Run is consuming
	// haltMu orders the updates of rankd_sink_partitions_behind, so that
	// the last one counts every change before it (haltChanged)
	haltMu sync.Mutex
}

// New returns a Consumer of cfg's topics delivering to sink. Options:
// WithRegisterer, WithLogger, WithClock. It connects to nothing: Run does.
func New(cfg Config, sink Sink, opts ...Option) (*Consumer, error) {
	if sink == nil {
		return nil, errors.New("consumer: nil sink")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	c := &Consumer{cfg: cfg, sink: sink, log: o.log, now: o.now, m: m}
	applying := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "rankd", Subsystem: "consumer", Name: "applying",
		Help: "1 while the consumer makes progress: nothing waits, or a batch was committed within the stall timeout (and the lag can be read); 0 otherwise."},
		func() float64 {
			if c.Applying() {
				return 1
			}
			return 0
		})
	c.applying = applying
	if o.reg != nil {
		// A later Consumer on the same registerer (a restart in one
		// process) takes the gauge over.
		err := o.reg.Register(applying)
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			o.reg.Unregister(are.ExistingCollector)
			err = o.reg.Register(applying)
		}
		if err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	return c, nil
}

// Run consumes until ctx is done, then shuts down gracefully and returns.
//
// It starts Config.Workers workers, each a group member with its own
// kafka-go Reader, plus the lag monitor; it owns and waits for every
// goroutine it starts. Transient errors never end Run: workers retry them
// (see the package doc). When ctx is done the workers stop fetching, apply
// and commit the batch in hand within Config.ShutdownTimeout, and close
// their readers (leaving the group); then the dead-letter writer is closed.
// Run returns nil after a clean shutdown, or an error naming the batches
// that could not be applied or committed in time (they are redelivered to
// whoever consumes their partitions next). Run may be called once.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("consumer: Run called twice")
	}
	// hard is the context of applying, dead-lettering and committing: it
	// outlives ctx by the shutdown timeout, so the batch in hand can finish.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	var timer *time.Timer
	var timerMu sync.Mutex
	stopAfter := context.AfterFunc(ctx, func() {
		timerMu.Lock()
		timer = time.AfterFunc(c.cfg.ShutdownTimeout, cancelHard)
		timerMu.Unlock()
	})
	defer func() {
		stopAfter()
		timerMu.Lock()
		if timer != nil {
			timer.Stop()
		}
		timerMu.Unlock()
	}()

	now := time.Now().UnixNano()
	c.lastCommit.Store(now)
	c.lagOK.Store(now)
	dlq := NewDeadLetterWriter(c.cfg)
	workers := make([]*worker, c.cfg.Workers)
	for i := range workers {
		workers[i] = newWorker(c, i, dlq)
	}
	c.mu.Lock()
	c.workers = workers
	c.mu.Unlock()

	g, gctx := errgroup.WithContext(ctx)
	for _, w := range workers {
		g.Go(func() error { return w.run(gctx, hard) })
	}
	if c.cfg.LagInterval > 0 {
		g.Go(func() error { c.watchLag(gctx); return nil })
	}
	err := g.Wait()

	c.mu.Lock()
	c.workers = nil
	c.mu.Unlock()
	if cerr := dlq.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("closing dead-letter writer: %w", cerr))
	}
	return err
}

// Ready reports whether Run is consuming, no partition is halted (see
// Halted), and every worker has joined a group generation at least once.
// It is approximate: a worker that is rejoining during a rebalance still
// counts as ready, and readiness ends only when Run stops.
func (c *Consumer) Ready() bool {
	c.mu.Lock()
	ws := c.workers
	c.mu.Unlock()
	if len(ws) == 0 {
		return false
	}
	if len(c.Halted()) > 0 {
		return false
	}
	if !c.Applying() {
		return false
	}
	for _, w := range ws {
		if !w.ready() {
			return false
		}
	}
	return true
}

// NotReady says why the consumer is not Ready, the first of: a halted
// partition ("not applying <topic>/<partition>: <reason>", with how many
// more), no progress (see Applying), a group not joined; nil when it is
// Ready. The assembly's /readyz answers with it.
func (c *Consumer) NotReady() error {
	if h := c.Halted(); len(h) > 0 {
		more := ""
		if len(h) > 1 {
			more = fmt.Sprintf(" (and %d more partitions)", len(h)-1)
		}
		return errors.New("not applying " + h[0] + more)
	}
	if !c.Applying() {
		return errors.New("not applying: messages wait and nothing was committed (or the lag could not be read) for the stall timeout")
	}
	if !c.Ready() {
		return errors.New("consumer group not joined")
	}
	return nil
}

// Behind reports whether a worker's last batch was cut with messages
// waiting: the batch was full (BatchCount or BatchBytes), or its reader's
// queue held half its capacity or more; it ends when a worker finds its
// queue empty before a batch. It means the consumer is short of time, not
// of messages: what else runs in the process should yield (the read API
// does, httpapi.WithPriority). It is false before the first batch.
func (c *Consumer) Behind() bool {
	c.mu.Lock()
	ws := c.workers
	c.mu.Unlock()
	for _, w := range ws {
		if w.behind.Load() {
			return true
		}
	}
	return false
}

// latencyWindow is how recent a batch must be to count in Latency.
const latencyWindow = 250 * time.Millisecond

// Latency is the longest a worker's last batch took from the fetch of its
// first message to its commit, among the batches committed in the last
// 250 ms (0: none): the part of event-to-visible latency this process
// adds. With api.yield_latency the API yields gently while it is over
// that (httpapi.WithLatencyTarget).
func (c *Consumer) Latency() time.Duration {
	c.mu.Lock()
	ws := c.workers
	c.mu.Unlock()
	var most int64
	now := mono()
	for _, w := range ws {
		if now-w.latestAt.Load() <= int64(latencyWindow) {
			most = max(most, w.latency.Load())
		}
	}
	return time.Duration(most)
}

// watchLag sets rankd_consumer_lag_messages every LagInterval until ctx is
// done.
func (c *Consumer) watchLag(ctx context.Context) {
	tr := Transport(c.cfg.Dialer)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.cfg.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	t := time.NewTicker(c.cfg.LagInterval)
	defer t.Stop()
	for {
		lags, err := GroupLag(ctx, client, c.cfg.Group, c.cfg.Topics)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.m.lagErrors.Inc()
			c.log.Warn("computing consumer lag failed", "err", err)
		}
		var total int64
		for _, l := range lags {
			c.m.lag.WithLabelValues(l.Topic, fmt.Sprint(l.Partition)).Set(float64(l.Lag))
			total += l.Lag
		}
		if err == nil {
			c.lagTotal.Store(total)
			c.lagOK.Store(time.Now().UnixNano())
		}

		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Transport returns a new kafka.Transport carrying d's TLS and SASL
// settings (d may be nil). Each client gets its own: kafka-go's
// DefaultTransport caches topic metadata for 6s, shared by everyone.
func Transport(d *kafka.Dialer) *kafka.Transport {
	if d == nil {
		return &kafka.Transport{}
	}
	return &kafka.Transport{TLS: d.TLS, SASL: d.SASLMechanism, ClientID: d.ClientID}
}

// Halted returns the partitions this process's workers do not apply,
// with the reason (the sink cannot apply them exactly: Redis lost what it
// knew of them, or Kafka no longer holds the messages a rewind needs), as
// "<topic>/<partition>: <reason>", sorted. They resume by themselves once
// `rankd replay` has rebuilt the boards.
func (c *Consumer) Halted() []string {
	c.mu.Lock()
	ws := c.workers
	c.mu.Unlock()
	var out []string
	for _, w := range ws {
		out = append(out, w.haltedReasons()...)
	}
	slices.Sort(out)
	return out
}

// haltChanged updates rankd_sink_partitions_behind. Workers call it after
// each change of their halted sets, at once when all resume after a
// replay: counting and setting under one lock, the last call sets a count
// taken after every change, never one another worker's update outdated.
func (c *Consumer) haltChanged() {
	c.haltMu.Lock()
	defer c.haltMu.Unlock()
	c.m.behind.Set(float64(len(c.Halted())))
}

// Applying reports whether the consumer makes progress: it is false while
// messages wait (the group's lag, as last computed, is above 0) and no
// batch was committed for Config.StallTimeout (Redis refuses writes, a
// worker retries one batch forever), or while the lag could not be read
// for Config.StallTimeout (the brokers are unreachable). It is true when
// nothing waits. With LagInterval negative it is always true.
func (c *Consumer) Applying() bool {
	if c.cfg.LagInterval < 0 {
		return true
	}
	now := time.Now().UnixNano()
	stall := c.cfg.StallTimeout.Nanoseconds()
	if now-c.lagOK.Load() > stall+c.cfg.LagInterval.Nanoseconds() {
		return false
	}
	return c.lagTotal.Load() == 0 || now-c.lastCommit.Load() <= stall
}
