package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/rankd/rankd/ranking"
)

// RunFinality exports, until ctx is done, how far every board's periods
// are final: every interval it sets
// rankd_finality_low_watermark_seconds{board} (the least stream time of
// the partitions feeding the board, see ranking.Store.LowWatermark) and
// rankd_finality_oldest_open_period_start_seconds{board} (the start of the
// oldest period that events may still change). Total boards and boards
// nothing was consumed for yet are left out. Read errors are logged and
// retried at the next tick. Options: WithRegisterer, WithLogger.
func RunFinality(ctx context.Context, store *ranking.Store, boards []*ranking.Board, interval time.Duration, opts ...Option) error {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	o := newOptions(opts)
	m, err := newMetrics(o.reg)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, b := range boards {
			if b.Window == ranking.WindowTotal {
				continue
			}
			lw, ok, err := store.LowWatermark(ctx, b.Name)
			if err == nil && ok {
				var p ranking.Period
				if p, err = store.OldestOpen(ctx, b.Name); err == nil {
					m.finLow.WithLabelValues(b.Name).Set(float64(lw.UnixMilli()) / 1000)
					m.finOpen.WithLabelValues(b.Name).Set(float64(p.Start.Unix()))
				}
			}
			if err != nil && ctx.Err() == nil {
				o.log.Warn("reading finality failed; retrying at the next tick", "board", b.Name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
