package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/rankd/rankd/ranking"
)

// RolloverConfig schedules RunRollover. Zero values take the defaults.
type RolloverConfig struct {
	// Lead is how long before a boundary the next period of a rolling board
	// is prefilled; default 10m. It must exceed Interval plus the time one
	// rollover takes, so that each period is prefilled before it starts.
	Lead time.Duration
	// Interval is how often the boards are checked; default 1m.
	Interval time.Duration
}

// RunRollover keeps the rolling boards prefilled, and the dims registries
// of expiring boards pruned (ranking.Store.PruneDims), until ctx is done,
// then returns nil. At once and then every Interval it calls
// store.Rollover(board, now+Lead) for every rolling board of boards (others
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
// Errors are counted (rankd_rollover_errors_total), logged, and retried at
// the next tick; each rollover's duration goes to
// rankd_rollover_duration_seconds. Options: WithRegisterer, WithLogger,
// WithClock (the time a period is computed from).
func RunRollover(ctx context.Context, store *ranking.Store, boards []*ranking.Board, cfg RolloverConfig, opts ...Option) error {
	if cfg.Lead <= 0 {
		cfg.Lead = 10 * time.Minute
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	o := newOptions(opts)
	m, err := newMetrics(o.reg)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	m.touchBoards(boards)
	var rolling, expiring []*ranking.Board
	for _, b := range boards {
		if b.Window == ranking.WindowRolling {
			rolling = append(rolling, b)
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
			if _, err := store.PruneDims(ctx, b.Name); err != nil && ctx.Err() == nil {
				o.log.Warn("pruning the dims registry failed; retrying at the next tick", "board", b.Name, "err", err)
			}
		}
		at := o.now().Add(cfg.Lead)
		for _, b := range rolling {
			start := time.Now()
			err := store.Rollover(ctx, b.Name, at)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				m.rollErrors.WithLabelValues(b.Name).Inc()
				o.log.Warn("rollover failed; retrying at the next tick", "board", b.Name, "err", err)
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
