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
//	-> BeginBuild (live instances also write every batch into the new
//	   generation from now on) -> Plan (end offsets read after)
//	-> Replay into the new generation -> roll the rolling boards over
//	-> verify -> Switch -> delete the old generations, twice, DropAfter
//	   apart -> MarkDropped -> unlock
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
}

// LockObserver is what an Observer may also implement to be told about
// the replay lock: LockWaiting once when Run finds another rebuild's lock
// and waits for it (until deadline, Rebuild.LockWait), and LockTaken when
// Run holds the lock after that wait.
type LockObserver interface {
	LockWaiting(deadline time.Time)
	LockTaken()
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
	// Generation is the new active generation (0 for a dry run).
	Generation int
	// Deleted is the keys of old generations deleted.
	Deleted int
}

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
	return r.replay(ctx, ranges, sink)
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
	gen, _, err := st.BeginBuild(ctx, token, r.Boards) // a dead rebuild's build is listed to drop in the gens hash
	if err != nil {
		return Result{}, err
	}
	build := st.Generation(gen)
	res, ranges, sink, err := r.build(ctx, build, gen)
	if err != nil {
		return res, abort(ctx, gen, err)
	}
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

// build replays the topics into generation gen (build): the plan is read
// after BeginBuild, so whatever live consumption applied without writing
// the new generation is below its end offsets; batches end at the live
// group's committed offsets, so that the stream time marks live
// consumption resumes from are exact there too.
func (r *Rebuild) build(ctx context.Context, build *store.Store, gen int) (Result, []Range, *consumer.RankingSink, error) {
	r.Logger.Info("replay started", "generation", gen, "boards", strings.Join(r.Boards, ","), "topics", strings.Join(r.Replay.Topics, ","))
	ranges, err := Plan(ctx, r.Replay)
	if err != nil {
		return Result{}, nil, nil, err
	}
	if lags, err := r.groupLags(ctx); err != nil {
		r.Logger.Warn("reading the live group's committed offsets failed; replaying without splitting there", "err", err)
	} else {
		SplitAtCommitted(ranges, lags)
	}
	sink, err := consumer.NewRankingSink(r.Schemas, r.Router, build, r.sinkOptions()...)
	if err != nil {
		return Result{}, nil, nil, err
	}
	if r.DeadLetterTopic != "" {
		dlq := consumer.NewDeadLetterWriter(consumer.Config{Brokers: r.Replay.Brokers, Dialer: r.Replay.Dialer,
			DeadLetterTopic: r.DeadLetterTopic, DeadLetterMaxBytes: consumer.DefaultDeadLetterMaxBytes})
		defer dlq.Close()
		r.Replay.DeadLetters = dlq.Write
	}
	res, err := r.replay(ctx, ranges, sink)
	return res, ranges, sink, err
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

// replay runs Replay with the observer and the progress gauges.
func (r *Rebuild) replay(ctx context.Context, ranges []Range, sink *consumer.RankingSink) (Result, error) {
	done := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_done",
		Help: "Messages replayed so far, per topic."}, []string{"topic"})
	total := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_planned",
		Help: "Messages the replay reads, per topic: what messages_done counts up to."}, []string{"topic"})
	if err := errors.Join(r.Registry.Register(done), r.Registry.Register(total)); err != nil {
		return Result{}, fmt.Errorf("replay metrics: %w", err)
	}
	totals := map[string]int64{}
	for _, pr := range ranges {
		totals[pr.Topic] += pr.Total()
	}
	for t, n := range totals {
		total.WithLabelValues(t).Set(float64(n))
		done.WithLabelValues(t).Set(0)
	}
	r.Observer.Planned(ranges)
	rc := r.Replay
	rc.Progress = func(topic string, n int64) {
		done.WithLabelValues(topic).Set(float64(n))
		r.Observer.Progress(topic, n)
	}
	began := time.Now()
	stats, err := Run(ctx, rc, ranges, sink)
	res := Result{Stats: stats, ReplayTime: time.Since(began)}
	res.Applied, res.Duplicates = sink.Counts()
	r.Observer.Replayed(err)
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
