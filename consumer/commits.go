package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// committer commits the offsets of one worker's applied batches in one
// group generation, in the background: the worker hands a batch's offsets
// over once the batch is applied and its dead letters written, and goes on
// to its next batch while the commit is in flight. One commit is in flight
// at a time; the offsets handed over meanwhile wait, merged per partition
// with the newest winning, and go in the next commit. So the group's
// offsets move in the order the batches were applied, and never past a
// message not applied yet.
//
// A commit is off the path from fetch to visible: the boards change when a
// batch is applied, and where a partition's next reader starts is the
// position Redis holds (Positioner), not the commit. Until a commit lands,
// the group's offsets, and the lag read from them, trail the boards by
// that batch.
type committer struct {
	w          *worker
	gen        *kafka.Generation
	lctx, hard context.Context

	mu       sync.Mutex
	pending  map[string]map[int]int64 // topic -> partition -> next offset
	messages int                      // messages of the batches pending
	first    int64                    // when the first message of the oldest batch pending was fetched (mono)
	err      error                    // a commit not done within the shutdown timeout: the committer stopped

	wake    chan struct{} // a batch is pending (capacity 1)
	closing chan struct{}
	done    chan struct{}
}

func newCommitter(w *worker, lctx, hard context.Context, gen *kafka.Generation) *committer {
	c := &committer{w: w, gen: gen, lctx: lctx, hard: hard,
		wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// add hands over the offsets of applied batch b. It returns the error of
// a commit that did not finish within the shutdown timeout (the committer
// stopped then, and the worker must too).
func (c *committer) add(b *batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.pending == nil {
		c.pending = map[string]map[int]int64{}
		c.first = b.first
	}
	for _, m := range b.offsets() {
		ps := c.pending[m.Topic]
		if ps == nil {
			ps = map[int]int64{}
			c.pending[m.Topic] = ps
		}
		ps[m.Partition] = m.Offset + 1
	}
	c.messages += len(b.msgs)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// finish commits what is pending (unless the generation ended in a
// rebalance: then nothing is committed, as for a batch in flight), waits
// for the committer to stop and returns the error that stopped it.
func (c *committer) finish() error {
	close(c.closing)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *committer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
			if !c.commit() {
				return
			}
		case <-c.closing:
			c.commit()
			return
		}
	}
}

// take returns the offsets pending (nil: none), with their messages and
// when the oldest batch's first message was fetched, and empties them.
func (c *committer) take() (map[string]map[int]int64, int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	offs, n, first := c.pending, c.messages, c.first
	c.pending, c.messages = nil, 0
	return offs, n, first
}

// commit commits the offsets pending; it reports false when it could not
// within the shutdown timeout (c.err).
//
// A commit that keeps failing (a broker outage) is given up after
// CommitAttempts: its batches are applied, and Redis holds the position
// they reached, from which each partition's next reader resumes. Offsets
// handed over while it is retried join the retry. When the generation
// ended by a rebalance, nothing is committed: the partitions may belong to
// another member now.
func (c *committer) commit() bool {
	w := c.w
	offs, n, first := c.take()
	if offs == nil {
		return true
	}
	for attempt := 1; ; attempt++ {
		if c.lctx.Err() != nil && !shuttingDown(c.lctx) && w.stop.Err() == nil {
			w.m.commitSkips.Inc()
			w.log.Info("group rebalanced while the batch was applied; not committing it", "messages", n)
			return true
		}
		err := commitWithin(c.hard, w.cfg.CommitTimeout, func() error { return c.gen.CommitOffsets(offs) })
		if err == nil {
			now := mono()
			w.latency.Store(now - first)
			w.latestAt.Store(now)
			w.progress.Store(time.Now().UnixNano())
			w.noteCommitted(offs)
			return true
		}
		if c.hard.Err() != nil {
			return c.stopped(n, err)
		}
		if attempt >= w.cfg.CommitAttempts || errors.Is(err, kafka.RebalanceInProgress) || errors.Is(err, kafka.IllegalGeneration) {
			w.m.commitDrops.Inc()
			w.log.Warn("committing offsets failed; giving up on this batch (redis holds its position; a later commit or the next reader covers it)",
				"attempts", attempt, "err", err)
			return true
		}
		w.m.retries.WithLabelValues("commit").Inc()
		w.log.Warn("committing offsets failed; retrying", "attempt", attempt, "err", err)
		if !Sleep(c.hard, Backoff(attempt, w.cfg.RetryMin, w.cfg.RetryMax)) {
			return c.stopped(n, err)
		}
		// newer batches join the retry, their offsets winning
		// (into a new map: an attempt given up on may still be reading offs)
		if more, m, _ := c.take(); more != nil {
			merged := map[string]map[int]int64{}
			for _, src := range []map[string]map[int]int64{offs, more} {
				for topic, ps := range src {
					if merged[topic] == nil {
						merged[topic] = map[int]int64{}
					}
					for p, o := range ps {
						merged[topic][p] = o
					}
				}
			}
			offs, n = merged, n+m
		}
	}
}

// stopped records that the offsets of n applied messages were not
// committed within the shutdown timeout (the last attempt failing with
// err), which stops the committer; it returns false.
func (c *committer) stopped(n int, err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = fmt.Errorf("worker %d: applied batches of %d messages not committed within the shutdown timeout (they will be redelivered): %w", c.w.id, n, err)
	return false
}
