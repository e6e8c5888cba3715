package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/consumer/replay"
	"github.com/rankd/rankd/internal/assembly"
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

Below the live group's committed offsets (all of the log if it committed
nothing), the replay first writes its new generation alone, before live
instances know of it: duplicates are decided in memory (--decide-max), the
sum boards over total and periodic windows are folded in memory and
written once, and the message IDs are then held in Redis in one pass.

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
	decideMax int
	lockTTL   time.Duration
	lockWait  time.Duration
}

// replaySpec is `rankd replay`.
var replaySpec = cli.Spec{Use: "replay --config FILE [--boards a,b] [--from earliest|TIME] [--to now|TIME] [--dry-run] [--yes]", Short: "rebuild boards from the topics into a new key generation, then switch to it", Long: replayHelp, Flags: replayCmdFlags}

func replayCmdFlags(fs *pflag.FlagSet) cli.RunFunc {
	cfgFlag := fs.String("config", "", "config `file` (default $RANKD_CONFIG)")
	var f replayFlags
	fs.StringVar(&f.boards, "boards", "", "comma-separated `names` of the boards to rebuild (default: all)")
	fs.StringVar(&f.from, "from", "earliest", "where each partition's replay starts: earliest, or an RFC 3339 `time` (the first message with a timestamp at or after it; earlier messages are read for stream times only)")
	fs.StringVar(&f.to, "to", "now", "where it ends: now (the end of the log), or an RFC 3339 `time` (dry runs only)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "decode, route and judge only: write nothing, report what would be dead-lettered")
	fs.BoolVar(&f.yes, "yes", false, "do not ask for confirmation (needed when stdin is not a terminal)")
	fs.IntVar(&f.batch, "batch", replay.DefaultBatch, "most messages per `batch` applied to Redis")
	fs.IntVar(&f.parallel, "parallel", 4, "partitions applied at once")
	fs.StringVar(&f.progress, "progress", "auto", "`mode` of progress: bars (one per topic), log (a line every 5 s), none; auto: bars on a terminal, else log")
	fs.StringVar(&f.metrics, "metrics", "", "serve replay metrics on this `address` at /metrics while it runs (e.g. :9101)")
	fs.DurationVar(&f.dropAfter, "drop-after", 3*time.Second, "wait this long after the switch before deleting the old generation (readers and in-flight batches of live instances move over meanwhile); it is deleted twice, this far apart")
	fs.BoolVar(&f.keepOld, "keep-old", false, "do not delete the old generation after the switch")
	fs.IntVar(&f.decideMax, "decide-max", replay.DefaultDecideMax, "most `messages` below the live group's committed offsets whose duplicates are decided in memory (21 to 43 bytes each, 12 more for a moment at the end); more, or -1, and every message goes through the dedupe in Redis")
	fs.DurationVar(&f.lockTTL, "lock-ttl", 30*time.Second, "TTL of the replay lock, renewed every sixth of it: a replay that dies stops the dual writes of live instances this long after")
	fs.DurationVar(&f.lockWait, "lock-wait", 0, "wait up to this long for the lock of another replay (a killed one holds it until its TTL ends); 0: fail at once")
	var lf cli.LogFlags
	lf.Register(fs, "text", "info")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		cfg, log, _, err := cli.Setup(*cfgFlag, &lf, stderr)
		if err != nil {
			return err
		}
		names := cli.SplitList(f.boards)
		if f.boards != "" && len(names) == 0 {
			return cli.Usagef("--boards %q names no board", f.boards)
		}
		boards, err := cfg.BoardNames(names)
		if err != nil {
			return cli.Usagef("--boards: %v", err)
		}
		rb, err := assembly.NewRebuild(cfg, boards)
		if err != nil {
			return err
		}
		if err := f.configure(rb); err != nil {
			return err
		}
		if len(rb.Replay.Topics) == 0 {
			return cli.Usagef("no route feeds %s: nothing to replay", strings.Join(boards, ","))
		}
		if !f.dryRun && !f.yes {
			if !replay.IsTerminal(os.Stdin) {
				return cli.Usagef("stdin is not a terminal: pass --yes to rebuild without confirmation")
			}
			fmt.Fprintf(stderr, "Rebuild %s from topics %s (%s) into a new generation, then switch to it? [y/N] ",
				strings.Join(boards, ", "), strings.Join(rb.Replay.Topics, ", "), f.from)
			answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				return errors.New("not confirmed; nothing done")
			}
		}
		reg := prometheus.NewRegistry()
		if f.metrics != "" {
			addr, stop, err := assembly.ServeMetrics(f.metrics, reg)
			if err != nil {
				return fmt.Errorf("--metrics: %w", err)
			}
			defer stop()
			log.Info("replay metrics", "addr", addr)
		}
		view := replay.NewProgress(ctx, f.progress, stdout, stderr, log)
		rb.Registry, rb.Logger, rb.Observer = reg, log, view
		start := time.Now()
		if f.dryRun {
			res, err := rb.DryRun(ctx, cfg.Boards())
			if err != nil {
				return err
			}
			replay.WriteSummary(stdout, res, time.Since(start), 0, true, "dry run: nothing written (out_of_range needs the boards and is not judged)")
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
		waited := view.Waited()
		replay.WriteSummary(stdout, res, time.Since(start)-waited, waited, false, fmt.Sprintf("switched to generation %d; %d keys of old generations deleted", res.Generation, res.Deleted))
		return nil
	}
}

// configure checks the flags and sets what they say of rb: the range, the
// batches, the lock and the old generation's deletion.
func (f *replayFlags) configure(rb *replay.Rebuild) error {
	var err error
	rc := &rb.Replay
	if f.from != "earliest" {
		if rc.From, err = time.Parse(time.RFC3339, f.from); err != nil {
			return cli.Usagef("--from %q: want earliest or RFC 3339, e.g. 2026-11-01T00:00:00+08:00", f.from)
		}
	}
	if f.to != "now" {
		if rc.To, err = time.Parse(time.RFC3339, f.to); err != nil {
			return cli.Usagef("--to %q: want now or RFC 3339", f.to)
		}
		if !f.dryRun {
			return cli.Usagef("--to %s: only with --dry-run (a rebuilt generation must include everything live traffic applied, so it reads to the end of the log)", f.to)
		}
	}
	if f.batch < 1 || f.parallel < 1 {
		return cli.Usagef("--batch and --parallel must be at least 1")
	}
	if f.lockTTL < time.Second {
		return cli.Usagef("--lock-ttl %v: want at least 1s", f.lockTTL)
	}
	if !slices.Contains(replay.ProgressModes, f.progress) {
		return cli.Usagef("--progress %q: want auto, bars, log or none", f.progress)
	}
	rc.BatchCount, rc.Parallel = f.batch, f.parallel
	rb.LockTTL, rb.LockWait, rb.DropAfter, rb.KeepOld = f.lockTTL, f.lockWait, f.dropAfter, f.keepOld
	rb.DecideMax = f.decideMax
	return nil
}
