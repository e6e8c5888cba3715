package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rankd/rankd/internal/assembly"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
)

const (
	rankdGroup  = "bench-rankd"
	rankdPrefix = "bench"
	lagPoll     = 50 * time.Millisecond
	// drainTimeout bounds one drain.
	drainTimeout = 30 * time.Minute
)

// runningStack is a started stack.
type runningStack struct {
	*assembly.Stack
	cfg    *config.Config
	ln     net.Listener
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// startStack wires the stack of cfg and runs it.
func (e *env) startStack(ctx context.Context, cfg *config.Config) (*runningStack, error) {
	s, err := assembly.New(cfg, e.o.Log, assembly.Tuning{})
	if err != nil {
		return nil, err
	}
	ln, err := s.Listen()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	rs := &runningStack{Stack: s, cfg: cfg, ln: ln, cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- s.Run(ctx, ln) }()
	return rs, nil
}

// caughtUp starts rankd's stack on group and waits until the group has
// committed everything the topics hold (events of them; 0: whatever they
// hold); the caller stops it.
func (e *env) caughtUp(ctx context.Context, phase, group string, events int64, adjust ...func(*config.Config)) (*runningStack, error) {
	cfg, err := e.config(group, rankdPrefix)
	if err != nil {
		return nil, err
	}
	for _, f := range adjust {
		f(cfg)
	}
	rs, err := e.startStack(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lag := newLagWatch(e.brokers, group)
	defer lag.close()
	e.prog.set(phase+": rankd catching up", lag.progress(max(events, int64(e.o.Events))))
	if _, err := lag.wait(ctx, rs.done, events); err != nil {
		_ = rs.stop()
		return nil, err
	}
	return rs, nil
}

// HTTPAddr is the host:port the stack's HTTP API listens on.
func (rs *runningStack) HTTPAddr() string { return rs.ln.Addr().String() }

// stop stops the stack and returns its error; it may be called again.
func (rs *runningStack) stop() error {
	rs.once.Do(func() {
		rs.cancel()
		if err := <-rs.done; err != nil {
			rs.err = fmt.Errorf("rankd: %w", err)
		}
	})
	return rs.err
}

// drainRankd runs rankd's stack on a new group until it has committed
// every message: timed from the start of the stack (group join included)
// until every partition's committed offset is its end offset
// (consumer.GroupLag, polled every 50ms). It checks that every event was
// consumed, nothing was dead-lettered and the updates applied per board
// are those routing the events gives.
func (e *env) drainRankd(ctx context.Context) (*Drain, error) {
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	var err error
	if e.emptyMemory, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	cfg, err := e.config(rankdGroup, rankdPrefix)
	if err != nil {
		return nil, err
	}
	lag := newLagWatch(e.brokers, rankdGroup)
	defer lag.close()
	stopProfile, err := cpuProfile(e.o.CPUProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	defer stopProfile() // when failing early
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	rs, err := e.startStack(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e.prog.set("rankd drain", lag.progress(int64(e.o.Events)))
	first, err := lag.wait(ctx, rs.done, int64(e.o.Events))
	after, merr := e.meter(ctx)
	stopProfile()
	if serr := rs.stop(); err == nil {
		err = serr
	}
	if err = errors.Join(err, merr); err != nil {
		return nil, err
	}
	elapsed := after.at.Sub(before.at)

	reg := rs.Metrics()
	consumed, err1 := counterSum(reg, "rankd_consumer_messages_total")
	dead, err2 := counterSum(reg, "rankd_consumer_dead_letters_total")
	dups, err3 := counterSum(reg, "rankd_sink_duplicates_total")
	applied, err4 := counterByLabel(reg, "rankd_sink_updates_applied_total", "board")
	batches, batchMsgs, err5 := histogram(reg, "rankd_consumer_batch_messages")
	_, applySecs, err6 := histogram(reg, "rankd_consumer_apply_duration_seconds")
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return nil, err
	}
	d := &Drain{Events: int64(e.o.Events), Seconds: round(elapsed.Seconds(), 2)}
	for _, v := range applied {
		d.Updates += int64(v)
	}
	d.EventsPerSec = round(float64(d.Events)/elapsed.Seconds(), 0)
	d.CPU = cpu(before, after, d.Events, d.Updates, elapsed)
	if d.Commands, err = e.commandStats(ctx, d.Events, after.redis-before.redis); err != nil {
		return nil, err
	}
	var errs []error
	if consumed < float64(e.o.Events) {
		errs = append(errs, fmt.Errorf("rankd consumed %.0f messages, want %d", consumed, e.o.Events))
	}
	if dead != 0 {
		errs = append(errs, fmt.Errorf("rankd dead-lettered %.0f messages, want none", dead))
	}
	boards := slices.Sorted(func(yield func(string) bool) {
		for b := range e.expect {
			if !yield(b) {
				return
			}
		}
	})
	for _, b := range boards {
		if got := int64(applied[b]); got != e.expect[b] {
			errs = append(errs, fmt.Errorf("board %s: %d updates applied, want %d (routed from the produced events)", b, got, e.expect[b]))
		}
	}
	if d.Updates != e.expectTotal {
		errs = append(errs, fmt.Errorf("rankd applied %d updates, want %d", d.Updates, e.expectTotal))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	d.Notes = append(d.Notes,
		fmt.Sprintf("rankd: group joined and first batch committed after %v; %.0f messages consumed, %.0f duplicates, %.0f dead letters; %d updates applied (%.3f per event), as routed",
			first.Round(time.Millisecond), consumed, dups, dead, d.Updates, float64(d.Updates)/float64(d.Events)),
		fmt.Sprintf("rankd: %.0f batches of %.0f messages on average; Sink.Apply (decode+route+Store.Apply) busy %.1fs of %d workers x %.1fs (%.0f%%)",
			batches, batchMsgs/max(batches, 1), applySecs, cfg.Kafka.Workers, elapsed.Seconds(),
			100*applySecs/(float64(cfg.Kafka.Workers)*elapsed.Seconds())))
	if e.o.Check != nil {
		if err := e.o.Check(ctx, PhaseRankd, CheckEnv{Config: cfg, Topics: topics}); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
	}
	return d, nil
}

// lagWatch watches a group's committed offsets on the preloaded topics.
type lagWatch struct {
	tr     *kafka.Transport
	client *kafka.Client
	group  string
	last   atomic.Int64 // committed messages at the last poll
}

func newLagWatch(brokers []string, group string) *lagWatch {
	tr := &kafka.Transport{}
	return &lagWatch{tr: tr, client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second}, group: group}
}

func (l *lagWatch) close() { l.tr.CloseIdleConnections() }

// progress reports the committed messages, for the progress line.
func (l *lagWatch) progress(total int64) func() (int64, int64) {
	return func() (int64, int64) { return l.last.Load(), total }
}

// wait polls until every partition is committed up to its end offset and
// the end offsets add up to events (events 0: whatever the topics hold, for
// the phases after one that produced more); it returns when the first
// commit was seen (relative to its start). It fails when the consumer stops first
// (done) or after drainTimeout.
func (l *lagWatch) wait(ctx context.Context, done <-chan error, events int64) (time.Duration, error) {
	start := time.Now()
	var first time.Duration
	for {
		lags, err := consumer.GroupLag(ctx, l.client, l.group, topics)
		if err != nil && !errors.Is(err, kafka.GroupIdNotFound) {
			return 0, fmt.Errorf("group lag: %w", err)
		}
		var end, committed, lag int64
		for _, pl := range lags {
			end += pl.End
			committed += max(pl.Committed, 0)
			lag += pl.Lag
		}
		l.last.Store(committed)
		if first == 0 && committed > 0 {
			first = time.Since(start)
		}
		if err == nil && lag == 0 && end > 0 && (end == events || events == 0) {
			return first, nil
		}
		if events > 0 && end > events {
			return 0, fmt.Errorf("the topics hold %d messages, want %d", end, events)
		}
		select {
		case err := <-done:
			return 0, fmt.Errorf("rankd stopped before draining (%d of %d committed): %v", committed, end, err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(lagPoll):
		}
		if time.Since(start) > drainTimeout {
			return 0, fmt.Errorf("not drained after %v: %d of %d committed", drainTimeout, committed, end)
		}
	}
}

// counterSum returns the sum of a counter family's series.
func counterSum(g prometheus.Gatherer, name string) (float64, error) {
	m, err := counterByLabel(g, name, "")
	var sum float64
	for _, v := range m {
		sum += v
	}
	return sum, err
}

// counterByLabel returns a counter family's values by the value of label.
func counterByLabel(g prometheus.Gatherer, name, label string) (map[string]float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					key = lp.GetValue()
				}
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// histogram returns a histogram's sample count and sum.
func histogram(g prometheus.Gatherer, name string) (count, sum float64, err error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			count += float64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum, nil
}
