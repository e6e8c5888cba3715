package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking"
)

// newStore returns the store of cfg's boards on rdb, as `rankd run` and
// `rankd replay` build it.
func newStore(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) (*ranking.Store, error) {
	feeds := map[string][]string{}
	for _, r := range cfg.Routes {
		for _, b := range r.Boards {
			if !slices.Contains(feeds[b], r.Topic) {
				feeds[b] = append(feeds[b], r.Topic)
			}
		}
	}
	return ranking.NewStore(rdb, cfg.Boards(),
		ranking.WithPrefix(cfg.Redis.Prefix),
		ranking.WithDedupeTTL(cfg.Redis.DedupeTTL),
		ranking.WithBoardTopics(feeds),
		ranking.WithLogger(log))
}

const replayLockTTL = time.Minute

// replay rebuilds every board from the preloaded log into a new key
// generation, as `rankd replay --yes` does: take the replay lock, begin a
// generation, plan the partitions' ranges (split at the rankd group's
// committed offsets), consumer.Replay (batches of 5000, 4 partitions at
// once), roll the rolling boards over, switch, delete the old generation.
// The rate is that of consumer.Replay (reading and applying), as `rankd
// replay` reports it. It runs on the boards the rankd drain left (no
// flush): the new generation is written next to them, as in production.
func (e *env) replay(ctx context.Context) (*Replay, error) {
	began := time.Now()
	if e.o.skipped(PhaseRankd) {
		if err := e.flush(ctx); err != nil {
			return nil, err
		}
	} else if err := e.resetStats(ctx); err != nil {
		return nil, err
	}
	cfg, err := e.config(rankdGroup, rankdPrefix)
	if err != nil {
		return nil, err
	}
	router, err := cfg.Router()
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr, MaxRetries: -1})
	defer rdb.Close()
	store, err := newStore(cfg, rdb, e.o.Log)
	if err != nil {
		return nil, err
	}
	var boards []string
	for _, b := range cfg.Boards() {
		boards = append(boards, b.Name)
	}
	token := newToken()
	if err := store.LockReplay(ctx, token, replayLockTTL); err != nil {
		return nil, err
	}
	defer func() { _ = store.UnlockReplay(context.WithoutCancel(ctx), token) }()
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	wg.Go(func() { // renew the lock
		t := time.NewTicker(replayLockTTL / 6)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
			if err := store.LockReplay(lctx, token, replayLockTTL); err != nil && lctx.Err() == nil {
				cancel(fmt.Errorf("renewing the replay lock: %w", err))
				return
			}
		}
	})

	gen, _, err := store.BeginBuild(lctx, token, boards)
	if err != nil {
		return nil, err
	}
	rc := consumer.ReplayConfig{Brokers: e.brokers, Topics: topics}
	ranges, err := consumer.PlanReplay(lctx, rc)
	if err != nil {
		return nil, err
	}
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(e.brokers...), Timeout: 10 * time.Second, Transport: tr}
	if lags, err := consumer.GroupLag(lctx, client, rankdGroup, topics); err == nil {
		consumer.SplitAtCommitted(ranges, lags)
	} else if !errors.Is(err, kafka.GroupIdNotFound) {
		return nil, err
	}
	build := store.Generation(gen)
	reg := prometheus.NewRegistry()
	sink, err := consumer.NewRankingSink(cfg.Schemas(), router, build,
		consumer.WithRegisterer(reg), consumer.WithLogger(e.o.Log), consumer.WithBoards(boards))
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	done := map[string]int64{}
	var sum atomic.Int64
	rc.Progress = func(topic string, n int64) {
		mu.Lock()
		done[topic] = n
		var s int64
		for _, v := range done {
			s += v
		}
		mu.Unlock()
		sum.Store(s)
	}
	e.prog.set("replay", func() (int64, int64) { return sum.Load(), int64(e.o.Events) })
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	stats, err := consumer.Replay(lctx, rc, ranges, sink)
	if err != nil {
		return nil, errors.Join(err, context.Cause(lctx))
	}
	after, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	elapsed := after.at.Sub(before.at)
	if stats.Messages != int64(e.o.Events) || len(stats.DeadLetters) > 0 {
		return nil, fmt.Errorf("replayed %d messages with dead letters %v, want %d and none", stats.Messages, stats.DeadLetters, e.o.Events)
	}
	applied, err := counterSum(reg, "rankd_sink_updates_applied_total")
	if err != nil {
		return nil, err
	}
	r := &Replay{Events: stats.Messages, Seconds: round(elapsed.Seconds(), 2),
		EventsPerSec: round(float64(stats.Messages)/elapsed.Seconds(), 0)}
	r.CPU = cpu(before, after, r.Events, int64(applied), elapsed)
	if r.Commands, err = e.commandStats(ctx, r.Events, after.redis-before.redis); err != nil {
		return nil, err
	}
	if int64(applied) != e.expectTotal {
		return nil, fmt.Errorf("the replay applied %.0f updates, want %d", applied, e.expectTotal)
	}

	e.prog.set("replay: rollover, switch, deletion of the old generation", nil)
	at := time.Now().Add(cfg.Rollover.Lead)
	for _, b := range boards {
		if err := build.Rollover(lctx, b, at); err != nil {
			return nil, fmt.Errorf("rolling %s over in generation %d: %w", b, gen, err)
		}
	}
	if err := store.Switch(lctx, token, gen, boards); err != nil {
		return nil, err
	}
	pending, err := store.PendingDrops(lctx)
	if err != nil {
		return nil, err
	}
	drops := map[int][]string{}
	for b, gs := range pending {
		for _, g := range gs {
			if g != gen {
				drops[g] = append(drops[g], b)
			}
		}
	}
	for g, names := range drops {
		if _, err := store.DropGeneration(lctx, g, names, 200); err != nil {
			return nil, err
		}
		for _, b := range names {
			if err := store.MarkDropped(lctx, token, b, g); err != nil {
				return nil, err
			}
		}
	}
	r.TotalSeconds = round(time.Since(began).Seconds(), 2)
	if e.o.Check != nil {
		if err := e.o.Check(ctx, PhaseReplay, CheckEnv{Config: cfg, Topics: topics}); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
	}
	return r, nil
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
