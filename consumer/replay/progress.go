package replay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Progress is the Observer of `rankd replay`: it shows the progress on
// stderr, a bar per topic (mode bars), a log line every 5 s (mode log) or
// nothing, and the verification before the switch on stdout. It is also a
// LockObserver.
type Progress struct {
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

// ProgressModes are the modes of NewProgress.
var ProgressModes = []string{"auto", "bars", "log", "none"}

// NewProgress returns the progress of mode (one of ProgressModes); auto
// is bars when stderr is a terminal, else log.
func NewProgress(ctx context.Context, mode string, stdout, stderr io.Writer, log *slog.Logger) *Progress {
	if mode == "auto" {
		mode = "log"
		if IsTerminal(stderr) {
			mode = "bars"
		}
	}
	return &Progress{ctx: ctx, mode: mode, stdout: stdout, stderr: stderr, log: log}
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// LockWaiting says that another replay holds the lock, and until when
// this one waits for it (--lock-wait).
func (v *Progress) LockWaiting(deadline time.Time) {
	v.mu.Lock()
	v.waiting = time.Now()
	v.mu.Unlock()
	fmt.Fprintf(v.stderr, "replay: another replay holds the lock; waiting for it until %s (--lock-wait; a killed replay's lock expires after its --lock-ttl)\n",
		deadline.Format("15:04:05"))
}

// LockTaken notes when the lock was taken after a wait.
func (v *Progress) LockTaken() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.locked = time.Now()
}

// Waited returns how long the replay waited for the lock (0: it took it
// at once).
func (v *Progress) Waited() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.locked.IsZero() {
		return 0
	}
	return v.locked.Sub(v.waiting)
}

func (v *Progress) Planned(ranges []Range) {
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

// Replanned updates the totals to ranges' (the rest of the log, planned
// once the build began).
func (v *Progress) Replanned(ranges []Range) {
	totals := map[string]int64{}
	for _, pr := range ranges {
		totals[pr.Topic] += pr.Total()
	}
	v.mu.Lock()
	for t, n := range totals {
		if _, ok := v.totals[t]; ok {
			v.totals[t] = n
		}
	}
	v.mu.Unlock()
	for t, b := range v.bars {
		b.SetTotal(totals[t], false)
	}
}

func (v *Progress) Progress(topic string, n int64) {
	v.mu.Lock()
	v.done[topic] = n
	v.mu.Unlock()
	if b := v.bars[topic]; b != nil {
		b.SetCurrent(n)
	}
}

func (v *Progress) Replayed(err error) {
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

func (v *Progress) Verified(sizes []BoardSize) {
	fmt.Fprintf(v.stdout, "verify: every partition replayed to its end offset; dims per board (old generation -> new):\n")
	for _, s := range sizes {
		fmt.Fprintf(v.stdout, "  %-28s g%d %6d -> g%d %6d\n", s.Board, s.OldGen, s.Old, s.NewGen, s.New)
	}
}

// logLoop logs the progress every 5 s until Replayed.
func (v *Progress) logLoop() {
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

// WriteSummary prints the outcome of a replay that took d after waiting
// for the lock (not included in d); a dry run applied nothing.
func WriteSummary(w io.Writer, res Result, d, waited time.Duration, dryRun bool, outcome string) {
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
		fmt.Fprintf(w, "  messages decided in memory %d (below the live group's committed offsets)\n", res.Decided)
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
