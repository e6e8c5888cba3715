package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rankd/rankd/consumer/replay"

	"github.com/rankd/rankd/internal/assembly"

	"github.com/redis/go-redis/v9"
)

const replayLockTTL = time.Minute

// replay rebuilds every board from the preloaded log into a new key
// generation with replay.Rebuild, as `rankd replay --yes` does (the
// rankd group's committed offsets split the batches; the old generation
// is deleted at once: DropAfter 0). The rate is that of the replay proper
// (reading and applying, between the Rebuild's Planned and Replayed), as
// `rankd replay` reports it; CPU and Redis commands are measured over the
// same span. It runs on the boards the rankd drain left (no flush): the
// new generation is written next to them, as in production.
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
	st, err := assembly.NewStore(cfg, rdb, e.o.Log)
	if err != nil {
		return nil, err
	}
	var boards []string
	for _, b := range cfg.Boards() {
		boards = append(boards, b.Name)
	}
	obs := &replayObserver{e: e, ctx: ctx}
	e.prog.set("replay", func() (int64, int64) { return obs.sum.Load(), int64(e.o.Events) })
	rb := &replay.Rebuild{
		Replay:  replay.Config{Brokers: e.brokers, Topics: topics},
		Schemas: cfg.Schemas(), Router: router, Boards: boards, Group: rankdGroup,
		RolloverLead: cfg.Rollover.Lead, LockTTL: replayLockTTL,
		Logger: e.o.Log, Observer: obs,
	}
	stopProfile, err := cpuProfile(e.o.ReplayCPUProfile)
	if err != nil {
		return nil, fmt.Errorf("--replay-cpuprofile: %w", err)
	}
	res, err := rb.Run(ctx, st)
	stopProfile()
	if err != nil {
		return nil, err
	}
	if obs.err != nil {
		return nil, obs.err
	}
	if res.Stats.Messages != int64(e.o.Events) || len(res.Stats.DeadLetters) > 0 {
		return nil, fmt.Errorf("replayed %d messages with dead letters %v, want %d and none", res.Stats.Messages, res.Stats.DeadLetters, e.o.Events)
	}
	if res.Applied != e.expectTotal {
		return nil, fmt.Errorf("the replay applied %d updates, want %d", res.Applied, e.expectTotal)
	}
	elapsed := obs.after.at.Sub(obs.before.at)
	r := &Replay{Events: res.Stats.Messages, Seconds: round(elapsed.Seconds(), 2), Decided: res.Decided,
		EventsPerSec: round(float64(res.Stats.Messages)/elapsed.Seconds(), 0)}
	r.CPU = cpu(obs.before, obs.after, r.Events, res.Applied, elapsed)
	r.Commands = obs.commands
	r.TotalSeconds = round(time.Since(began).Seconds(), 2)
	if e.o.Check != nil {
		if err := e.o.Check(ctx, PhaseReplay, CheckEnv{Config: cfg, Topics: topics}); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
	}
	return r, nil
}

// replayObserver follows the Rebuild: it meters CPU when the replay
// starts (Planned) and ends (Replayed), reads the Redis command
// statistics at the end (before the rollover, switch and deletion), and
// sums the progress for the progress line.
type replayObserver struct {
	e   *env
	ctx context.Context

	mu       sync.Mutex
	done     map[string]int64
	sum      atomic.Int64
	before   meter
	after    meter
	commands Commands
	err      error
}

func (o *replayObserver) Planned([]replay.Range) {
	var err error
	o.before, err = o.e.meter(o.ctx)
	o.fail(err)
}

func (o *replayObserver) Progress(topic string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done == nil {
		o.done = map[string]int64{}
	}
	o.done[topic] = n
	var s int64
	for _, v := range o.done {
		s += v
	}
	o.sum.Store(s)
}

func (o *replayObserver) Replayed(err error) {
	if err != nil {
		return // Run returns it
	}
	after, err := o.e.meter(o.ctx)
	if err != nil {
		o.fail(err)
		return
	}
	o.after = after
	o.commands, err = o.e.commandStats(o.ctx, int64(o.e.o.Events), after.redis-o.before.redis) // Run fails unless all were replayed
	o.fail(err)
	o.e.prog.set("replay: rollover, verification, switch, deletion of the old generation", nil)
}

func (o *replayObserver) Verified([]replay.BoardSize) {}

func (o *replayObserver) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = errors.Join(o.err, err)
}
