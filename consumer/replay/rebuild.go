package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

// Rebuild is `rankd replay`: it rebuilds boards from the Kafka topics into
// a new key generation of a store, verifies it, switches readers and
// writers to it in one atomic step and deletes the old generations.
//
//	lock (a token in Redis, renewed; two rebuilds at once are refused)
//	-> ReserveBuild (a new generation live instances do not write)
//	-> Plan -> replay, alone in it, the log below the live group's
//	   committed offsets, deciding duplicates in memory (no dedupe in
//	   Redis) -> RegisterIDs (hold those IDs, grouped by set)
//	-> BeginReservedBuild (live instances also write every batch into the
//	   new generation from now on) -> Plan (end offsets read after)
//	-> replay the rest, with the dedupe in Redis -> roll the rolling boards
//	   over -> verify -> Switch -> delete the old generations, twice,
//	   DropAfter apart -> MarkDropped -> unlock
//
// Deciding in memory is exact because no one else writes the reserved
// generation: every ID applied there is in the Decider, and every later
// delivery, from live consumption or the rest of the replay, finds it held
// in Redis. It is skipped on a cluster (an ID is held per slot there) and
// for more than DecideMax messages; an Apply error while deciding (a
// decided batch must not be applied twice) makes the rebuild start over
// the classic way, BeginBuild and the whole log with the dedupe in Redis,
// in another new generation.
//
// A Rebuild stopped before the switch (ctx done, the lock lost, an error)
// leaves the active generation untouched; the next one deletes the partial
// generation. DryRun reads, decodes, routes and judges without writing.
type Rebuild struct {
	// Replay says what to read: Brokers, Dialer, Topics, From, To (dry
	// runs only), BatchCount, Parallel. Its Progress is set by the Rebuild
	// (see Observer).
	Replay Config
	// Schemas and Router decode and route the messages, as live.
	Schemas map[string]*ingest.Schema
	Router  *ingest.Router
	// Boards are the names of the boards rebuilt.
	Boards []string
	// Group is the live consumer group: batches end at its committed
	// offsets, so that the stream time marks live consumption resumes from
	// are exact there too. Empty: no split.
	Group string
	// DeadLetterTopic, if set, receives the dead letters of messages at or
	// after the live group's committed offsets, which live consumption did
	// not dead-letter (it stopped there when Redis lost what it knew).
	DeadLetterTopic string
	// RolloverLead: the rolling boards of the new generation are rolled
	// over up to now + RolloverLead before the switch (rollover.lead).
	RolloverLead time.Duration
	// LockTTL is the replay lock's TTL, renewed every sixth of it: live
	// instances stop writing the new generation this long after a rebuild
	// died. Default 30s.
	LockTTL time.Duration
	// LockWait is how long to wait for another rebuild's lock; 0: fail at
	// once.
	LockWait time.Duration
	// DropAfter is the wait after the switch before the old generations
	// are deleted (readers and in-flight batches of live instances move
	// over meanwhile); they are deleted twice, this far apart.
	DropAfter time.Duration
	// KeepOld keeps the old generations.
	KeepOld bool
	// DecideMax is the most messages the replay decides in memory (see
	// Run): 21 to 43 bytes each (consumer.Decider), and 12 more for a
	// moment at the end.
	// 0: DefaultDecideMax; negative: never.
	DecideMax int
	// Registry gets the sink's metrics and rankd_replay_messages_done and
	// _planned per topic; the result's Applied and Duplicates are read from
	// it. Nil: a private one.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// SinkOptions are added to the sink's options (consumer.WithTopicMap, ...).
	SinkOptions []consumer.Option
	// Observer is told the plan, the progress and the verification, for
	// display; nil: nothing.
	Observer Observer

	sinkStore func(*store.Store) consumer.Store // tests: what the sink applies to (nil: the generation's store)
}

// LockObserver is what an Observer may also implement to be told about
// the replay lock: LockWaiting once when Run finds another rebuild's lock
// and waits for it (until deadline, Rebuild.LockWait), and LockTaken when
// Run holds the lock after that wait.
type LockObserver interface {
	LockWaiting(deadline time.Time)
	LockTaken()
}

// Replanner is what an Observer may also implement to be told the ranges
// again when a Rebuild planned more after Planned: the rest of the log,
// read once the build began (Run decides the first part in memory).
type Replanner interface {
	Replanned(ranges []Range)
}

// Observer follows a Rebuild. Progress may be called from several
// goroutines at once; no method may block for long.
type Observer interface {
	// Planned gives the partition ranges before the replay reads them.
	Planned(ranges []Range)
	// Progress gives the messages replayed so far of a topic.
	Progress(topic string, done int64)
	// Replayed says the replay ended: err nil when every partition
	// reached its end offset.
	Replayed(err error)
	// Verified gives the boards' sizes in the old and the new generation,
	// before the switch (not called by DryRun).
	Verified(sizes []BoardSize)
}

// BoardSize is a board's dims count in the old and the new generation.
type BoardSize struct {
	Board          string
	OldGen, NewGen int
	Old, New       int64
}

// Result is what a Rebuild did.
type Result struct {
	Stats Stats
	// ReplayTime is the time spent reading and applying (Replay).
	ReplayTime time.Duration
	// Applied is the board updates applied, Duplicates the duplicate
	// messages (the sink's counters).
	Applied, Duplicates int64
	// Decided is the messages of Stats.Messages whose duplicates were
	// decided in memory (see Run); the others went through the dedupe in
	// Redis.
	Decided int64
	// Generation is the new active generation (0 for a dry run).
	Generation int
	// Deleted is the keys of old generations deleted.
	Deleted int
}

// DefaultDecideMax is Rebuild.DecideMax's default: 8M messages, 268 MB
// of IDs in memory (32 bytes each), 369 MB for a moment when they are
// handed over to be held in Redis (12 bytes each more).
const DefaultDecideMax = 8 << 20

func (r *Rebuild) defaults() {
	if r.LockTTL <= 0 {
		r.LockTTL = 30 * time.Second
	}
	if r.Registry == nil {
		r.Registry = prometheus.NewRegistry()
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Observer == nil {
		r.Observer = noObserver{}
	}
}

// DryRun reads, decodes, routes and judges lateness without writing
// anything; boards are the config's boards (all of them: routes name
// them), of which r.Boards are judged. The result's Stats.DeadLetters are
// what would be dead-lettered (out_of_range needs the boards and is not
// judged).
func (r *Rebuild) DryRun(ctx context.Context, boards []*ranking.Board) (Result, error) {
	r.defaults()
	ranges, err := Plan(ctx, r.Replay)
	if err != nil {
		return Result{}, err
	}
	sink, err := consumer.NewRankingSink(r.Schemas, r.Router, NewDryRunStore(boards), r.sinkOptions()...)
	if err != nil {
		return Result{}, err
	}
	t, err := r.newTracker()
	if err != nil {
		return Result{}, err
	}
	t.planned(ranges, true)
	began := time.Now()
	res, err := r.replayInto(ctx, r.Replay, ranges, sink, t)
	res.ReplayTime = time.Since(began)
	r.Observer.Replayed(err)
	return res, err
}

// Run rebuilds r.Boards of st (the live store: generation 0 view) and
// switches to the new generation. An error before the switch leaves the
// active generation unchanged; one after it (deleting the old
// generations) is reported with the generation switched to.
func (r *Rebuild) Run(ctx context.Context, st *store.Store) (Result, error) {
	r.defaults()
	token := newReplayToken()
	if err := r.lock(ctx, st, token); err != nil {
		return Result{}, err
	}
	defer func() {
		if err := st.UnlockReplay(context.WithoutCancel(ctx), token); err != nil {
			r.Logger.Warn("releasing the replay lock failed (it expires by itself)", "err", err)
		}
	}()
	// Losing the lock stops the rebuild before it can switch.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	wg.Go(func() { r.renewLock(ctx, cancel, st, token) })

	before, err := st.Generations(ctx)
	if err != nil {
		return Result{}, err
	}
	prog, err := r.newTracker()
	if err != nil {
		return Result{}, err
	}
	res, gen, ranges, sink, err := r.buildGen(ctx, st, token, prog)
	if gen == 0 && err != nil {
		return res, err
	}
	if err != nil {
		return res, abort(ctx, gen, err)
	}
	build := st.Generation(gen)
	if err := r.verify(ctx, st, build, before, gen); err != nil {
		return res, abort(ctx, gen, err)
	}
	if err := st.Switch(ctx, token, gen, r.Boards); err != nil {
		return res, abort(ctx, gen, err)
	}
	res.Generation = gen
	r.Logger.Info("switched to the new generation", "generation", gen)
	if err := r.raisePositions(ctx, st, ranges, sink); err != nil {
		return res, fmt.Errorf("switched to generation %d, but %w", gen, err)
	}
	if r.KeepOld {
		return res, nil
	}
	res.Deleted, err = r.dropOld(ctx, st, token, gen)
	return res, err
}

// lock takes the replay lock for token, waiting up to LockWait for
// another replay's.
func (r *Rebuild) lock(ctx context.Context, st *store.Store, token string) error {
	lo, _ := r.Observer.(LockObserver)
	for deadline, waiting := time.Now().Add(r.LockWait), false; ; {
		err := st.LockReplay(ctx, token, r.LockTTL)
		if err == nil {
			if lo != nil && waiting {
				lo.LockTaken()
			}
			return nil
		}
		if !errors.Is(err, store.ErrReplayLock) || time.Now().After(deadline) {
			return err
		}
		if lo != nil && !waiting {
			lo.LockWaiting(deadline)
			waiting = true
		}
		if !consumer.Sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// buildGen replays the topics into a new generation, deciding what it can
// in memory first (buildDecided), and returns the generation (0: none
// started), the ranges replayed and the sink.
func (r *Rebuild) buildGen(ctx context.Context, st *store.Store, token string, prog *tracker) (Result, int, []Range, *consumer.RankingSink, error) {
	r.Logger.Info("replay started", "boards", strings.Join(r.Boards, ","), "topics", strings.Join(r.Replay.Topics, ","))
	var sink *consumer.RankingSink
	cfg := r.Replay
	if r.DeadLetterTopic != "" {
		dlq := consumer.NewDeadLetterWriter(consumer.Config{Brokers: r.Replay.Brokers, Dialer: r.Replay.Dialer,
			DeadLetterTopic: r.DeadLetterTopic, DeadLetterMaxBytes: consumer.DefaultDeadLetterMaxBytes})
		defer dlq.Close()
		cfg.DeadLetters = dlq.Write
	}
	began := time.Now()
	first, err := r.planFirst(ctx, st)
	if err != nil {
		return Result{}, 0, nil, nil, err
	}
	if first != nil {
		gen, err := st.ReserveBuild(ctx, token, r.Boards) // listed to drop until it is built
		if err != nil {
			return Result{}, 0, nil, nil, err
		}
		if sink, err = r.newSink(st.Generation(gen)); err != nil {
			return Result{}, gen, nil, nil, err
		}
		res, ranges, err := r.buildDecided(ctx, st, token, gen, first, cfg, sink, prog)
		res.ReplayTime = time.Since(began)
		if err == nil || !errors.Is(err, errStartOver) || context.Cause(ctx) != nil {
			r.Observer.Replayed(err)
			return res, gen, ranges, sink, err
		}
		r.Logger.Warn("replaying with the dedupe in redis from the start, in another generation (the one begun is deleted by the next replay)",
			"generation", gen, "err", err)
		prog.reset()
	}
	var gen int
	begin := func() (err error) {
		gen, _, err = st.BeginBuild(ctx, token, r.Boards) // a dead rebuild's build is listed to drop in the gens hash
		return err
	}
	if sink != nil { // starting over, maybe because Redis went away: wait for it
		err = r.untilAvailable(ctx, "beginning the build", begin)
	} else {
		err = begin()
	}
	if err != nil {
		return Result{}, 0, nil, nil, err
	}
	build := st.Generation(gen)
	if sink == nil {
		if sink, err = r.newSink(build); err != nil {
			return Result{}, gen, nil, nil, err
		}
	} else {
		sink.Retarget(r.sinkTo(build))
	}
	ranges, err := Plan(ctx, r.Replay)
	if err != nil {
		return Result{}, gen, nil, nil, err
	}
	r.splitAtCommitted(ctx, ranges)
	prog.planned(ranges, true)
	res, err := r.replayInto(ctx, cfg, ranges, sink, prog)
	res.ReplayTime = time.Since(began)
	r.Observer.Replayed(err)
	return res, gen, ranges, sink, err
}

// errStartOver marks what makes buildDecided's generation unusable, but
// not the rebuild: an Apply or RegisterIDs error while deciding.
var errStartOver = errors.New("deciding in memory failed")

// planFirst returns the ranges a rebuild decides in memory: below the live
// group's committed offsets (where live consumption wrote the dead
// letters), or the whole log when there is no group; nil when it cannot
// decide (a cluster, DecideMax).
func (r *Rebuild) planFirst(ctx context.Context, st *store.Store) ([]Range, error) {
	limit := r.DecideMax
	if limit == 0 {
		limit = DefaultDecideMax
	}
	if limit < 0 || !st.CanDecide() {
		return nil, nil
	}
	first, err := Plan(ctx, r.Replay)
	if err != nil {
		return nil, err
	}
	r.splitAtCommitted(ctx, first)
	var total int64
	for i := range first {
		cut := min(first[i].End, first[i].DeadFrom)
		first[i].End, first[i].DeadFrom, first[i].From = cut, cut, min(first[i].From, cut)
		total += first[i].Total()
	}
	if total > int64(limit) {
		r.Logger.Info("too many messages to decide in memory: the dedupe in redis decides them all", "messages", total, "decide_max", limit)
		return nil, nil
	}
	return first, nil
}

// buildDecided replays first into the reserved generation gen with a
// Decider, holds the IDs it applied (RegisterIDs), begins the build and
// replays the rest of the log, from the end of first to the end read now,
// with the dedupe in Redis. It returns the whole ranges replayed.
func (r *Rebuild) buildDecided(ctx context.Context, st *store.Store, token string, gen int, first []Range, cfg Config,
	sink *consumer.RankingSink, prog *tracker) (Result, []Range, error) {
	prog.planned(first, true)
	folder := st.Generation(gen).NewFolder()
	var expect int64
	for _, f := range first {
		expect += f.Total()
	}
	d := consumer.NewDecider(folder, int(expect))
	d.BucketBy(st.DedupeTTL())
	sink.Decide(d)
	dcfg := cfg
	dcfg.NoRetry, dcfg.DeadLetters = true, nil // below DeadFrom: none to write
	began := time.Now()
	res, err := r.replayInto(ctx, dcfg, first, sink, prog)
	sink.Decide(nil)
	if err != nil {
		if errors.Is(err, ErrNotRetried) {
			err = fmt.Errorf("%w: %w", errStartOver, err)
		}
		return res, nil, err
	}
	held, err := d.Held(time.Now())
	if err != nil {
		return res, nil, fmt.Errorf("%w: %w", errStartOver, err)
	}
	// the folded boards and the IDs, side by side: different keys
	writing := time.Now()
	var folded int
	var n store.Registered
	var foldTook, idsTook time.Duration
	err = r.untilAvailable(ctx, "writing the folded boards and the message IDs", func() error {
		var g errgroup.Group // both may run again: absolute values, SADD
		g.Go(func() (err error) {
			t0 := time.Now()
			folded, err = folder.Flush(ctx)
			foldTook = time.Since(t0)
			return err
		})
		g.Go(func() (err error) {
			t0 := time.Now()
			n, err = st.Generation(gen).RegisterIDs(ctx, held)
			idsTook = time.Since(t0)
			return err
		})
		return g.Wait()
	})
	if err != nil {
		return res, nil, fmt.Errorf("%w: %w", errStartOver, err)
	}
	res.Decided = res.Stats.Messages
	r.Logger.Info("replayed below the live group's committed offsets, deciding duplicates in memory", "generation", gen,
		"messages", res.Stats.Messages, "ids_held", n.Added, "ids_expired", n.Expired, "members_folded", folded, "duplicates", res.Duplicates,
		"took", time.Since(began).Round(time.Millisecond), "writing_took", time.Since(writing).Round(time.Millisecond),
		"folded_took", foldTook.Round(time.Millisecond), "ids_took", idsTook.Round(time.Millisecond))
	err = r.untilAvailable(ctx, "beginning the build", func() error { // may run again: see gens.lua
		_, err := st.BeginReservedBuild(ctx, token, gen, r.Boards)
		return err
	})
	if err != nil {
		return res, nil, err
	}
	rest, err := Plan(ctx, r.Replay) // after the build began: see Plan
	if err != nil {
		return res, nil, err
	}
	r.splitAtCommitted(ctx, rest)
	ranges := slices.Clone(rest)
	for i := range rest {
		for _, f := range first {
			if f.Topic == rest[i].Topic && f.Partition == rest[i].Partition {
				rest[i].First = max(rest[i].First, f.End)
				rest[i].From = max(rest[i].From, rest[i].First)
				ranges[i].First, ranges[i].From = f.First, min(ranges[i].From, f.From)
			}
		}
	}
	prog.planned(ranges, false)
	more, err := r.replayInto(ctx, cfg, rest, sink, prog)
	res.Stats.Messages += more.Stats.Messages
	res.Stats.Observed += more.Stats.Observed
	for reason, n := range more.Stats.DeadLetters {
		res.Stats.DeadLetters[reason] += n
	}
	res.Applied, res.Duplicates = sink.Counts()
	return res, ranges, err
}

// untilAvailable runs f until it succeeds, fails for another reason than
// Redis being unreachable (store.IsUnavailable), or ctx ends: a replay
// waits out a Redis outage, as its applies do. f must be safe to run
// again after an error.
func (r *Rebuild) untilAvailable(ctx context.Context, what string, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || ctx.Err() != nil || !store.IsUnavailable(err) {
			return err
		}
		r.Logger.Warn(what+" failed: redis is unavailable; retrying", "attempt", attempt, "err", err)
		if !consumer.Sleep(ctx, consumer.Backoff(attempt, 50*time.Millisecond, 5*time.Second)) {
			return err
		}
	}
}

// newSink returns the replay's sink into a generation's store.
func (r *Rebuild) newSink(build *store.Store) (*consumer.RankingSink, error) {
	return consumer.NewRankingSink(r.Schemas, r.Router, r.sinkTo(build), r.sinkOptions()...)
}

func (r *Rebuild) sinkTo(build *store.Store) consumer.Store {
	if r.sinkStore != nil {
		return r.sinkStore(build)
	}
	return build
}

// splitAtCommitted splits ranges at the live group's committed offsets
// (SplitAtCommitted); when they cannot be read, it leaves ranges whole
// (and warns).
func (r *Rebuild) splitAtCommitted(ctx context.Context, ranges []Range) {
	lags, err := r.groupLags(ctx)
	if err != nil {
		r.Logger.Warn("reading the live group's committed offsets failed; replaying without splitting there", "err", err)
		return
	}
	SplitAtCommitted(ranges, lags)
}

// verify rolls the new generation's rolling boards up to the coming period
// (every partition reached its end: Run returns only then) and tells the
// observer each board's size, old and new.
func (r *Rebuild) verify(ctx context.Context, st, build *store.Store, before map[string]store.BoardGen, gen int) error {
	at := time.Now().Add(r.RolloverLead)
	for _, name := range r.Boards {
		if err := build.Rollover(ctx, name, at); err != nil {
			return fmt.Errorf("rolling %s over in generation %d: %w", name, gen, err)
		}
	}
	var sizes []BoardSize
	for _, name := range r.Boards {
		old := before[name].Active
		oldN, err1 := st.Generation(old).DimsCount(ctx, name)
		newN, err2 := build.DimsCount(ctx, name)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		sizes = append(sizes, BoardSize{Board: name, OldGen: old, Old: oldN, NewGen: gen, New: newN})
	}
	r.Observer.Verified(sizes)
	return context.Cause(ctx)
}

// dropOld deletes the old generations: this switch's, the builds of
// rebuilds that died, and what earlier ones did not get to delete (killed
// after their switch), twice, DropAfter apart; the gens hash keeps the list
// until each is deleted. It returns the keys deleted.
func (r *Rebuild) dropOld(ctx context.Context, st *store.Store, token string, gen int) (int, error) {
	pending, err := st.PendingDrops(ctx)
	if err != nil {
		return 0, fmt.Errorf("switched to generation %d, but %w", gen, err)
	}
	known := map[string]bool{}
	for _, b := range st.Boards() {
		known[b.Name] = true
	}
	drops := map[int][]string{}
	for name, gs := range pending {
		for _, g := range gs {
			if g != gen && known[name] {
				drops[g] = append(drops[g], name)
			}
		}
	}
	deleted := 0
	for range 2 {
		if !consumer.Sleep(ctx, r.DropAfter) {
			return deleted, context.Cause(ctx)
		}
		for g, names := range drops {
			n, err := st.DropGeneration(ctx, g, names, 200)
			deleted += n
			if err != nil {
				return deleted, fmt.Errorf("switched to generation %d, but deleting generation %d failed (the next replay deletes it): %w", gen, g, err)
			}
		}
	}
	for g, names := range drops {
		for _, name := range names {
			if err := st.MarkDropped(ctx, token, name, g); err != nil {
				return deleted, fmt.Errorf("switched to generation %d: %w", gen, err)
			}
		}
	}
	return deleted, nil
}

// raisePositions makes the replay's end offsets the position of every
// partition whose position Redis lost or holds below them, so that live
// consumption halted there (Redis lost what it knew) resumes from the end
// of the replay; it does so only when every board was rebuilt (a board
// left out would miss the offsets between). See store.RaisePositions.
func (r *Rebuild) raisePositions(ctx context.Context, st *store.Store, ranges []Range, sink *consumer.RankingSink) error {
	for _, b := range st.Boards() {
		if !slices.Contains(r.Boards, b.Name) {
			r.Logger.Warn("not every board was rebuilt: partitions that live consumption halted stay halted until a replay of every board", "left_out", b.Name)
			return nil
		}
	}
	marks := make([]store.Mark, 0, len(ranges))
	for _, pr := range ranges {
		m := store.Mark{Topic: pr.Topic, Partition: pr.Partition, Offset: pr.End}
		if p, ok := sink.Position(pr.Topic, pr.Partition); ok && p.Offset == pr.End {
			m.Time = p.Time
		} else if pr.End > pr.First {
			continue // not replayed to its end: leave it
		}
		marks = append(marks, m)
	}
	n, err := st.RaisePositions(ctx, marks)
	if err != nil {
		return err
	}
	r.Logger.Info("live consumption resumes from the replay's end where redis had lost its position", "partitions", n)
	return nil
}

func (r *Rebuild) sinkOptions() []consumer.Option {
	return append([]consumer.Option{consumer.WithRegisterer(r.Registry), consumer.WithLogger(r.Logger), consumer.WithBoards(r.Boards), consumer.WithReplay()}, r.SinkOptions...)
}

// renewLock renews the replay lock every sixth of its TTL until ctx is
// done; losing it, or failing to renew it three times in a row, cancels
// ctx with the reason.
func (r *Rebuild) renewLock(ctx context.Context, cancel context.CancelCauseFunc, st *store.Store, token string) {
	t := time.NewTicker(r.LockTTL / 6)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := st.RenewReplay(ctx, token, r.LockTTL)
		switch {
		case err == nil:
			failures = 0
		case errors.Is(err, store.ErrReplayLock):
			cancel(fmt.Errorf("the replay lock was lost: %w", err))
			return
		case ctx.Err() == nil:
			if failures++; failures >= 3 {
				cancel(fmt.Errorf("renewing the replay lock: %w", err))
				return
			}
			r.Logger.Warn("renewing the replay lock failed; retrying", "err", err)
		}
	}
}

// abort is the error of a rebuild that will not switch: the old
// generation stays active; the partial one is deleted by the next rebuild.
func abort(ctx context.Context, gen int, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return fmt.Errorf("replay stopped before the switch (the active generation is unchanged; generation %d is partial and the next replay deletes it): %w", gen, err)
}

// tracker follows the runs of one rebuild: the progress gauges and the
// observer, with per-topic counts that go on from one run to the next.
type tracker struct {
	obs         Observer
	done, total *prometheus.GaugeVec
	mu          sync.Mutex
	base, cur   map[string]int64 // messages done by the earlier runs, and by this one
}

func (r *Rebuild) newTracker() (*tracker, error) {
	t := &tracker{obs: r.Observer, base: map[string]int64{}, cur: map[string]int64{},
		done: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_done",
			Help: "Messages replayed so far, per topic."}, []string{"topic"}),
		total: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_planned",
			Help: "Messages the replay reads, per topic: what messages_done counts up to."}, []string{"topic"})}
	if err := errors.Join(r.Registry.Register(t.done), r.Registry.Register(t.total)); err != nil {
		return nil, fmt.Errorf("replay metrics: %w", err)
	}
	return t, nil
}

// planned sets the totals to ranges' and tells the observer: Planned the
// first time, Replanned (if it has it) after.
func (t *tracker) planned(ranges []Range, first bool) {
	totals := map[string]int64{}
	for _, pr := range ranges {
		totals[pr.Topic] += pr.Total()
	}
	t.mu.Lock()
	for tp, n := range totals {
		t.total.WithLabelValues(tp).Set(float64(n))
		t.done.WithLabelValues(tp).Set(float64(t.base[tp]))
	}
	t.mu.Unlock()
	if first {
		t.obs.Planned(ranges)
	} else if rp, ok := t.obs.(Replanner); ok {
		rp.Replanned(ranges)
	}
}

// progress records that the current run did n messages of topic.
func (t *tracker) progress(topic string, n int64) {
	t.mu.Lock()
	t.cur[topic] = n
	n += t.base[topic]
	t.done.WithLabelValues(topic).Set(float64(n))
	t.mu.Unlock()
	t.obs.Progress(topic, n)
}

// endRun adds the current run's counts to the earlier runs'.
func (t *tracker) endRun() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tp, n := range t.cur {
		t.base[tp] += n
	}
	clear(t.cur)
}

// reset forgets every run: the rebuild starts over.
func (t *tracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.base)
	clear(t.cur)
	t.done.Reset()
}

// replayInto runs Replay of ranges into sink with cfg, following it with t.
func (r *Rebuild) replayInto(ctx context.Context, cfg Config, ranges []Range, sink *consumer.RankingSink, t *tracker) (Result, error) {
	cfg.Progress = t.progress
	stats, err := Run(ctx, cfg, ranges, sink)
	t.endRun()
	res := Result{Stats: stats}
	res.Applied, res.Duplicates = sink.Counts()
	return res, err
}

// groupLags reads the live group's committed offsets of the replayed
// topics; nil when the group is not given or has committed nothing.
func (r *Rebuild) groupLags(ctx context.Context) ([]consumer.PartitionLag, error) {
	if r.Group == "" {
		return nil, nil
	}
	tr := consumer.Transport(r.Replay.Dialer) // TLS and SASL, as the readers
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(r.Replay.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	lags, err := consumer.GroupLag(ctx, client, r.Group, r.Replay.Topics)
	if errors.Is(err, kafka.GroupIdNotFound) {
		return nil, nil
	}
	return lags, err
}

func newReplayToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type noObserver struct{}

func (noObserver) Planned([]Range)        {}
func (noObserver) Progress(string, int64) {}
func (noObserver) Replayed(error)         {}
func (noObserver) Verified([]BoardSize)   {}
