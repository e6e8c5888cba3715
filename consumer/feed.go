package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/fetch"
)

// feed reads the partitions one worker holds in one group generation, each
// from an offset of its own (where Redis says it stands), into one bounded
// channel. A partition can be restarted at another offset (a rewind) or
// stopped (a halt) at any time: every message carries the epoch of the
// reader that fetched it, and messages of an older epoch are dropped.
type feed struct {
	ctx context.Context // the generation's
	cfg Config
	log *slog.Logger
	ch  chan fed
	// queued is the messages fetched and not yet taken by the worker: in
	// ch, or in a send waiting for room (send adds them, got takes them
	// off), in messages whatever the chunks' sizes
	queued atomic.Int64
	rest   fed // the part of a chunk that did not fit in the last batch
	wg     sync.WaitGroup
	mu     sync.Mutex
	part   map[partitionKey]*feedPart
}

type feedPart struct {
	// epoch grows at every start and stop (under feed.mu); it is read
	// without the lock for every message (current)
	epoch  atomic.Int64
	cancel context.CancelFunc // nil: stopped
}

// fed is a chunk of consecutive messages of one partition, the epoch of
// the reader that fetched them and when they were fetched (mono); or, with
// trunc, the reader's finding that Kafka no longer holds its offset.
type fed struct {
	msgs  []kafka.Message
	k     partitionKey
	part  *feedPart
	epoch int64
	at    int64
	trunc *fetch.TruncatedError
}

// feedChunk is the most messages one channel send carries: a worker takes
// a whole fetch in a few sends instead of one a message.
const feedChunk = 256

// processStart is the origin of mono.
var processStart = time.Now()

// mono is the monotonic clock in ns since processStart.
func mono() int64 { return int64(time.Since(processStart)) }

func newFeed(ctx context.Context, cfg Config, log *slog.Logger) *feed {
	return &feed{ctx: ctx, cfg: cfg, log: log, ch: make(chan fed, max(1, cfg.QueueCapacity/feedChunk)), part: map[partitionKey]*feedPart{}}
}

// start (re)starts reading k at offset (or kafka.FirstOffset /
// kafka.LastOffset); messages fetched before from k are dropped.
func (f *feed) start(k partitionKey, offset int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.part[k]
	if p == nil {
		p = &feedPart{}
		f.part[k] = p
	}
	if p.cancel != nil {
		p.cancel()
	}
	epoch := p.epoch.Add(1)
	ctx, cancel := context.WithCancel(f.ctx)
	p.cancel = cancel
	f.wg.Go(func() { f.read(ctx, k, offset, p, epoch) })
}

// stop stops reading k; messages fetched before from k are dropped.
func (f *feed) stop(k partitionKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.part[k]; p != nil && p.cancel != nil {
		p.cancel()
		p.cancel = nil
		p.epoch.Add(1)
	}
}

// current reports whether m comes from its partition's current reader:
// none was started or stopped since it fetched m (each moves the epoch
// on, and a stopped partition has no reader of the new epoch).
func (f *feed) current(m fed) bool {
	return m.part.epoch.Load() == m.epoch
}

// close stops every reader and waits for them; the generation's context
// must be done or ending.
func (f *feed) close() {
	f.mu.Lock()
	for _, p := range f.part {
		if p.cancel != nil {
			p.cancel()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// read fetches k from offset into the channel until ctx is done, in
// chunks of at most feedChunk messages. A fetch that finds its
// offset deleted by retention sends the error instead (the worker halts
// the partition); other failures are retried from the same offset.
func (f *feed) read(ctx context.Context, k partitionKey, offset int64, p *feedPart, epoch int64) {
	log := f.log.With("topic", k.topic, "partition", k.partition)
	r := fetch.New(fetch.Config{
		Brokers:  f.cfg.Brokers,
		Dialer:   f.cfg.Dialer,
		MinBytes: f.cfg.MinBytes,
		MaxBytes: f.cfg.MaxBytes,
		MaxWait:  f.cfg.MaxWait,
	}, k.topic, k.partition, offset)
	defer r.Close()
	for failures := 0; ; {
		err := r.Fetch(ctx, feedChunk, func(msgs []kafka.Message) bool {
			return f.send(ctx, fed{msgs: msgs, k: k, part: p, epoch: epoch, at: mono()})
		})
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		var trunc *fetch.TruncatedError
		if errors.As(err, &trunc) {
			f.send(ctx, fed{k: k, part: p, epoch: epoch, at: mono(), trunc: trunc})
			return
		}
		failures++
		log.Warn("fetching messages failed; retrying", "attempt", failures, "offset", r.Offset(), "err", err)
		if !Sleep(ctx, Backoff(failures, f.cfg.RetryMin, f.cfg.RetryMax)) {
			return
		}
	}
}

// send puts m in the channel, unless ctx ends first.
func (f *feed) send(ctx context.Context, m fed) bool {
	f.queued.Add(int64(len(m.msgs)))
	select {
	case f.ch <- m:
		return true
	case <-ctx.Done():
		f.queued.Add(-int64(len(m.msgs)))
		return false
	}
}

// got notes that the worker took m from the channel, and returns it.
func (f *feed) got(m fed) fed {
	f.queued.Add(-int64(len(m.msgs)))
	return m
}
