package consumer

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
//	   generation from now on) -> PlanReplay (end offsets read after)
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
	// (see RebuildObserver).
	Replay ReplayConfig
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
	// _total per topic; the result's Applied and Duplicates are read from
	// it. Nil: a private one.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// SinkOptions are added to the sink's options (WithTopicMap, ...).
	SinkOptions []Option
	// Observer is told the plan, the progress and the verification, for
	// display; nil: nothing.
	Observer RebuildObserver
}

// RebuildLockObserver is what a RebuildObserver may also implement to be
// told about the replay lock: LockWaiting once when Run finds another
// rebuild's lock and waits for it (until deadline, Rebuild.LockWait), and
// LockTaken when Run holds the lock after that wait.
type RebuildLockObserver interface {
	LockWaiting(deadline time.Time)
	LockTaken()
}

// RebuildObserver follows a Rebuild. Progress may be called from several
// goroutines at once; no method may block for long.
type RebuildObserver interface {
	// Planned gives the partition ranges before the replay reads them.
	Planned(ranges []PartitionRange)
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

// RebuildResult is what a Rebuild did.
type RebuildResult struct {
	Stats ReplayStats
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
func (r *Rebuild) DryRun(ctx context.Context, boards []*ranking.Board) (RebuildResult, error) {
	r.defaults()
	ranges, err := PlanReplay(ctx, r.Replay)
	if err != nil {
		return RebuildResult{}, err
	}
	sink, err := NewRankingSink(r.Schemas, r.Router, NewDryRunStore(boards), r.sinkOptions()...)
	if err != nil {
		return RebuildResult{}, err
	}
	return r.replay(ctx, ranges, sink)
}

// Run rebuilds r.Boards of st (the live store: generation 0 view) and
// switches to the new generation. An error before the switch leaves the
// active generation unchanged; one after it (deleting the old
// generations) is reported with the generation switched to.
func (r *Rebuild) Run(ctx context.Context, st *store.Store) (RebuildResult, error) {
	r.defaults()
	log := r.Logger

	// The lock: taken now, renewed while the rebuild runs; losing it stops
	// the rebuild before it can switch.
	token := newReplayToken()
	lo, _ := r.Observer.(RebuildLockObserver)
	for deadline, waiting := time.Now().Add(r.LockWait), false; ; {
		err := st.LockReplay(ctx, token, r.LockTTL)
		if err == nil {
			if lo != nil && waiting {
				lo.LockTaken()
			}
			break
		}
		if !errors.Is(err, store.ErrReplayLock) || time.Now().After(deadline) {
			return RebuildResult{}, err
		}
		if lo != nil && !waiting {
			lo.LockWaiting(deadline)
			waiting = true
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return RebuildResult{}, ctx.Err()
		}
	}
	defer func() {
		if err := st.UnlockReplay(context.WithoutCancel(ctx), token); err != nil {
			log.Warn("releasing the replay lock failed (it expires by itself)", "err", err)
		}
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	wg.Go(func() { r.renewLock(ctx, cancel, st, token) })

	before, err := st.Generations(ctx)
	if err != nil {
		return RebuildResult{}, err
	}
	gen, _, err := st.BeginBuild(ctx, token, r.Boards) // a dead rebuild's build is listed to drop in the gens hash
	if err != nil {
		return RebuildResult{}, err
	}
	log.Info("replay started", "generation", gen, "boards", strings.Join(r.Boards, ","), "topics", strings.Join(r.Replay.Topics, ","))
	// Read after BeginBuild: whatever live consumption applied without
	// writing the new generation is below these end offsets.
	ranges, err := PlanReplay(ctx, r.Replay)
	if err != nil {
		return RebuildResult{}, err
	}
	// Batches end at the live group's committed offsets, so that the stream
	// time marks live consumption resumes from are exact there too (after a
	// Redis that lost writes is rebuilt).
	if lags, err := r.groupLags(ctx); err != nil {
		log.Warn("reading the live group's committed offsets failed; replaying without splitting there", "err", err)
	} else {
		SplitAtCommitted(ranges, lags)
	}
	build := st.Generation(gen)
	sink, err := NewRankingSink(r.Schemas, r.Router, build, r.sinkOptions()...)
	if err != nil {
		return RebuildResult{}, err
	}
	if r.DeadLetterTopic != "" {
		dlq := newDeadLetterWriter(Config{Brokers: r.Replay.Brokers, Dialer: r.Replay.Dialer,
			DeadLetterTopic: r.DeadLetterTopic, DeadLetterMaxBytes: DefaultDeadLetterMaxBytes})
		defer dlq.Close()
		r.Replay.DeadLetters = dlq.write
	}
	res, err := r.replay(ctx, ranges, sink)
	if err != nil {
		return res, abort(ctx, gen, err)
	}

	// Verify: every partition reached its end (Replay returns only then);
	// roll the rolling boards up to the coming period; compare sizes.
	at := time.Now().Add(r.RolloverLead)
	for _, name := range r.Boards {
		if err := build.Rollover(ctx, name, at); err != nil {
			return res, abort(ctx, gen, fmt.Errorf("rolling %s over in generation %d: %w", name, gen, err))
		}
	}
	var sizes []BoardSize
	for _, name := range r.Boards {
		old := before[name].Active
		oldN, err1 := st.Generation(old).DimsCount(ctx, name)
		newN, err2 := build.DimsCount(ctx, name)
		if err := errors.Join(err1, err2); err != nil {
			return res, abort(ctx, gen, err)
		}
		sizes = append(sizes, BoardSize{Board: name, OldGen: old, Old: oldN, NewGen: gen, New: newN})
	}
	r.Observer.Verified(sizes)
	if err := context.Cause(ctx); err != nil {
		return res, abort(ctx, gen, err)
	}
	if err := st.Switch(ctx, token, gen, r.Boards); err != nil {
		return res, abort(ctx, gen, err)
	}
	res.Generation = gen
	log.Info("switched to the new generation", "generation", gen)
	if err := r.raisePositions(ctx, st, ranges, sink); err != nil {
		return res, fmt.Errorf("switched to generation %d, but %w", gen, err)
	}

	// Drop the old generations: this switch's, the builds of rebuilds that
	// died, and what earlier ones did not get to delete (killed after
	// their switch). The gens hash keeps the list until each is deleted.
	pending, err := st.PendingDrops(ctx)
	if err != nil {
		return res, fmt.Errorf("switched to generation %d, but %w", gen, err)
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
	if r.KeepOld {
		return res, nil
	}
	for range 2 {
		if !sleep(ctx, r.DropAfter) {
			return res, context.Cause(ctx)
		}
		for g, names := range drops {
			n, err := st.DropGeneration(ctx, g, names, 200)
			res.Deleted += n
			if err != nil {
				return res, fmt.Errorf("switched to generation %d, but deleting generation %d failed (the next replay deletes it): %w", gen, g, err)
			}
		}
	}
	for g, names := range drops {
		for _, name := range names {
			if err := st.MarkDropped(ctx, token, name, g); err != nil {
				return res, fmt.Errorf("switched to generation %d: %w", gen, err)
			}
		}
	}
	return res, nil
}

// raisePositions makes the replay's end offsets the position of every
// partition whose position Redis lost or holds below them, so that live
// consumption halted there (Redis lost what it knew) resumes from the end
// of the replay; it does so only when every board was rebuilt (a board
// left out would miss the offsets between). See store.RaisePositions.
func (r *Rebuild) raisePositions(ctx context.Context, st *store.Store, ranges []PartitionRange, sink *RankingSink) error {
	for _, b := range st.Boards() {
		if !slices.Contains(r.Boards, b.Name) {
			r.Logger.Warn("not every board was rebuilt: partitions that live consumption halted stay halted until a replay of every board", "left_out", b.Name)
			return nil
		}
	}
	marks := make([]store.Mark, 0, len(ranges))
	for _, pr := range ranges {
		m := store.Mark{Topic: pr.Topic, Partition: pr.Partition, Offset: pr.End}
		if p, ok := sink.position(pr.Topic, pr.Partition); ok && p.next == pr.End {
			m.Time = p.time
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

func (r *Rebuild) sinkOptions() []Option {
	return append([]Option{WithRegisterer(r.Registry), WithLogger(r.Logger), WithBoards(r.Boards), WithReplay()}, r.SinkOptions...)
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
func (r *Rebuild) replay(ctx context.Context, ranges []PartitionRange, sink *RankingSink) (RebuildResult, error) {
	done := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_done",
		Help: "Messages replayed so far, per topic."}, []string{"topic"})
	total := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_total",
		Help: "Messages the replay covers, per topic."}, []string{"topic"})
	if err := errors.Join(r.Registry.Register(done), r.Registry.Register(total)); err != nil {
		return RebuildResult{}, fmt.Errorf("replay metrics: %w", err)
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
	stats, err := Replay(ctx, rc, ranges, sink)
	res := RebuildResult{Stats: stats, ReplayTime: time.Since(began),
		Applied:    int64(r.counter("rankd_sink_updates_applied_total")),
		Duplicates: int64(r.counter("rankd_sink_duplicates_total"))}
	r.Observer.Replayed(err)
	return res, err
}

// counter sums a counter's series on the registry.
func (r *Rebuild) counter(name string) float64 {
	mfs, err := r.Registry.Gather()
	if err != nil {
		return 0
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// groupLags reads the live group's committed offsets of the replayed
// topics; nil when the group is not given or has committed nothing.
func (r *Rebuild) groupLags(ctx context.Context) ([]PartitionLag, error) {
	if r.Group == "" {
		return nil, nil
	}
	tr := transport(r.Replay.Dialer) // TLS and SASL, as the readers
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(r.Replay.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	lags, err := GroupLag(ctx, client, r.Group, r.Replay.Topics)
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

func (noObserver) Planned([]PartitionRange) {}
func (noObserver) Progress(string, int64)   {}
func (noObserver) Replayed(error)           {}
func (noObserver) Verified([]BoardSize)     {}
