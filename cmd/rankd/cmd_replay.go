package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

const replayHelp = `
Rebuild boards from the Kafka topics: read every partition of the topics
that feed the boards from its start (or --from), apply the events into a new
key generation, verify, then switch readers and writers to it in one atomic
step and delete the old generation in small chunks.

While it runs, "rankd run" keeps consuming and serving the old generation,
and also writes every batch into the new one (deduplicated by message ID), so
nothing live traffic applied is missing at the switch. Verdicts (late, out of
range, duplicates) are a function of the log, so the rebuilt boards equal a
recomputation from the log whatever the timing.

A replay that is interrupted or killed leaves the old generation active and
untouched; run it again to start over (its partial generation is deleted).
Two replays at once are refused: one lock, with a token, in Redis.

--dry-run reads, decodes, routes and judges lateness without writing
anything, and reports what would be dead-lettered. --to (a past time) is
only for dry runs: a real rebuild always reads to the end of the log.

Examples:
  rankd replay --config rankd.yaml --yes
  rankd replay --config rankd.yaml --boards anchor_week --yes     # a new board over history
  rankd replay --config rankd.yaml --from 2026-11-01T00:00:00+08:00 --dry-run`

// replayFlags are replay's command line.
type replayFlags struct {
	boards    string
	from, to  string
	dryRun    bool
	yes       bool
	batch     int
	parallel  int
	progress  string
	metrics   string
	dropAfter time.Duration
	keepOld   bool
	lockTTL   time.Duration
	lockWait  time.Duration
}

func replayMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", "replay --config FILE [--boards a,b] [--from earliest|TIME] [--to now|TIME] [--dry-run] [--yes]", replayHelp, stderr)
	cfgFlag := fs.String("config", "", "config `file` (default $RANKD_CONFIG)")
	var f replayFlags
	fs.StringVar(&f.boards, "boards", "", "comma-separated `names` of the boards to rebuild (default: all)")
	fs.StringVar(&f.from, "from", "earliest", "where each partition's replay starts: earliest, or an RFC 3339 `time` (the first message with a timestamp at or after it; earlier messages are read for stream times only)")
	fs.StringVar(&f.to, "to", "now", "where it ends: now (the end of the log), or an RFC 3339 `time` (dry runs only)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "decode, route and judge only: write nothing, report what would be dead-lettered")
	fs.BoolVar(&f.yes, "yes", false, "do not ask for confirmation (needed when stdin is not a terminal)")
	fs.IntVar(&f.batch, "batch", 5000, "most messages per `batch` applied to Redis")
	fs.IntVar(&f.parallel, "parallel", 4, "partitions applied at once")
	fs.StringVar(&f.progress, "progress", "auto", "`mode` of progress: bars (one per topic), log (a line every 5 s), none; auto: bars on a terminal, else log")
	fs.StringVar(&f.metrics, "metrics", "", "serve replay metrics on this `address` at /metrics while it runs (e.g. :9101)")
	fs.DurationVar(&f.dropAfter, "drop-after", 3*time.Second, "wait this long after the switch before deleting the old generation (readers and in-flight batches of live instances move over meanwhile); it is deleted twice, this far apart")
	fs.BoolVar(&f.keepOld, "keep-old", false, "do not delete the old generation after the switch")
	fs.DurationVar(&f.lockTTL, "lock-ttl", 30*time.Second, "TTL of the replay lock, renewed every sixth of it: a replay that dies stops the dual writes of live instances this long after")
	fs.DurationVar(&f.lockWait, "lock-wait", 0, "wait up to this long for the lock of another replay (a killed one holds it until its TTL ends); 0: fail at once")
	var lf logFlags
	lf.register(fs, "text", "info")
	cfg, log, _, err := setup(fs, args, cfgFlag, &lf, stderr)
	if err != nil {
		return err
	}
	boards, err := replayBoards(cfg, f.boards)
	if err != nil {
		return err
	}
	var rc consumer.ReplayConfig
	if f.from != "earliest" {
		if rc.From, err = time.Parse(time.RFC3339, f.from); err != nil {
			return usagef("--from %q: want earliest or RFC 3339, e.g. 2026-11-01T00:00:00+08:00", f.from)
		}
	}
	if f.to != "now" {
		if rc.To, err = time.Parse(time.RFC3339, f.to); err != nil {
			return usagef("--to %q: want now or RFC 3339", f.to)
		}
		if !f.dryRun {
			return usagef("--to %s: only with --dry-run (a rebuilt generation must include everything live traffic applied, so it reads to the end of the log)", f.to)
		}
	}
	if f.batch < 1 || f.parallel < 1 {
		return usagef("--batch and --parallel must be at least 1")
	}
	if f.lockTTL < time.Second {
		return usagef("--lock-ttl %v: want at least 1s", f.lockTTL)
	}
	switch f.progress {
	case "auto", "bars", "log", "none":
	default:
		return usagef("--progress %q: want auto, bars, log or none", f.progress)
	}
	rc.Brokers, rc.Topics = cfg.Kafka.Brokers, replayTopics(cfg, boards)
	rc.BatchCount, rc.Parallel = f.batch, f.parallel
	if len(rc.Topics) == 0 {
		return usagef("no route feeds %s: nothing to replay", strings.Join(boards, ","))
	}
	if !f.dryRun && !f.yes {
		if !stdinIsTerminal() {
			return usagef("stdin is not a terminal: pass --yes to rebuild without confirmation")
		}
		fmt.Fprintf(stderr, "Rebuild %s from topics %s (%s) into a new generation, then switch to it? [y/N] ",
			strings.Join(boards, ", "), strings.Join(rc.Topics, ", "), f.from)
		answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return errors.New("not confirmed; nothing done")
		}
	}
	r := &replayRun{cfg: cfg, log: log, flags: f, rc: rc, boards: boards, stdout: stdout, stderr: stderr,
		reg: prometheus.NewRegistry()}
	return r.run(ctx)
}

// replayBoards returns the boards of --boards (all when empty), checked.
func replayBoards(cfg *config.Config, list string) ([]string, error) {
	if list == "" {
		var all []string
		for _, b := range cfg.Boards() {
			all = append(all, b.Name)
		}
		return all, nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || slices.Contains(out, name) {
			continue
		}
		if cfg.Board(name) == nil {
			return nil, usagef("--boards: no board %q in %s", name, cfg.File)
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, usagef("--boards %q names no board", list)
	}
	return out, nil
}

// replayTopics returns the Kafka topics whose routes feed boards.
func replayTopics(cfg *config.Config, boards []string) []string {
	var out []string
	for _, r := range cfg.Routes {
		if slices.ContainsFunc(r.Boards, func(b string) bool { return slices.Contains(boards, b) }) &&
			!slices.Contains(out, r.Topic) {
			out = append(out, r.Topic)
		}
	}
	sort.Strings(out)
	return out
}

func stdinIsTerminal() bool { return isTerminal(os.Stdin) }

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// replayRun is one replay.
type replayRun struct {
	cfg            *config.Config
	log            *slog.Logger
	flags          replayFlags
	rc             consumer.ReplayConfig
	boards         []string
	stdout, stderr io.Writer
	reg            *prometheus.Registry
	applyDur       time.Duration // of consumer.Replay
}

func (r *replayRun) run(ctx context.Context) error {
	start := time.Now()
	if r.flags.metrics != "" {
		stop, err := r.serveMetrics()
		if err != nil {
			return err
		}
		defer stop()
	}
	router, err := r.cfg.Router()
	if err != nil {
		return err
	}
	if r.flags.dryRun {
		return r.dryRun(ctx, router, start)
	}
	rdb := newRedis(r.cfg.Redis)
	defer rdb.Close()
	st, err := newStore(r.cfg, rdb, r.log)
	if err != nil {
		return err
	}

	// The lock: taken now, renewed while the replay runs; losing it stops
	// the replay before it can switch.
	token := newReplayToken()
	lockTTL := r.flags.lockTTL
	for deadline := time.Now().Add(r.flags.lockWait); ; {
		err := st.LockReplay(ctx, token, lockTTL)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrReplayLock) || time.Now().After(deadline) {
			return err
		}
		if !consumer.Sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	defer func() {
		if err := st.UnlockReplay(context.WithoutCancel(ctx), token); err != nil {
			r.log.Warn("releasing the replay lock failed (it expires by itself)", "err", err)
		}
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	wg.Go(func() {
		t := time.NewTicker(lockTTL / 6)
		defer t.Stop()
		failures := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := st.LockReplay(ctx, token, lockTTL)
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
				r.log.Warn("renewing the replay lock failed; retrying", "err", err)
			}
		}
	})

	before, err := st.Generations(ctx)
	if err != nil {
		return err
	}
	gen, _, err := st.BeginBuild(ctx, token, r.boards) // a dead replay's build is listed to drop in the gens hash
	if err != nil {
		return err
	}
	r.log.Info("replay started", "generation", gen, "boards", strings.Join(r.boards, ","), "topics", strings.Join(r.rc.Topics, ","))
	// Read after BeginBuild: whatever live consumption applied without
	// writing the new generation is below these end offsets.
	ranges, err := consumer.PlanReplay(ctx, r.rc)
	if err != nil {
		return err
	}
	// Batches end at the live group's committed offsets, so that the stream
	// time marks live consumption resumes from are exact there too (after a
	// Redis that lost writes is rebuilt).
	if lags, err := r.groupLags(ctx); err != nil {
		r.log.Warn("reading the live group's committed offsets failed; replaying without splitting there", "err", err)
	} else {
		consumer.SplitAtCommitted(ranges, lags)
	}
	build := st.Generation(gen)
	sink, err := consumer.NewRankingSink(r.cfg.Schemas(), router, build,
		consumer.WithRegisterer(r.reg), consumer.WithLogger(r.log), consumer.WithBoards(r.boards))
	if err != nil {
		return err
	}
	stats, err := r.replay(ctx, ranges, sink)
	if err != nil {
		return r.abort(ctx, gen, err)
	}

	// Verify: every partition reached its end (Replay returns only then);
	// roll the rolling boards up to the coming period; compare sizes.
	at := time.Now().Add(r.cfg.Rollover.Lead)
	for _, name := range r.boards {
		if err := build.Rollover(ctx, name, at); err != nil {
			return r.abort(ctx, gen, fmt.Errorf("rolling %s over in generation %d: %w", name, gen, err))
		}
	}
	fmt.Fprintf(r.stdout, "verify: every partition replayed to its end offset; dims per board (old generation -> new):\n")
	for _, name := range r.boards {
		old := before[name].Active
		oldN, err1 := st.Generation(old).DimsCount(ctx, name)
		newN, err2 := build.DimsCount(ctx, name)
		if err := errors.Join(err1, err2); err != nil {
			return r.abort(ctx, gen, err)
		}
		fmt.Fprintf(r.stdout, "  %-28s g%d %6d -> g%d %6d\n", name, old, oldN, gen, newN)
	}
	if err := context.Cause(ctx); err != nil {
		return r.abort(ctx, gen, err)
	}
	if err := st.Switch(ctx, token, gen, r.boards); err != nil {
		return r.abort(ctx, gen, err)
	}
	r.log.Info("switched to the new generation", "generation", gen)

	// Drop the old generations: this switch's, the builds of replays that
	// died, and what earlier replays did not get to delete (killed after
	// their switch). The gens hash keeps the list until each is deleted.
	pending, err := st.PendingDrops(ctx)
	if err != nil {
		return fmt.Errorf("switched to generation %d, but %w", gen, err)
	}
	drops := map[int][]string{}
	for name, gs := range pending {
		for _, g := range gs {
			if g != gen && r.cfg.Board(name) != nil {
				drops[g] = append(drops[g], name)
			}
		}
	}
	deleted := 0
	if !r.flags.keepOld {
		for pass := 0; pass < 2; pass++ {
			if !consumer.Sleep(ctx, r.flags.dropAfter) {
				return context.Cause(ctx)
			}
			for g, names := range drops {
				n, err := st.DropGeneration(ctx, g, names, 200)
				deleted += n
				if err != nil {
					return fmt.Errorf("switched to generation %d, but deleting generation %d failed (the next replay deletes it): %w", gen, g, err)
				}
			}
		}
		for g, names := range drops {
			for _, name := range names {
				if err := st.MarkDropped(ctx, token, name, g); err != nil {
					return fmt.Errorf("switched to generation %d: %w", gen, err)
				}
			}
		}
	}
	r.summary(stats, time.Since(start), fmt.Sprintf("switched to generation %d; %d keys of old generations deleted", gen, deleted))
	return nil
}

// abort ends a replay that will not switch: the old generation stays
// active; the partial one is deleted by the next replay.
func (r *replayRun) abort(ctx context.Context, gen int, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return fmt.Errorf("replay stopped before the switch (the active generation is unchanged; generation %d is partial and the next replay deletes it): %w", gen, err)
}

func (r *replayRun) dryRun(ctx context.Context, router *ingest.Router, start time.Time) error {
	ranges, err := consumer.PlanReplay(ctx, r.rc)
	if err != nil {
		return err
	}
	sink, err := consumer.NewRankingSink(r.cfg.Schemas(), router, consumer.NewDryRunStore(r.cfg.Boards()),
		consumer.WithRegisterer(r.reg), consumer.WithLogger(r.log), consumer.WithBoards(r.boards))
	if err != nil {
		return err
	}
	stats, err := r.replay(ctx, ranges, sink)
	if err != nil {
		return err
	}
	r.summary(stats, time.Since(start), "dry run: nothing written (out_of_range needs the boards and is not judged)")
	return nil
}

// replay runs consumer.Replay with progress reporting.
func (r *replayRun) replay(ctx context.Context, ranges []consumer.PartitionRange, sink *consumer.RankingSink) (consumer.ReplayStats, error) {
	totals := map[string]int64{}
	var topics []string
	for _, pr := range ranges {
		if _, ok := totals[pr.Topic]; !ok {
			topics = append(topics, pr.Topic)
		}
		totals[pr.Topic] += pr.Total()
	}
	done := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_done",
		Help: "Messages replayed so far, per topic."}, []string{"topic"})
	total := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "rankd", Subsystem: "replay", Name: "messages_total",
		Help: "Messages the replay covers, per topic."}, []string{"topic"})
	r.reg.MustRegister(done, total)
	var mu sync.Mutex
	current := map[string]int64{}
	for _, t := range topics {
		total.WithLabelValues(t).Set(float64(totals[t]))
		done.WithLabelValues(t).Set(0)
	}

	mode := r.flags.progress
	if mode == "auto" {
		mode = "log"
		if isTerminal(r.stderr) {
			mode = "bars"
		}
	}
	var bars map[string]*mpb.Bar
	var p *mpb.Progress
	if mode == "bars" {
		p = mpb.NewWithContext(ctx, mpb.WithOutput(r.stderr), mpb.WithWidth(40))
		bars = map[string]*mpb.Bar{}
		for _, t := range topics {
			bars[t] = p.AddBar(totals[t],
				mpb.PrependDecorators(decor.Name(t, decor.WC{W: 10, C: decor.DindentRight}), decor.CountersNoUnit("%d / %d", decor.WC{W: 22})),
				mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.AverageSpeed(0, " %.0f msg/s", decor.WC{W: 14}),
					decor.Name(" ETA "), decor.AverageETA(decor.ET_STYLE_GO)))
		}
	}
	r.rc.Progress = func(topic string, n int64) {
		done.WithLabelValues(topic).Set(float64(n))
		mu.Lock()
		current[topic] = n
		mu.Unlock()
		if b := bars[topic]; b != nil {
			b.SetCurrent(n)
		}
	}
	stopLog := make(chan struct{})
	var wg sync.WaitGroup
	if mode == "log" {
		wg.Go(func() {
			t := time.NewTicker(5 * time.Second)
			defer t.Stop()
			begin := time.Now()
			for {
				select {
				case <-stopLog:
					return
				case <-t.C:
				}
				mu.Lock()
				var sum, all int64
				for _, tp := range topics {
					sum += current[tp]
					all += totals[tp]
				}
				mu.Unlock()
				rate := float64(sum) / time.Since(begin).Seconds()
				eta := time.Duration(0)
				if rate > 0 {
					eta = time.Duration(float64(all-sum) / rate * float64(time.Second)).Round(time.Second)
				}
				r.log.Info("replay progress", "done", sum, "total", all, "rate_per_s", int64(rate), "eta", eta.String())
			}
		})
	}
	began := time.Now()
	stats, err := consumer.Replay(ctx, r.rc, ranges, sink)
	r.applyDur = time.Since(began)
	close(stopLog)
	wg.Wait()
	if p != nil {
		for _, t := range topics {
			if err == nil {
				bars[t].SetTotal(totals[t], true)
			} else {
				bars[t].Abort(false)
			}
		}
		p.Wait()
	}
	return stats, err
}

func (r *replayRun) summary(st consumer.ReplayStats, d time.Duration, outcome string) {
	applied, dups := r.counter("rankd_sink_updates_applied_total"), r.counter("rankd_sink_duplicates_total")
	rate := float64(st.Messages) / r.applyDur.Seconds()
	fmt.Fprintf(r.stdout, "replay: %s in %s\n", outcome, d.Round(time.Millisecond))
	fmt.Fprintf(r.stdout, "  messages %d (%.0f/s over the %s of reading and applying; %d more read before --from for stream times)\n",
		st.Messages, rate, r.applyDur.Round(time.Millisecond), st.Observed)
	fmt.Fprintf(r.stdout, "  board updates applied %d, duplicate messages %d\n", int64(applied), int64(dups))
	var reasons []string
	for reason := range st.DeadLetters {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		fmt.Fprintf(r.stdout, "  dead letters: none\n")
	}
	for _, reason := range reasons {
		fmt.Fprintf(r.stdout, "  dead letters %-14s %d\n", reason, st.DeadLetters[reason])
	}
}

// counter sums a counter's series on the replay's registry.
func (r *replayRun) counter(name string) float64 {
	mfs, err := r.reg.Gather()
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

func (r *replayRun) serveMetrics() (func(), error) {
	ln, err := net.Listen("tcp", r.flags.metrics)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	r.log.Info("replay metrics", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

func newReplayToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// groupLags reads the live group's committed offsets of the replayed topics.
func (r *replayRun) groupLags(ctx context.Context) ([]consumer.PartitionLag, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(r.cfg.Kafka.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	lags, err := consumer.GroupLag(ctx, client, r.cfg.Kafka.Group, r.rc.Topics)
	if errors.Is(err, kafka.GroupIdNotFound) {
		return nil, nil
	}
	return lags, err
}
