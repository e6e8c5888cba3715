package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/internal/workload"
)

// preloadChunk is the most messages per WriteMessages call.
const preloadChunk = 5000

// newWriter returns a kafka-go Writer tuned as `rankd produce` tunes it:
// synchronous, batches of up to 1000 messages or batchTimeout, acks from
// all replicas, partitioned by the key (the anchor).
func newWriter(brokers []string, batchTimeout time.Duration) *kafka.Writer {
	return &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Balancer:               &kafka.Hash{},
		BatchSize:              1000,
		BatchBytes:             4 << 20,
		BatchTimeout:           batchTimeout,
		RequiredAcks:           kafka.RequireAll,
		AllowAutoTopicCreation: true,
	}
}

func (e *env) workload() (*workload.Generator, error) {
	return workload.New(workload.Config{Seed: e.o.Seed, Start: e.start, Step: e.step})
}

// preload writes the Events to the topics and the first NaiveEvents to
// their naive copies, then routes the events as rankd will, for the
// drains' checks.
func (e *env) preload(ctx context.Context) (Preload, error) {
	d, err := e.produce(ctx, "", e.o.Events, "preload")
	if err != nil {
		return Preload{}, err
	}
	p := Preload{Events: e.o.Events, Seconds: round(d.Seconds(), 2), EventsPerSec: round(float64(e.o.Events)/d.Seconds(), 0),
		From: e.start.Format(time.RFC3339), Span: eventSpan.String()}
	if !e.o.skipped(PhaseNaive) {
		if _, err := e.produce(ctx, naivePrefix, e.o.NaiveEvents, "preload naive copies"); err != nil {
			return p, err
		}
	}
	if err := e.route(); err != nil {
		return p, err
	}
	ends, err := endOffsets(ctx, e.brokers, topics)
	if err != nil {
		return p, err
	}
	var sum int64
	p.Partitions = map[string]int{}
	for tp, n := range ends {
		sum += n
		p.Partitions[tp[:strings.LastIndexByte(tp, '/')]]++
	}
	if sum != int64(e.o.Events) {
		return p, fmt.Errorf("the topics hold %d messages after the preload, want %d", sum, e.o.Events)
	}
	return p, nil
}

// produce writes the first n events of the workload to the topics named
// prefix+topic and returns how long it took: one goroutine generates
// chunks, Producers goroutines write them through one Writer.
func (e *env) produce(ctx context.Context, prefix string, n int, what string) (time.Duration, error) {
	wl, err := e.workload()
	if err != nil {
		return 0, err
	}
	w := newWriter(e.brokers, 5*time.Millisecond)
	defer w.Close()
	var sent atomic.Int64
	e.prog.set(what, func() (int64, int64) { return sent.Load(), int64(n) })
	chunks := make(chan []kafka.Message, 2*e.o.Producers)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(chunks)
		for done := 0; done < n; {
			c := make([]kafka.Message, min(preloadChunk, n-done))
			for i := range c {
				ev := wl.Next()
				c[i] = kafka.Message{Topic: prefix + ev.Topic, Key: ev.Key, Value: ev.Value}
			}
			done += len(c)
			select {
			case chunks <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range e.o.Producers {
		g.Go(func() error {
			for c := range chunks {
				if err := w.WriteMessages(gctx, c...); err != nil {
					return fmt.Errorf("writing %d messages: %w", len(c), writeErr(err))
				}
				sent.Add(int64(len(c)))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// writeErr shortens kafka-go's per-message errors to the first one.
func writeErr(err error) error {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil {
				return fmt.Errorf("%d of %d failed, first: %w", we.Count(), len(we), e)
			}
		}
	}
	return err
}

// route counts the updates per board of the Events, routed as rankd routes
// them (same generator and seed: the same events).
func (e *env) route() error {
	cfg, err := e.config("count", "count")
	if err != nil {
		return err
	}
	router, err := cfg.Router()
	if err != nil {
		return err
	}
	wl, err := e.workload()
	if err != nil {
		return err
	}
	var done atomic.Int64
	e.prog.set("routing the preloaded events (expected updates)", func() (int64, int64) { return done.Load(), int64(e.o.Events) })
	e.expect = map[string]int64{}
	e.expectTotal = 0
	for range e.o.Events {
		ev := wl.Next()
		ie, err := cfg.Schemas()[ev.Topic].Decode(ev.Topic, 0, 0, ev.Value, nil, time.Now())
		if err != nil {
			return fmt.Errorf("generated event does not decode: %w: %s", err, ev.Value)
		}
		ups, err := router.Route(ie)
		if err != nil {
			return fmt.Errorf("generated event does not route: %w: %s", err, ev.Value)
		}
		for _, u := range ups {
			e.expect[u.Board]++
		}
		e.expectTotal += int64(len(ups))
		done.Add(1)
	}
	return nil
}

// endOffsets returns the end offset of every partition of topics, by
// "topic/partition".
func endOffsets(ctx context.Context, brokers []string, names []string) (map[string]int64, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 30 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil {
		return nil, fmt.Errorf("kafka metadata: %w", err)
	}
	reqs := map[string][]kafka.OffsetRequest{}
	for _, t := range md.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("topic %s: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			reqs[t.Name] = append(reqs[t.Name], kafka.LastOffsetOf(p.ID))
		}
	}
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: reqs})
	if err != nil {
		return nil, fmt.Errorf("listing offsets: %w", err)
	}
	out := map[string]int64{}
	for t, pos := range res.Topics {
		for _, po := range pos {
			if po.Error != nil {
				return nil, fmt.Errorf("offsets of %s/%d: %w", t, po.Partition, po.Error)
			}
			out[fmt.Sprintf("%s/%d", t, po.Partition)] = po.LastOffset
		}
	}
	return out, nil
}
