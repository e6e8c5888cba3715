package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// naiveScript is the naive consumer's per-update script: dedupe on the
// message ID (and board: one event may feed several boards) and increment.
const naiveScript = `
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return redis.call('ZINCRBY', KEYS[2], ARGV[2], ARGV[3])
end
return false`

// SeedScript is the rolling-board script published with seed article 000,
// the baseline of rankd's benchmarks. seed000.lua is the repository's one
// copy (ranking/store's BenchmarkApply reads it from here).
//
//go:embed seed000.lua
var SeedScript string

const naiveCommit = 1000 // messages per naive commit

// groupReader returns a kafka-go group Reader as the naive and seed
// consumers use it.
func groupReader(brokers []string, group string, topics []string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:         brokers,
		GroupID:         group,
		GroupTopics:     topics,
		QueueCapacity:   1000,
		MinBytes:        1,
		MaxBytes:        1e6,
		MaxWait:         250 * time.Millisecond,
		ReadLagInterval: -1,
		CommitInterval:  0,
		StartOffset:     kafka.FirstOffset,
	})
}

// drainNaive consumes the naive copies of the first NaiveEvents events the
// way seed articles do: a kafka-go group Reader, FetchMessage one at a
// time, the same schemas and router as rankd, then one EVALSHA per update
// (SET NX PX of the message ID and board, ZINCRBY of the period's sorted
// set), one round trip each, and a commit every 1000 messages.
func (e *env) drainNaive(ctx context.Context) (*Drain, error) {
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	cfg, err := e.config("bench-naive", "naive")
	if err != nil {
		return nil, err
	}
	router, err := cfg.Router()
	if err != nil {
		return nil, err
	}
	schemas := cfg.Schemas()
	prefix := cfg.Redis.Prefix
	ttl := strconv.FormatInt(cfg.Redis.DedupeTTL.Milliseconds(), 10)
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr})
	defer rdb.Close()
	script := redis.NewScript(naiveScript)
	if err := script.Load(ctx, rdb).Err(); err != nil {
		return nil, err
	}
	r := groupReader(e.brokers, "bench-naive", naiveTopics())
	defer r.Close()

	n := e.o.NaiveEvents
	d := &Drain{Events: int64(n)}
	var done atomic.Int64
	e.prog.set("naive drain", func() (int64, int64) { return done.Load(), int64(n) })
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	pending := make([]kafka.Message, 0, naiveCommit)
	var ups []ranking.Update
	for i := 0; i < n; i++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("fetching: %w", err)
		}
		topic := strings.TrimPrefix(m.Topic, naivePrefix)
		ev, err := schemas[topic].Decode(topic, m.Partition, m.Offset, m.Value, nil, m.Time)
		if err != nil {
			return nil, fmt.Errorf("decoding %s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err)
		}
		if ups, err = router.AppendRoute(ups[:0], ev); err != nil {
			return nil, fmt.Errorf("routing %s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err)
		}
		for k := range ups {
			u := &ups[k]
			err := script.Run(ctx, rdb, []string{prefix + ":d:" + u.MsgID + ":" + u.Board, seedKey(cfg, prefix, u, 0, store.KindPeriod)},
				ttl, u.Value, u.Member).Err()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("applying: %w", err)
			}
			d.Updates++
		}
		pending = append(pending, m)
		if len(pending) == naiveCommit || i == n-1 {
			if err := r.CommitMessages(ctx, pending...); err != nil {
				return nil, fmt.Errorf("committing: %w", err)
			}
			done.Add(int64(len(pending)))
			pending = pending[:0]
		}
	}
	after, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	elapsed := after.at.Sub(before.at)
	d.Seconds, d.EventsPerSec = round(elapsed.Seconds(), 2), round(float64(n)/elapsed.Seconds(), 0)
	d.CPU = cpu(before, after, d.Events, d.Updates, elapsed)
	if d.Commands, err = e.commandStats(ctx, d.Events, after.redis-before.redis); err != nil {
		return nil, err
	}
	d.Notes = append(d.Notes, fmt.Sprintf("naive: one group Reader, %d messages, %d updates (%.3f per event), one EVALSHA (SET NX PX + ZINCRBY) per update and round trip, commit every %d messages",
		n, d.Updates, float64(d.Updates)/float64(n), naiveCommit))
	return d, nil
}

// seedKey returns the key of the sorted set of update u's board and
// period, shifted by shift periods (total boards: "all" whatever the
// shift), with kind (store.KindPeriod or store.KindRolling).
func seedKey(cfg *config.Config, prefix string, u *ranking.Update, shift int, kind string) string {
	b := cfg.Board(u.Board)
	tag := store.Tag(u.Board, u.Dims)
	if b.Window == ranking.WindowTotal {
		return store.Key(prefix, tag, kind, store.PeriodAll)
	}
	cal := b.Calendar()
	p := cal.At(u.Time)
	for ; shift > 0; shift-- {
		p = cal.Next(p)
	}
	for ; shift < 0; shift++ {
		p = cal.Prev(p)
	}
	return store.Key(prefix, tag, kind, p.ID)
}

// drainSeed consumes the Events with the seed 000 script, pipelined: a
// kafka-go group Reader, FetchMessage until a batch of Batch messages (or
// the last events), the same schemas and router as rankd, then one EVALSHA
// per update in one pipeline, and a commit. The script's keys per update:
// the day board of its period P(c), the rolling board S(c), the day board
// leaving the window P(c-7) and tomorrow's rolling board S(c+1), whatever
// the board's window (total boards: one "all" period), so every update
// costs the script's 2 ZINCRBY, ZSCORE, ZADD and ZREVRANK. No dedupe.
func (e *env) drainSeed(ctx context.Context) (*Drain, error) {
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	cfg, err := e.config("bench-seed", "seed")
	if err != nil {
		return nil, err
	}
	router, err := cfg.Router()
	if err != nil {
		return nil, err
	}
	schemas := cfg.Schemas()
	prefix := cfg.Redis.Prefix
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr})
	defer rdb.Close()
	script := redis.NewScript(SeedScript)
	if err := script.Load(ctx, rdb).Err(); err != nil {
		return nil, err
	}
	r := groupReader(e.brokers, "bench-seed", topics)
	defer r.Close()

	n := e.o.Events
	d := &Drain{Events: int64(n)}
	var done atomic.Int64
	e.prog.set("seed pipelined drain", func() (int64, int64) { return done.Load(), int64(n) })
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	batch := make([]kafka.Message, 0, e.o.Batch)
	var ups []ranking.Update
	var batches int
	for read := 0; read < n; {
		batch = batch[:0]
		for len(batch) < e.o.Batch && read < n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				return nil, fmt.Errorf("fetching: %w", err)
			}
			batch = append(batch, m)
			read++
		}
		pipe := rdb.Pipeline()
		for _, m := range batch {
			ev, err := schemas[m.Topic].Decode(m.Topic, m.Partition, m.Offset, m.Value, nil, m.Time)
			if err != nil {
				return nil, fmt.Errorf("decoding %s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err)
			}
			if ups, err = router.AppendRoute(ups[:0], ev); err != nil {
				return nil, fmt.Errorf("routing %s/%d@%d: %w", m.Topic, m.Partition, m.Offset, err)
			}
			for k := range ups {
				u := &ups[k]
				keys := []string{seedKey(cfg, prefix, u, 0, store.KindPeriod), seedKey(cfg, prefix, u, 0, store.KindRolling),
					seedKey(cfg, prefix, u, -7, store.KindPeriod), seedKey(cfg, prefix, u, 1, store.KindRolling)}
				script.EvalSha(ctx, pipe, keys, u.Member, u.Value)
				d.Updates++
			}
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			return nil, fmt.Errorf("applying: %w", err)
		}
		for _, c := range cmds {
			if c.Err() != nil {
				return nil, fmt.Errorf("applying: %w", c.Err())
			}
		}
		if err := r.CommitMessages(ctx, batch...); err != nil {
			return nil, fmt.Errorf("committing: %w", err)
		}
		batches++
		done.Add(int64(len(batch)))
	}
	after, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	elapsed := after.at.Sub(before.at)
	d.Seconds, d.EventsPerSec = round(elapsed.Seconds(), 2), round(float64(n)/elapsed.Seconds(), 0)
	d.CPU = cpu(before, after, d.Events, d.Updates, elapsed)
	if d.Commands, err = e.commandStats(ctx, d.Events, after.redis-before.redis); err != nil {
		return nil, err
	}
	d.Notes = append(d.Notes, fmt.Sprintf("seed: one group Reader, %d messages in %d pipelines, %d updates (%.3f per event), one EVALSHA of the seed 000 script per update, no dedupe",
		n, batches, d.Updates, float64(d.Updates)/float64(n)))
	return d, nil
}
