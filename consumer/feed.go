package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// feed reads the partitions one worker holds in one group generation, each
// from an offset of its own (where Redis says it stands), into one bounded
// channel. A partition can be restarted at another offset (a rewind) or
// stopped (a halt) at any time: every message carries the epoch of the
// reader that fetched it, and messages of an older epoch are dropped.
type feed struct {
	ctx  context.Context // the generation's
	cfg  Config
	log  *slog.Logger
	ch   chan fed
	wg   sync.WaitGroup
	mu   sync.Mutex
	part map[partitionKey]*feedPart
}

type feedPart struct {
	// epoch grows at every start and stop (under feed.mu); it is read
	// without the lock for every message (current)
	epoch  atomic.Int64
	cancel context.CancelFunc // nil: stopped
}

// fed is a message, its partition and the epoch of the reader that
// fetched it, and when it was fetched (mono).
type fed struct {
	m     kafka.Message
	part  *feedPart
	epoch int64
	at    int64
}

// processStart is the origin of mono.
var processStart = time.Now()

// mono is the monotonic clock in ns since processStart.
func mono() int64 { return int64(time.Since(processStart)) }

func newFeed(ctx context.Context, cfg Config, log *slog.Logger) *feed {
	return &feed{ctx: ctx, cfg: cfg, log: log, ch: make(chan fed, cfg.QueueCapacity), part: map[partitionKey]*feedPart{}}
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

// read fetches k from offset into the channel until ctx is done.
func (f *feed) read(ctx context.Context, k partitionKey, offset int64, p *feedPart, epoch int64) {
	log := f.log.With("topic", k.topic, "partition", k.partition)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:         f.cfg.Brokers,
		Topic:           k.topic,
		Partition:       k.partition,
		Dialer:          f.cfg.Dialer,
		MinBytes:        f.cfg.MinBytes,
		MaxBytes:        f.cfg.MaxBytes,
		MaxWait:         f.cfg.MaxWait,
		ReadLagInterval: -1,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			log.Debug("kafka-go: " + fmt.Sprintf(msg, args...))
		}),
	})
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		log.Error("seeking the partition failed", "offset", offset, "err", err)
		return
	}
	for failures := 0; ; {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			log.Warn("fetching messages failed; retrying", "attempt", failures, "err", err)
			if !Sleep(ctx, Backoff(failures, f.cfg.RetryMin, f.cfg.RetryMax)) {
				return
			}
			continue
		}
		failures = 0
		select {
		case f.ch <- fed{m: m, part: p, epoch: epoch, at: mono()}:
		case <-ctx.Done():
			return
		}
	}
}
