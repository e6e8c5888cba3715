package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rankd/rankd/ranking"
)

// Defaults of the maintenance loops.
const (
	// DefaultRolloverLead is how long before a boundary the next period of
	// a rolling board is prefilled.
	DefaultRolloverLead = 10 * time.Minute
	// DefaultRolloverInterval is how often RunRollover checks the boards.
	DefaultRolloverInterval = time.Minute
	// DefaultFinalityInterval is how often RunFinality reads the marks.
	DefaultFinalityInterval = 10 * time.Second
)

// Schedule configures RunRollover and RunFinality. Zero values take the
// defaults.
type Schedule struct {
	// Lead is how long before a boundary the next period of a rolling board
	// is prefilled (DefaultRolloverLead). It must exceed Interval plus the
	// time one rollover takes, so that each period is prefilled before it
	// starts.
	Lead time.Duration
	// Interval is how often the boards are checked (DefaultRolloverInterval;
	// DefaultFinalityInterval for RunFinality).
	Interval time.Duration
	// Registerer receives the loops' metrics (nil: not exported). Collectors
	// already registered there are reused.
	Registerer prometheus.Registerer
	// Logger (nil: discard).
	Logger *slog.Logger
	// Now is the wall clock a rollover target is computed from (nil:
	// time.Now).
	Now func() time.Time
}

func (c Schedule) withDefaults(interval time.Duration) Schedule {
	if c.Lead <= 0 {
		c.Lead = DefaultRolloverLead
	}
	if c.Interval <= 0 {
		c.Interval = interval
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// RunRollover keeps the rolling boards prefilled, and the dims registries
// of expiring boards pruned (Store.PruneDims), until ctx is done, then
// returns nil. At once and then every Interval it calls
// st.Rollover(board, now+Lead) for every rolling board of boards (others
// are skipped), so the rolling board of the next period is complete before
// its boundary.
//
// The same call covers a head that moved past the last rolled period (a
// replay, a restart after downtime): Rollover rolls every period from the
// last rolled one up to the target. The store's Redis lock makes one
// process do the work while the others skip, so every instance may run
// RunRollover. Reads stay exact even when a rollover is late: the store
// completes a rolling board before reading it.
//
// Errors are counted (rankd_rollover_errors_total{board}, at 0 from the
// start for every rolling board), logged, and retried at the next tick;
// each rollover's duration goes to rankd_rollover_duration_seconds.
func RunRollover(ctx context.Context, st *Store, boards []*ranking.Board, cfg Schedule) error {
	cfg = cfg.withDefaults(DefaultRolloverInterval)
	m, err := newScheduleMetrics(cfg.Registerer)
	if err != nil {
		return err
	}
	var rolling, expiring []*ranking.Board
	for _, b := range boards {
		if b.Window == ranking.WindowRolling {
			rolling = append(rolling, b)
			m.rollErrors.WithLabelValues(b.Name)
		}
		if b.Window != ranking.WindowTotal {
			expiring = append(expiring, b)
		}
	}
	if len(expiring) == 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		for _, b := range expiring {
			if _, err := st.PruneDims(ctx, b.Name); err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("pruning the dims registry failed; retrying at the next tick", "board", b.Name, "err", err)
			}
		}
		at := cfg.Now().Add(cfg.Lead)
		for _, b := range rolling {
			start := time.Now()
			err := st.Rollover(ctx, b.Name, at)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				m.rollErrors.WithLabelValues(b.Name).Inc()
				cfg.Logger.Warn("rollover failed; retrying at the next tick", "board", b.Name, "err", err)
				continue
			}
			m.rollDur.WithLabelValues(b.Name).Observe(time.Since(start).Seconds())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunFinality exports, until ctx is done, how far every board's periods
// are final: every Interval (DefaultFinalityInterval) it sets
// rankd_finality_low_watermark_timestamp_seconds{board} (the least stream
// time of the partitions feeding the board, see Store.LowWatermark) and
// rankd_finality_oldest_open_period_start_timestamp_seconds{board} (the
// start of the oldest period that events may still change), both Unix
// times in seconds. Total boards and boards nothing was consumed for yet
// are left out. Read errors are logged and retried at the next tick.
func RunFinality(ctx context.Context, st *Store, boards []*ranking.Board, cfg Schedule) error {
	cfg = cfg.withDefaults(DefaultFinalityInterval)
	m, err := newScheduleMetrics(cfg.Registerer)
	if err != nil {
		return err
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		for _, b := range boards {
			if b.Window == ranking.WindowTotal {
				continue
			}
			lw, ok, err := st.LowWatermark(ctx, b.Name)
			if err == nil && ok {
				var p ranking.Period
				if p, err = st.OldestOpen(ctx, b.Name); err == nil {
					m.finLow.WithLabelValues(b.Name).Set(float64(lw.UnixMilli()) / 1000)
					m.finOpen.WithLabelValues(b.Name).Set(float64(p.Start.Unix()))
				}
			}
			if err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("reading finality failed; retrying at the next tick", "board", b.Name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scheduleMetrics are the collectors of RunRollover and RunFinality.
type scheduleMetrics struct {
	rollDur    *prometheus.HistogramVec // board
	rollErrors *prometheus.CounterVec   // board
	finLow     *prometheus.GaugeVec     // board
	finOpen    *prometheus.GaugeVec     // board
}

func newScheduleMetrics(reg prometheus.Registerer) (*scheduleMetrics, error) {
	var errs []error
	m := &scheduleMetrics{
		rollDur: register(reg, &errs, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rankd", Subsystem: "rollover", Name: "duration_seconds",
			Help:    "Duration of one rollover (prefill) of a rolling board, all dims.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"board"})),
		rollErrors: register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "rollover", Name: "errors_total",
			Help: "Failed rollovers of a rolling board (retried at the next tick)."}, []string{"board"})),
		finLow: register(reg, &errs, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "rankd", Subsystem: "finality", Name: "low_watermark_timestamp_seconds",
			Help: "Least stream time (the event time a partition has reached, in Unix seconds) of the partitions feeding the board (idle partitions left out)."}, []string{"board"})),
		finOpen: register(reg, &errs, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "rankd", Subsystem: "finality", Name: "oldest_open_period_start_timestamp_seconds",
			Help: "Start (Unix seconds) of the board's oldest period that is not final: events may still change it and every later one."}, []string{"board"})),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	return m, nil
}

// register registers c on reg, or returns the equal collector reg already
// holds; other errors are appended to errs.
func register[C prometheus.Collector](reg prometheus.Registerer, errs *[]error, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		*errs = append(*errs, err)
	}
	return c
}
