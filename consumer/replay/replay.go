package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/fetch"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"
)

// Config configures Plan and Replay. Zero values take the
// defaults.
type Config struct {
	Brokers []string
	Dialer  *kafka.Dialer // TLS / SASL; nil: plain TCP
	Topics  []string      // Kafka topics to replay
	// From starts the replay at the first message of each partition whose
	// timestamp is at or after From (Kafka's offsets for time); zero: at
	// the start of the log. Messages before it are still read, to compute
	// the partitions' stream times, but not applied.
	From time.Time
	// To ends it before the first message whose timestamp is after To;
	// zero: at the end of the log when Plan runs.
	To time.Time
	// BatchCount is the most messages per Sink.Apply; default
	// DefaultBatch.
	BatchCount int
	// Parallel is how many partitions are applied at once; default 4.
	Parallel int
	// MaxWait bounds a fetch's wait; default consumer.DefaultMaxWait (250ms).
	MaxWait time.Duration
	// Progress, when set, is called after every batch with the messages
	// read so far of the batch's topic (from From; skipped ones not
	// counted), one call at a time, so that a topic's count never goes
	// back. It must not block.
	Progress func(topic string, done int64)
	// DeadLetters, when set, writes the dead letters of messages at or
	// after their range's DeadFrom (see Range); an error is
	// retried with the batch.
	DeadLetters func(ctx context.Context, dead []consumer.DeadLetter) error
	// NoRetry makes an Apply error end the replay (wrapped in
	// ErrNotRetried) instead of being retried: a sink that decides which
	// messages are new (consumer.Decider) cannot apply a batch twice.
	NoRetry bool
}

// DefaultBatch is a replay's most messages per batch. Each batch applied
// at once (Parallel) holds its plan: 2,000 gifts route to about 13,000
// updates of 144 bytes. Batches of 5,000 made a 1M replay's heap grow by
// 80 MB more, whose first touches cost more CPU than the larger batches
// saved where page faults are dear (docs/benchmarks.md, "Fresh memory").
const DefaultBatch = 2000

// ErrNotRetried wraps the Apply error that ended a Config.NoRetry replay.
var ErrNotRetried = errors.New("replay: apply failed (not retried)")

func (c Config) withDefaults() Config {
	if c.BatchCount <= 0 {
		c.BatchCount = DefaultBatch
	}
	if c.Parallel <= 0 {
		c.Parallel = 4
	}
	if c.MaxWait <= 0 {
		c.MaxWait = consumer.DefaultMaxWait
	}
	return c
}

// Range is what a replay reads of one partition.
type Range struct {
	Topic     string
	Partition int
	First     int64 // first offset of the log: stream time starts here
	From      int64 // first offset applied
	End       int64 // offset after the last one replayed
	// Splits are offsets where a batch must end, so that the partition's
	// stream time mark is written exactly there: the live group's committed
	// offsets, from which live consumption resumes (see SplitAtCommitted).
	Splits []int64
	// DeadFrom is the offset from which the replay writes dead letters
	// (Config.DeadLetters): the live group's committed offset, below
	// which live consumption wrote them (SplitAtCommitted). Plan sets
	// it to End: none.
	DeadFrom int64
}

// SplitAtCommitted adds the committed offsets of lags (a live group's) to
// the Splits of their ranges.
func SplitAtCommitted(ranges []Range, lags []consumer.PartitionLag) {
	for i := range ranges {
		for _, l := range lags {
			if l.Topic == ranges[i].Topic && l.Partition == ranges[i].Partition && l.Committed >= 0 && l.Committed < ranges[i].DeadFrom {
				ranges[i].DeadFrom = l.Committed
			}
			if l.Topic == ranges[i].Topic && l.Partition == ranges[i].Partition && l.Committed > ranges[i].First {
				ranges[i].Splits = append(ranges[i].Splits, l.Committed)
			}
		}
	}
}

// Total is the number of offsets applied.
func (r Range) Total() int64 { return max(r.End-r.From, 0) }

// Plan reads, for every partition of cfg.Topics, the offsets a
// replay covers: from the start of the log (or cfg.From) to its current end
// (or cfg.To). Call it after the generation to build is marked as being
// built: every message that live consumption applied without writing the
// new generation is then below End.
func Plan(ctx context.Context, cfg Config) ([]Range, error) {
	cfg = cfg.withDefaults()
	tr := consumer.Transport(cfg.Dialer)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second, Transport: tr}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: cfg.Topics})
	if err != nil {
		return nil, fmt.Errorf("reading topic metadata: %w", err)
	}
	var out []Range
	for _, tm := range md.Topics {
		if tm.Error != nil {
			return nil, fmt.Errorf("topic %s: %w", tm.Name, tm.Error)
		}
		var ends []kafka.OffsetRequest
		for _, p := range tm.Partitions {
			ends = append(ends, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
		}
		offs, err := topicOffsets(ctx, client, tm.Name, ends)
		if err != nil {
			return nil, err
		}
		from, err := timeOffsets(ctx, client, tm.Name, tm.Partitions, cfg.From)
		if err != nil {
			return nil, err
		}
		to, err := timeOffsets(ctx, client, tm.Name, tm.Partitions, cfg.To)
		if err != nil {
			return nil, err
		}
		for _, po := range offs {
			r := Range{Topic: tm.Name, Partition: po.Partition, First: po.FirstOffset, From: po.FirstOffset, End: po.LastOffset, DeadFrom: po.LastOffset}
			if o, ok := from[po.Partition]; ok {
				r.From = min(max(o, r.First), r.End)
			}
			if o, ok := to[po.Partition]; ok {
				r.End = min(max(o, r.From), r.End)
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Range) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return a.Partition - b.Partition
	})
	return out, nil
}

func topicOffsets(ctx context.Context, client *kafka.Client, topic string, reqs []kafka.OffsetRequest) ([]kafka.PartitionOffsets, error) {
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("listing offsets of %s: %w", topic, err)
	}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
	}
	return res.Topics[topic], nil
}

// timeOffsets returns per partition the offset of the first message with a
// timestamp at or after t (absent: none; the caller uses the end). A zero
// t gives an empty map.
func timeOffsets(ctx context.Context, client *kafka.Client, topic string, parts []kafka.Partition, t time.Time) (map[int]int64, error) {
	out := map[int]int64{}
	if t.IsZero() {
		return out, nil
	}
	var reqs []kafka.OffsetRequest
	for _, p := range parts {
		reqs = append(reqs, kafka.TimeOffsetOf(p.ID, t))
	}
	offs, err := topicOffsets(ctx, client, topic, reqs)
	if err != nil {
		return nil, err
	}
	for _, po := range offs {
		out[po.Partition] = 1<<63 - 1 // no message at or after t
		for o := range po.Offsets {
			if o >= 0 {
				out[po.Partition] = o
			}
		}
	}
	return out, nil
}

// Sink is the part of consumer.RankingSink a replay needs: Apply for the
// messages it rebuilds from, Observe for those before the start, which
// only advance their partitions' stream times.
type Sink interface {
	consumer.Sink
	Observe(ctx context.Context, msgs []kafka.Message) error
}

// Stats is what Replay did.
type Stats struct {
	Messages    int64            // messages applied (from From)
	Observed    int64            // messages read before From (stream time only)
	DeadLetters map[string]int64 // by reason (not written anywhere: live consumption wrote them)
}

// Replay reads every range with one reader per partition, in offset order,
// and hands batches to sink: messages before From to Observe, the others
// to Apply. At most cfg.Parallel partitions are applied at once. A
// transient Apply error is retried with backoff until ctx ends; Replay
// returns ctx's error then, or nil when every range is done. It writes no
// dead letters (but those of messages from each range's DeadFrom on, to
// cfg.DeadLetters: messages live consumption never dead-lettered) and
// commits no offsets: a replay is a function of the ranges.
func Run(ctx context.Context, cfg Config, ranges []Range, sink Sink) (Stats, error) {
	cfg = cfg.withDefaults()
	var (
		mu    sync.Mutex
		stats = Stats{DeadLetters: map[string]int64{}}
		done  = map[string]int64{} // messages applied per topic
	)
	sem := make(chan struct{}, cfg.Parallel)
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range ranges {
		if r.End <= r.First || r.End <= r.From {
			continue
		}
		g.Go(func() error {
			return replayPartition(gctx, cfg, r, sink, sem, func(applied, observed int64, dead []consumer.DeadLetter) {
				mu.Lock()
				defer mu.Unlock()
				stats.Messages += applied
				stats.Observed += observed
				for _, d := range dead {
					stats.DeadLetters[d.Reason]++
				}
				// under mu: a topic's partitions report in the order of
				// their counts, so that Progress never goes back
				done[r.Topic] += applied
				if cfg.Progress != nil && applied > 0 {
					cfg.Progress(r.Topic, done[r.Topic])
				}
			})
		})
	}
	err := g.Wait()
	return stats, err
}

func replayPartition(ctx context.Context, cfg Config, r Range, sink Sink, sem chan struct{},
	report func(applied, observed int64, dead []consumer.DeadLetter)) error {
	rd := fetch.New(fetch.Config{Brokers: cfg.Brokers, Dialer: cfg.Dialer, MaxBytes: 1 << 20, MaxWait: cfg.MaxWait},
		r.Topic, r.Partition, r.First)
	defer rd.Close()
	next := r.First
	var chunks [][]kafka.Message // the last fetch's, as handed over; from chunks[0][bi] on not in a batch yet
	bi, failures := 0, 0
	batch := make([]kafka.Message, 0, cfg.BatchCount)
	for next < r.End {
		batch = batch[:0]
		// A batch is all before From or all from it, and never past End.
		observing := next < r.From
		limit := r.End
		if observing {
			limit = r.From
		}
		for _, sp := range r.Splits {
			if sp > next && sp < limit {
				limit = sp
			}
		}
		for len(batch) < cfg.BatchCount && next < limit {
			if len(chunks) > 0 && bi == len(chunks[0]) {
				chunks, bi = chunks[1:], 0
			}
			if len(chunks) == 0 {
				err := rd.Fetch(ctx, fetchChunk, func(msgs []kafka.Message) bool {
					chunks = append(chunks, msgs)
					return true
				})
				if len(chunks) == 0 {
					if err == nil {
						if len(batch) > 0 {
							break // none within MaxWait: hand over what we have
						}
						continue
					}
					if ctx.Err() != nil {
						return ctx.Err()
					}
					var trunc *fetch.TruncatedError
					if failures++; errors.As(err, &trunc) || failures >= fetchAttempts {
						return fmt.Errorf("replaying %s/%d: %w", r.Topic, r.Partition, err)
					}
					if !consumer.Sleep(ctx, consumer.Backoff(failures, 50*time.Millisecond, 5*time.Second)) {
						return ctx.Err()
					}
					continue
				}
				failures = 0 // (an error after some messages: the next fetch retries)
			}
			m := chunks[0][bi]
			if m.Offset >= limit {
				// Offsets are not dense (transaction markers): the message
				// belongs to the next phase, or past the end.
				if m.Offset >= r.End {
					next = r.End
					break
				}
				next = m.Offset
				break
			}
			bi++
			batch = append(batch, m)
			next = m.Offset + 1
		}
		if len(batch) == 0 {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := applyReplayBatch(ctx, cfg, sink, batch, observing, r.DeadFrom, report)
		<-sem
		if err != nil {
			return err
		}
	}
	return nil
}

// fetchAttempts is how many fetches of a partition in a row may fail
// before a replay gives up.
const fetchAttempts = 5

// fetchChunk is how many messages a fetch hands over at a time.
const fetchChunk = 1000

func applyReplayBatch(ctx context.Context, cfg Config, sink Sink, batch []kafka.Message, observing bool, deadFrom int64,
	report func(applied, observed int64, dead []consumer.DeadLetter)) error {
	for attempt := 1; ; attempt++ {
		var err error
		if observing {
			if err = sink.Observe(ctx, batch); err == nil {
				report(0, int64(len(batch)), nil)
				return nil
			}
		} else {
			var dead []consumer.DeadLetter
			if dead, err = sink.Apply(ctx, batch); err == nil && cfg.DeadLetters != nil {
				var write []consumer.DeadLetter
				for _, d := range dead {
					if d.Msg.Offset >= deadFrom {
						write = append(write, d)
					}
				}
				if len(write) > 0 {
					err = cfg.DeadLetters(ctx, write)
				}
			}
			if err == nil {
				report(int64(len(batch)), 0, dead)
				return nil
			}
			if cfg.NoRetry && ctx.Err() == nil {
				return fmt.Errorf("%w: %w", ErrNotRetried, err)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !consumer.Sleep(ctx, consumer.Backoff(attempt, 50*time.Millisecond, 5*time.Second)) {
			return ctx.Err()
		}
	}
}
