package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// worker is one group member: a kafka-go Reader and the loop
// fetch -> batch -> Sink.Apply -> dead letters -> commit.
type worker struct {
	id       int
	cfg      Config
	sink     Sink
	m        *metrics
	log      *slog.Logger
	r        *kafka.Reader
	dlq      *deadLetterWriter
	joined   atomic.Bool
	statsMu  sync.Mutex
	gens     int64                         // see generations
	progress *atomic.Int64                 // the consumer's time of the last successful commit (unix ns)
	topics   map[string]prometheus.Counter // rankd_consumer_messages_total by topic
}

func newWorker(c *Consumer, id int, dlq *deadLetterWriter) *worker {
	cfg := c.cfg
	log := c.log.With("worker", id)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           cfg.Brokers,
		GroupID:           cfg.Group,
		GroupTopics:       cfg.Topics,
		Dialer:            cfg.Dialer,
		QueueCapacity:     cfg.QueueCapacity,
		MinBytes:          cfg.MinBytes,
		MaxBytes:          cfg.MaxBytes,
		MaxWait:           cfg.MaxWait,
		ReadLagInterval:   -1,
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		JoinGroupBackoff:  cfg.JoinGroupBackoff,
		CommitInterval:    0, // synchronous commits
		StartOffset:       cfg.StartOffset,
		// kafka-go logs and retries its own group and fetch errors; what
		// reaches the worker is logged by the worker loop.
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			log.Debug("kafka-go: " + fmt.Sprintf(msg, args...))
		}),
	})
	return &worker{id: id, cfg: cfg, sink: c.sink, m: c.m, log: log, r: r, dlq: dlq,
		topics: map[string]prometheus.Counter{}, progress: &c.lastCommit}
}

// ready reports whether the reader has joined a group generation once.
func (w *worker) ready() bool {
	if w.joined.Load() {
		return true
	}
	if w.generations() > 0 {
		w.joined.Store(true)
	}
	return w.joined.Load()
}

// generations returns how many group generations (and partition
// reconnects) the reader has gone through. Stats resets the reader's
// counters, so they are summed here; nothing else reads them.
func (w *worker) generations() int64 {
	w.statsMu.Lock()
	defer w.statsMu.Unlock()
	w.gens += w.r.Stats().Rebalances
	return w.gens
}

// run is the worker loop. It returns when ctx is done, after the batch in
// hand is applied and committed under hard (see Consumer.Run); it returns
// an error only when that batch could not be finished before hard ended.
func (w *worker) run(ctx, hard context.Context) error {
	defer w.r.Close() // leaves the group; never fails
	b := &batch{maxCount: w.cfg.BatchCount, maxBytes: w.cfg.BatchBytes}
	fetchFailures := 0
	for {
		err := w.fill(ctx, b)
		if len(b.msgs) > 0 {
			if err := w.process(ctx, hard, b); err != nil {
				return err
			}
			b.reset()
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			fetchFailures = 0
			continue
		}
		fetchFailures++
		w.m.retries.WithLabelValues("fetch").Inc()
		w.log.Warn("fetching messages failed; retrying", "attempt", fetchFailures, "err", err)
		if !sleep(ctx, backoff(fetchFailures, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return nil
		}
	}
}

// fill fetches one batch: it blocks for the first message, then adds
// messages until the batch is full or Linger has passed since the first
// one. It returns ctx's end as a nil error with whatever it has.
func (w *worker) fill(ctx context.Context, b *batch) error {
	m, err := w.r.FetchMessage(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("fetching: %w", err)
	}
	// The reader hands out messages of its current generation only (it
	// drops older ones): the batch belongs to this one.
	b.gen = w.generations()
	w.add(b, m)
	if b.full() {
		return nil
	}
	// A cancelled FetchMessage leaves the reader's queue untouched: no
	// message is lost when the linger deadline wins.
	lctx, cancel := context.WithTimeout(ctx, w.cfg.Linger)
	defer cancel()
	for !b.full() {
		m, err := w.r.FetchMessage(lctx)
		if err != nil {
			if lctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("fetching: %w", err)
		}
		w.add(b, m)
	}
	return nil
}

func (w *worker) add(b *batch, m kafka.Message) {
	w.joined.Store(true)
	c := w.topics[m.Topic]
	if c == nil {
		c = w.m.messages.WithLabelValues(m.Topic)
		w.topics[m.Topic] = c
	}
	c.Inc()
	b.add(m)
}

// process applies a batch, writes its dead letters and commits it. Apply
// and dead-letter failures are retried with backoff, on the same batch and
// without fetching more, until they succeed or hard ends (shutdown
// timeout); commit failures are retried CommitAttempts times.
func (w *worker) process(ctx, hard context.Context, b *batch) error {
	w.m.batchSize.Observe(float64(len(b.msgs)))
	var dead []DeadLetter
	applied := false
	for attempt := 1; ; attempt++ {
		var err error
		op := "apply"
		if !applied {
			start := time.Now()
			dead, err = w.sink.Apply(hard, b.msgs)
			w.m.applyDur.Observe(time.Since(start).Seconds())
			applied = err == nil
		}
		if err == nil && len(dead) > 0 {
			op = "dead_letter"
			if err = w.dlq.write(hard, dead); err == nil {
				for _, d := range dead {
					w.m.deadLetters.WithLabelValues(d.Reason).Inc()
				}
				dead = nil
			}
		}
		if err == nil {
			break
		}
		if hard.Err() != nil {
			return fmt.Errorf("worker %d: batch of %d messages not applied within the shutdown timeout: %w", w.id, len(b.msgs), err)
		}
		w.m.retries.WithLabelValues(op).Inc()
		w.log.Warn("batch failed; retrying the same batch", "op", op, "messages", len(b.msgs),
			"attempt", attempt, "shutting_down", ctx.Err() != nil, "err", err)
		if !sleep(hard, backoff(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return fmt.Errorf("worker %d: batch of %d messages not applied within the shutdown timeout: %w", w.id, len(b.msgs), err)
		}
	}
	return w.commit(hard, b)
}

// commit commits the highest offset per partition of an applied batch.
//
// A commit that keeps failing (a broker outage, or a partition revoked by a
// rebalance while the batch was applied) is given up after CommitAttempts
// and the batch dropped from memory: its messages are applied, so a later
// commit of the same partition covers them, and if none comes (the
// partition moved, or the process stops) the next owner redelivers them
// from the last committed offset and dedupe makes them no-ops. Never
// committing past an unapplied message holds either way: every message
// below a committed offset was applied.
func (w *worker) commit(hard context.Context, b *batch) error {
	if g := w.generations(); g != b.gen {
		// The group rebalanced while the batch was applied: its partitions
		// may belong to another member now, and a commit (kafka-go sends it
		// with the new generation, which the broker accepts) could move
		// their offsets back behind the new owner's. The batch is applied;
		// whoever owns its partitions now redelivers it from the committed
		// offset, and dedupe makes that a no-op.
		w.m.commitSkips.Inc()
		w.log.Info("group rebalanced while the batch was applied; not committing it", "messages", len(b.msgs))
		return nil
	}
	offs := b.offsets()
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(hard, w.cfg.CommitTimeout)
		err := w.r.CommitMessages(cctx, offs...)
		cancel()
		if err == nil {
			w.progress.Store(time.Now().UnixNano())
			return nil
		}
		if hard.Err() != nil {
			return fmt.Errorf("worker %d: applied batch of %d messages not committed within the shutdown timeout (it will be redelivered): %w", w.id, len(b.msgs), err)
		}
		if attempt >= w.cfg.CommitAttempts {
			w.m.commitDrops.Inc()
			w.log.Warn("committing offsets failed; giving up on this batch (a later commit or a redelivery covers it)",
				"attempts", attempt, "err", err)
			return nil
		}
		w.m.retries.WithLabelValues("commit").Inc()
		w.log.Warn("committing offsets failed; retrying", "attempt", attempt, "err", err)
		if !sleep(hard, backoff(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return fmt.Errorf("worker %d: applied batch of %d messages not committed within the shutdown timeout (it will be redelivered): %w", w.id, len(b.msgs), err)
		}
	}
}

// batch is the messages in hand.
type batch struct {
	gen                int64 // the reader's generation count at the batch's first message
	msgs               []kafka.Message
	bytes              int
	maxCount, maxBytes int
}

func (b *batch) add(m kafka.Message) {
	b.msgs = append(b.msgs, m)
	b.bytes += len(m.Key) + len(m.Value) + headersSize(m.Headers)
}

func (b *batch) full() bool { return len(b.msgs) >= b.maxCount || b.bytes >= b.maxBytes }

func (b *batch) reset() {
	clear(b.msgs) // drop references to the values
	b.msgs, b.bytes = b.msgs[:0], 0
}

// offsets returns, per topic and partition, the message with the highest
// offset (CommitMessages commits offset+1).
func (b *batch) offsets() []kafka.Message {
	type tp struct {
		topic     string
		partition int
	}
	idx := map[tp]int{}
	var out []kafka.Message
	for _, m := range b.msgs {
		k := tp{m.Topic, m.Partition}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
			continue
		}
		if m.Offset > out[i].Offset {
			out[i].Offset = m.Offset
		}
	}
	return out
}

// backoff returns the wait before retry attempt (1-based): min doubled per
// attempt up to max, with the upper half jittered.
func backoff(attempt int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// Sleep waits for d or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool { return sleep(ctx, d) }

// sleep waits for d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
