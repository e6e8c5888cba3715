package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// worker is one group member: a kafka-go ConsumerGroup, whose generations
// hand it partitions with their committed offsets, and per generation the
// loop fetch -> batch -> Sink.Apply -> dead letters -> commit (in the
// background: committer). It reads
// each partition from where the sink says it stands (Positioner), which
// after Redis lost writes is behind the committed offset.
type worker struct {
	id       int
	cfg      Config
	sink     Sink
	m        *metrics
	log      *slog.Logger
	dlq      *DeadLetterWriter
	joined   atomic.Bool
	behind   atomic.Bool                   // the last batch left messages waiting (Consumer.Behind)
	latency  atomic.Int64                  // ns from the fetch of the last batch's first message to its commit (Consumer.Latency)
	latestAt atomic.Int64                  // when that batch was committed (mono)
	stop     context.Context               // Run's: done when the worker stops
	gens     atomic.Int64                  // generations joined
	progress *atomic.Int64                 // the consumer's time of the last successful commit (unix ns)
	topics   map[string]prometheus.Counter // rankd_consumer_messages_total by topic
	onHalt   func()                        // called when the halted set changes

	haltMu sync.Mutex
	halted map[partitionKey]string // partitions not read, with the reason

	// committed is the offset this worker last committed per partition in
	// the current generation (the assignment's is as of its start).
	committed map[partitionKey]int64
}

// haltRecheck is how often a worker asks the sink again about the
// partitions it halted (they resume once `rankd replay` rebuilt them).
const haltRecheck = 2 * time.Second

func newWorker(c *Consumer, id int, dlq *DeadLetterWriter) *worker {
	return &worker{id: id, cfg: c.cfg, sink: c.sink, m: c.m, log: c.log.With("worker", id), dlq: dlq,
		topics: map[string]prometheus.Counter{}, progress: &c.lastCommit, halted: map[partitionKey]string{},
		onHalt: c.haltChanged}
}

// ready reports whether the worker has joined a group generation once.
func (w *worker) ready() bool { return w.joined.Load() }

// haltedReasons returns the halted partitions' reasons.
func (w *worker) haltedReasons() []string {
	w.haltMu.Lock()
	defer w.haltMu.Unlock()
	out := make([]string, 0, len(w.halted))
	for k, r := range w.halted {
		out = append(out, fmt.Sprintf("%s/%d: %s", k.topic, k.partition, r))
	}
	return out
}

func (w *worker) setHalted(k partitionKey, reason string) {
	w.haltMu.Lock()
	old, had := w.halted[k]
	if reason == "" {
		delete(w.halted, k)
	} else {
		w.halted[k] = reason
	}
	w.haltMu.Unlock()
	if had != (reason != "") || old != reason {
		w.onHalt()
	}
}

func (w *worker) clearHalted() {
	w.haltMu.Lock()
	n := len(w.halted)
	clear(w.halted)
	w.haltMu.Unlock()
	if n > 0 {
		w.onHalt()
	}
}

// run is the worker loop. It returns when ctx is done, after the batch in
// hand is applied and committed under hard (see Consumer.Run); it returns
// an error only when that batch could not be finished before hard ended,
// or when the brokers refuse the group's settings.
func (w *worker) run(ctx, hard context.Context) error {
	// Closing the group when ctx is done ends the generation too, and the
	// generation's context may end first: the batch in hand is still
	// committed (the generation's connection lives until it returns).
	w.stop = ctx
	tr := Transport(w.cfg.Dialer)
	defer tr.CloseIdleConnections()
	bt := min(balanceTimeout, w.cfg.RebalanceTimeout/2)
	client := &kafka.Client{Addr: kafka.TCP(w.cfg.Brokers...), Timeout: bt, Transport: tr}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                w.cfg.Group,
		Brokers:           w.cfg.Brokers,
		Dialer:            w.cfg.Dialer,
		Topics:            w.cfg.Topics,
		HeartbeatInterval: w.cfg.HeartbeatInterval,
		SessionTimeout:    w.cfg.SessionTimeout,
		RebalanceTimeout:  w.cfg.RebalanceTimeout,
		JoinGroupBackoff:  w.cfg.JoinGroupBackoff,
		StartOffset:       w.cfg.StartOffset,
		// by load first (balance.go); range is what older members offer
		GroupBalancers: []kafka.GroupBalancer{loadBalancer{client: client, log: w.log, timeout: bt}, kafka.RangeGroupBalancer{}},
		// kafka-go logs and retries its own group errors; what reaches the
		// worker is logged by the worker loop.
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			w.log.Debug("kafka-go: " + fmt.Sprintf(msg, args...))
		}),
	})
	if err != nil {
		return fmt.Errorf("worker %d: %w", w.id, err)
	}
	// The group is closed as soon as ctx is done, while the generation in
	// hand still runs: kafka-go then leaves the group once the generation
	// ends, instead of starting to join again (a join blocks Close for up
	// to the rebalance timeout, and a member abandoned in a join lingers
	// in the group).
	closed := make(chan struct{})
	stopClose := context.AfterFunc(ctx, func() { _ = cg.Close(); close(closed) })
	defer func() {
		if stopClose() { // returning without ctx done (an error)
			go func() { _ = cg.Close(); close(closed) }()
		}
		waitClosed(closed, w.log)
	}()
	defer w.clearHalted()
	for joins := 0; ; {
		gen, err := cg.Next(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, kafka.InvalidSessionTimeout) {
				return fmt.Errorf("the brokers refuse kafka.session_timeout %v (outside their group.min.session.timeout.ms .. group.max.session.timeout.ms; Kafka's default minimum is 6s): %w",
					w.cfg.SessionTimeout, err)
			}
			joins++
			w.m.retries.WithLabelValues("fetch").Inc()
			w.log.Warn("joining the consumer group failed; retrying", "attempt", joins, "err", err)
			continue // the group backs off by itself
		}
		joins = 0
		w.joined.Store(true)
		w.gens.Add(1)
		errc := make(chan error, 1)
		gen.Start(func(gctx context.Context) { errc <- w.generation(ctx, gctx, hard, gen) })
		if err := <-errc; err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// waitClosed waits for the group's Close (closed) at most groupCloseWait:
// a stopping process does not wait for a join in flight; the brokers then
// expire the member after its session timeout.
func waitClosed(closed <-chan struct{}, log *slog.Logger) {
	select {
	case <-closed:
	case <-time.After(groupCloseWait):
		log.Warn("leaving the consumer group did not finish in time; the brokers expire this member after the session timeout")
	}
}

// groupCloseWait bounds waitClosed.
const groupCloseWait = 3 * time.Second

// generation consumes the partitions of one group generation until it
// ends (a rebalance: gctx) or ctx is done.
func (w *worker) generation(ctx, gctx, hard context.Context, gen *kafka.Generation) (err error) {
	lctx, cancel := context.WithCancelCause(gctx)
	defer cancel(nil)
	defer context.AfterFunc(ctx, func() { cancel(errStopping) })()
	var as []Assignment
	for topic, ps := range gen.Assignments {
		for _, p := range ps {
			as = append(as, Assignment{Topic: topic, Partition: p.ID, Committed: p.Offset})
		}
	}
	slices.SortFunc(as, func(a, b Assignment) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	w.clearHalted()
	w.committed = map[partitionKey]int64{}
	f := newFeed(lctx, w.cfg, w.log)
	defer f.close()
	w.log.Debug("generation", "id", gen.ID, "partitions", len(as))
	w.startParts(lctx, f, as)
	recheck := time.NewTicker(haltRecheck)
	defer recheck.Stop()
	b := &batch{maxCount: w.cfg.BatchCount, maxBytes: w.cfg.BatchBytes}
	// the commits end before the generation does: its connection commits
	c := newCommitter(w, lctx, hard, gen)
	defer func() {
		if cerr := c.finish(); err == nil {
			err = cerr
		}
	}()
	for {
		if len(f.ch) == 0 && len(f.rest.msgs) == 0 {
			w.behind.Store(false) // nothing waits: caught up
		}
		woke := w.fill(lctx, f, b, recheck.C)
		if len(b.msgs) > 0 {
			w.behind.Store(behind(w.cfg, f, b))
			if err := w.process(lctx, hard, f, b, c); err != nil {
				return err
			}
			b.reset()
		}
		if lctx.Err() != nil {
			return nil
		}
		if woke {
			w.recheck(lctx, f, as)
		}
	}
}

// startParts starts reading as, from where the sink says (a Positioner)
// or from the committed offsets; it retries the sink's transient errors
// until lctx is done.
func (w *worker) startParts(lctx context.Context, f *feed, as []Assignment) {
	if len(as) == 0 {
		return
	}
	pos, ok := w.sink.(Positioner)
	if !ok {
		for _, a := range as {
			f.start(partitionKey{a.Topic, a.Partition}, a.Committed)
		}
		return
	}
	var rs []Resume
	for attempt := 1; ; attempt++ {
		var err error
		if rs, err = pos.Assigned(lctx, as); err == nil {
			break
		}
		if lctx.Err() != nil {
			return
		}
		w.m.retries.WithLabelValues("apply").Inc()
		w.log.Warn("reading the partitions' positions failed; retrying", "attempt", attempt, "err", err)
		if !Sleep(lctx, Backoff(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return
		}
	}
	var seek []Move
	for i, a := range as {
		k := partitionKey{a.Topic, a.Partition}
		if rs[i].Halt != "" {
			w.halt(f, k, rs[i].Halt)
			continue
		}
		seek = append(seek, Move{Topic: a.Topic, Partition: a.Partition, Offset: rs[i].Offset})
	}
	w.seek(lctx, f, seek)
}

// recheck asks the sink again about the halted partitions of as.
func (w *worker) recheck(lctx context.Context, f *feed, as []Assignment) {
	w.haltMu.Lock()
	var again []Assignment
	for _, a := range as {
		k := partitionKey{a.Topic, a.Partition}
		if _, ok := w.halted[k]; ok {
			if c, ok := w.committed[k]; ok {
				a.Committed = c
			}
			again = append(again, a)
		}
	}
	w.haltMu.Unlock()
	if len(again) == 0 {
		return
	}
	rs, err := w.sink.(Positioner).Assigned(lctx, again)
	if err != nil {
		return // transient; the next tick asks again
	}
	var seek []Move
	for i, a := range again {
		if rs[i].Halt != "" {
			w.setHalted(partitionKey{a.Topic, a.Partition}, rs[i].Halt)
			continue
		}
		seek = append(seek, Move{Topic: a.Topic, Partition: a.Partition, Offset: rs[i].Offset})
	}
	for _, m := range seek {
		w.log.Info("redis holds a position for the partition again: applying", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset)
	}
	w.seek(lctx, f, seek)
}

// halt stops reading k, for reason.
func (w *worker) halt(f *feed, k partitionKey, reason string) {
	f.stop(k)
	w.setHalted(k, reason)
	w.log.Error("not applying the partition: "+reason, "topic", k.topic, "partition", k.partition)
}

// seek starts reading each move's partition at its offset, unless Kafka no
// longer holds that offset (retention deleted it: the messages from there
// to the log start can never be applied), which halts the partition.
func (w *worker) seek(lctx context.Context, f *feed, moves []Move) {
	var explicit []Move
	for _, m := range moves {
		if m.Offset >= 0 {
			explicit = append(explicit, m)
		}
	}
	first := map[partitionKey]int64{}
	if len(explicit) > 0 {
		tr := Transport(w.cfg.Dialer)
		defer tr.CloseIdleConnections()
		client := &kafka.Client{Addr: kafka.TCP(w.cfg.Brokers...), Timeout: 10 * time.Second, Transport: tr}
		var err error
		for attempt := 1; ; attempt++ {
			if first, err = firstOffsets(lctx, client, explicit); err == nil || lctx.Err() != nil {
				break
			}
			w.m.retries.WithLabelValues("fetch").Inc()
			w.log.Warn("listing the partitions' first offsets failed; retrying", "attempt", attempt, "err", err)
			if !Sleep(lctx, Backoff(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
				return
			}
		}
	}
	for _, m := range moves {
		k := partitionKey{m.Topic, m.Partition}
		if lo, ok := first[k]; ok && m.Offset < lo {
			w.halt(f, k, truncated(m.Offset, lo))
			continue
		}
		w.setHalted(k, "")
		f.start(k, m.Offset)
	}
}

// firstOffsets returns the first offset Kafka holds of each move's
// partition.
func firstOffsets(ctx context.Context, client *kafka.Client, moves []Move) (map[partitionKey]int64, error) {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, m := range moves {
		req.Topics[m.Topic] = append(req.Topics[m.Topic], kafka.FirstOffsetOf(m.Partition))
	}
	res, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[partitionKey]int64{}
	for topic, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("%s/%d: %w", topic, p.Partition, p.Error)
			}
			out[partitionKey{topic, p.Partition}] = p.FirstOffset
		}
	}
	return out, nil
}

// fill fetches one batch: it blocks for the first message (or until wake
// fires: it returns true then), then adds messages until the batch is full
// or Linger has passed since the first one. Messages of readers that were
// restarted or stopped since are dropped.
func (w *worker) fill(ctx context.Context, f *feed, b *batch, wake <-chan time.Time) bool {
	w.take(f, b, f.rest)
	for len(b.msgs) == 0 {
		select {
		case m := <-f.ch:
			w.take(f, b, f.got(m))
		case <-wake:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if b.full() {
		return false
	}
	// Linger counts from the fetch of the batch's first message: one that
	// waited for the previous batch's apply has waited already.
	wait := w.cfg.Linger - time.Duration(mono()-b.first)
	if wait <= 0 {
		for !b.full() { // what is already fetched, no more
			select {
			case m := <-f.ch:
				w.take(f, b, f.got(m))
			default:
				return false
			}
		}
		return false
	}
	linger := time.NewTimer(wait)
	defer linger.Stop()
	for !b.full() {
		select {
		case m := <-f.ch:
			w.take(f, b, f.got(m))
		case <-linger.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return false
}

// take adds the messages of chunk m to b until b is full; the rest waits
// in f.rest for the next batch. A chunk of a reader restarted or stopped
// since is dropped; a reader's finding that Kafka no longer holds its
// offset halts the partition.
func (w *worker) take(f *feed, b *batch, m fed) {
	f.rest = fed{}
	if len(m.msgs) == 0 && m.trunc == nil || !f.current(m) {
		return
	}
	if m.trunc != nil {
		w.halt(f, m.k, truncated(m.trunc.Offset, m.trunc.First))
		return
	}
	if len(b.msgs) == 0 {
		b.first = m.at
	}
	n := 0
	for _, msg := range m.msgs {
		if b.full() {
			m.msgs = m.msgs[n:]
			f.rest = m
			break
		}
		b.add(msg)
		n++
	}
	c := w.topics[m.k.topic]
	if c == nil {
		c = w.m.messages.WithLabelValues(m.k.topic)
		w.topics[m.k.topic] = c
	}
	c.Add(float64(n))
}

// behind tells whether a worker that fetched batch b is behind: the batch
// is full, or half the queue's messages wait in the feed. The queue is
// counted in messages, not in the chunks the channel holds (up to
// feedChunk each): a worker keeping up with a trickle of small fetches
// often has one chunk waiting, and that is not half its queue.
func behind(cfg Config, f *feed, b *batch) bool {
	return b.full() || f.queued.Load() >= int64(cfg.QueueCapacity/2)
}

// truncated is the reason a partition halts when Kafka no longer holds the
// offset it must read from.
func truncated(offset, first int64) string {
	return fmt.Sprintf("its messages from offset %d are not applied, and Kafka holds them only from offset %d on (retention deleted the rest): rebuild the boards with rankd replay", offset, first)
}

// process applies a batch, writes its dead letters and hands its offsets
// to the committer. Apply and dead-letter failures are retried with
// backoff, on the same batch and without fetching more, until they
// succeed or hard ends (shutdown timeout). A
// RepositionError moves or halts its partitions, whose messages leave the
// batch; the rest is applied at once.
func (w *worker) process(lctx, hard context.Context, f *feed, b *batch, c *committer) error {
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
		var re *RepositionError
		if errors.As(err, &re) {
			w.reposition(lctx, f, b, re)
			if len(b.msgs) == 0 {
				return nil
			}
			attempt = 0
			continue
		}
		if err == nil && len(dead) > 0 {
			op = "dead_letter"
			if err = w.dlq.Write(hard, dead); err == nil {
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
			"attempt", attempt, "shutting_down", lctx.Err() != nil, "err", err)
		if !Sleep(hard, Backoff(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return fmt.Errorf("worker %d: batch of %d messages not applied within the shutdown timeout: %w", w.id, len(b.msgs), err)
		}
	}
	return c.add(b)
}

// reposition restarts or halts the partitions of re and drops their
// messages from b.
func (w *worker) reposition(lctx context.Context, f *feed, b *batch, re *RepositionError) {
	gone := map[partitionKey]bool{}
	var seek []Move
	for _, m := range re.Moves {
		k := partitionKey{m.Topic, m.Partition}
		gone[k] = true
		if m.Halt != "" {
			w.halt(f, k, m.Halt)
			continue
		}
		seek = append(seek, m)
	}
	w.seek(lctx, f, seek)
	kept := b.msgs[:0]
	b.bytes = 0
	for _, m := range b.msgs {
		if !gone[partitionKey{m.Topic, m.Partition}] {
			kept = append(kept, m)
			b.bytes += len(m.Key) + len(m.Value) + headersSize(m.Headers)
		}
	}
	clear(b.msgs[len(kept):])
	b.msgs = kept
}

// noteCommitted records offsets committed in the current generation.
func (w *worker) noteCommitted(offs map[string]map[int]int64) {
	w.haltMu.Lock()
	defer w.haltMu.Unlock()
	for topic, ps := range offs {
		for p, o := range ps {
			w.committed[partitionKey{topic, p}] = o
		}
	}
}

// shuttingDown reports whether lctx ended because the worker stops (not
// because the generation did): the cause generation gives it.
func shuttingDown(lctx context.Context) bool {
	return errors.Is(context.Cause(lctx), errStopping)
}

// errStopping is the cause of a generation's context ending because the
// consumer stops.
var errStopping = errors.New("consumer stopping")

// commitWithin runs commit, giving up waiting for it after d or when ctx
// ends (kafka-go's CommitOffsets takes no context; the call goes on in the
// background and its result is dropped).
func commitWithin(ctx context.Context, d time.Duration, commit func() error) error {
	done := make(chan error, 1)
	go func() { done <- commit() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("committing offsets: no answer within %v", d)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// batch is the messages in hand.
type batch struct {
	msgs               []kafka.Message
	bytes              int
	maxCount, maxBytes int
	first              int64 // when its first message was fetched (mono)
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

// Backoff returns the wait before retry attempt (1-based): lo doubled per
// attempt up to hi, with the upper half jittered. The workers and
// consumer/replay retry with it.
func Backoff(attempt int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// Sleep waits for d or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
