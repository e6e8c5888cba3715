package main

import (
	"bufio"
	"context"
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

	"github.com/rankd/rankd/consumer/replay"

	"github.com/rankd/rankd/internal/assembly"
	"github.com/spf13/pflag"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/secure"
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

// replaySpec is `rankd replay`.
var replaySpec = spec{use: "replay --config FILE [--boards a,b] [--from earliest|TIME] [--to now|TIME] [--dry-run] [--yes]", short: "rebuild boards from the topics into a new key generation, then switch to it", long: replayHelp, flags: replayCmdFlags}

func replayCmdFlags(fs *pflag.FlagSet) runFunc {
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
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		cfg, log, _, err := setup(*cfgFlag, &lf, stderr)
		if err != nil {
			return err
		}
		boards, err := replayBoards(cfg, f.boards)
		if err != nil {
			return err
		}
		var rc replay.Config
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
		rc.Brokers, rc.Topics = cfg.Kafka.Brokers, assembly.Topics(cfg, boards)
		rc.Dialer = secure.KafkaDialer(cfg.Kafka) // TLS, SASL
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
		router, err := cfg.Router()
		if err != nil {
			return err
		}
		reg := prometheus.NewRegistry()
		if f.metrics != "" {
			stop, err := serveReplayMetrics(f.metrics, reg, log)
			if err != nil {
				return err
			}
			defer stop()
		}
		view := newReplayProgress(ctx, f.progress, stdout, stderr, log)
		rb := &replay.Rebuild{
			Replay: rc, Schemas: cfg.Schemas(), Router: router, Boards: boards, Group: cfg.Kafka.Group, DeadLetterTopic: cfg.Kafka.DeadLetterTopic,
			RolloverLead: cfg.Rollover.Lead, LockTTL: f.lockTTL, LockWait: f.lockWait, DropAfter: f.dropAfter, KeepOld: f.keepOld,
			Registry: reg, Logger: log, Observer: view,
		}
		start := time.Now()
		if f.dryRun {
			res, err := rb.DryRun(ctx, cfg.Boards())
			if err != nil {
				return err
			}
			replaySummary(stdout, res, time.Since(start), 0, true, "dry run: nothing written (out_of_range needs the boards and is not judged)")
			return nil
		}
		rdb := assembly.NewRedis(cfg.Redis)
		defer rdb.Close()
		st, err := assembly.NewStore(cfg, rdb, log)
		if err != nil {
			return err
		}
		res, err := rb.Run(ctx, st)
		if err != nil {
			return err
		}
		waited := view.waited()
		replaySummary(stdout, res, time.Since(start)-waited, waited, false, fmt.Sprintf("switched to generation %d; %d keys of old generations deleted", res.Generation, res.Deleted))
		return nil
	}
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

// replayProgress is the Rebuild's observer: it shows the progress on
// stderr, a bar per topic (mode bars), a log line every 5 s (mode log) or
// nothing, and the verification before the switch on stdout.
type replayProgress struct {
	ctx    context.Context // stops the bars
	mode   string
	stderr io.Writer
	stdout io.Writer
	log    *slog.Logger

	waiting, locked time.Time // when the wait for the lock began, and ended

	topics []string
	totals map[string]int64
	mu     sync.Mutex
	done   map[string]int64
	bars   map[string]*mpb.Bar
	p      *mpb.Progress
	stop   chan struct{}
	wg     sync.WaitGroup
}

// newReplayProgress returns the progress of --progress mode; auto is bars
// on a terminal, else log.
func newReplayProgress(ctx context.Context, mode string, stdout, stderr io.Writer, log *slog.Logger) *replayProgress {
	if mode == "auto" {
		mode = "log"
		if isTerminal(stderr) {
			mode = "bars"
		}
	}
	return &replayProgress{ctx: ctx, mode: mode, stdout: stdout, stderr: stderr, log: log}
}

// LockWaiting says that another replay holds the lock, and until when
// this one waits for it (--lock-wait).
func (v *replayProgress) LockWaiting(deadline time.Time) {
	v.mu.Lock()
	v.waiting = time.Now()
	v.mu.Unlock()
	fmt.Fprintf(v.stderr, "replay: another replay holds the lock; waiting for it until %s (--lock-wait; a killed replay's lock expires after its --lock-ttl)\n",
		deadline.Format("15:04:05"))
}

// LockTaken notes when the lock was taken after a wait.
func (v *replayProgress) LockTaken() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.locked = time.Now()
}

// waited returns how long the replay waited for the lock (0: it took it
// at once).
func (v *replayProgress) waited() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.locked.IsZero() {
		return 0
	}
	return v.locked.Sub(v.waiting)
}

func (v *replayProgress) Planned(ranges []replay.Range) {
	v.totals, v.done = map[string]int64{}, map[string]int64{}
	for _, pr := range ranges {
		if _, ok := v.totals[pr.Topic]; !ok {
			v.topics = append(v.topics, pr.Topic)
		}
		v.totals[pr.Topic] += pr.Total()
	}
	switch v.mode {
	case "bars":
		v.p = mpb.NewWithContext(v.ctx, mpb.WithOutput(v.stderr), mpb.WithWidth(40))
		v.bars = map[string]*mpb.Bar{}
		for _, t := range v.topics {
			v.bars[t] = v.p.AddBar(v.totals[t],
				mpb.PrependDecorators(decor.Name(t, decor.WC{W: 10, C: decor.DindentRight}), decor.CountersNoUnit("%d / %d", decor.WC{W: 22})),
				mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.AverageSpeed(0, " %.0f msg/s", decor.WC{W: 14}),
					decor.Name(" ETA "), decor.AverageETA(decor.ET_STYLE_GO)))
		}
	case "log":
		v.stop = make(chan struct{})
		v.wg.Go(v.logLoop)
	}
}

func (v *replayProgress) Progress(topic string, n int64) {
	v.mu.Lock()
	v.done[topic] = n
	v.mu.Unlock()
	if b := v.bars[topic]; b != nil {
		b.SetCurrent(n)
	}
}

func (v *replayProgress) Replayed(err error) {
	if v.stop != nil {
		close(v.stop)
		v.wg.Wait()
	}
	if v.p != nil {
		for _, t := range v.topics {
			if err == nil {
				v.bars[t].SetTotal(v.totals[t], true)
			} else {
				v.bars[t].Abort(false)
			}
		}
		v.p.Wait()
	}
}

func (v *replayProgress) Verified(sizes []replay.BoardSize) {
	fmt.Fprintf(v.stdout, "verify: every partition replayed to its end offset; dims per board (old generation -> new):\n")
	for _, s := range sizes {
		fmt.Fprintf(v.stdout, "  %-28s g%d %6d -> g%d %6d\n", s.Board, s.OldGen, s.Old, s.NewGen, s.New)
	}
}

// logLoop logs the progress every 5 s until Replayed.
func (v *replayProgress) logLoop() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	begin := time.Now()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
		}
		v.mu.Lock()
		var sum, all int64
		for _, tp := range v.topics {
			sum += v.done[tp]
			all += v.totals[tp]
		}
		v.mu.Unlock()
		rate := float64(sum) / time.Since(begin).Seconds()
		eta := time.Duration(0)
		if rate > 0 {
			eta = time.Duration(float64(all-sum) / rate * float64(time.Second)).Round(time.Second)
		}
		v.log.Info("replay progress", "done", sum, "total", all, "rate_per_s", int64(rate), "eta", eta.String())
	}
}

// replaySummary prints the outcome of a replay that took d after waiting
// for the lock (not included in d); a dry run applied nothing.
func replaySummary(w io.Writer, res replay.Result, d, waited time.Duration, dryRun bool, outcome string) {
	st := res.Stats
	rate := float64(st.Messages) / res.ReplayTime.Seconds()
	wait := ""
	if waited > 0 {
		wait = fmt.Sprintf(" (after waiting %s for the lock)", waited.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "replay: %s in %s%s\n", outcome, d.Round(time.Millisecond), wait)
	verb := "reading and applying"
	if dryRun {
		verb = "reading and judging"
	}
	fmt.Fprintf(w, "  messages %d (%.0f/s over the %s of %s; %d more read before --from for stream times)\n",
		st.Messages, rate, res.ReplayTime.Round(time.Millisecond), verb, st.Observed)
	if dryRun {
		fmt.Fprintf(w, "  board updates that would be applied %d, duplicate messages %d\n", res.Applied, res.Duplicates)
	} else {
		fmt.Fprintf(w, "  board updates applied %d, duplicate messages %d\n", res.Applied, res.Duplicates)
	}
	var reasons []string
	for reason := range st.DeadLetters {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		fmt.Fprintf(w, "  dead letters: none\n")
	}
	for _, reason := range reasons {
		fmt.Fprintf(w, "  dead letters %-14s %d\n", reason, st.DeadLetters[reason])
	}
}

// serveReplayMetrics serves reg at addr/metrics until the returned stop.
func serveReplayMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("replay metrics", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
