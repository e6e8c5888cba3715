package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rankd/rankd/ranking"
)

// Defaults of RunStandings.
const (
	// DefaultStandingsInterval is how often RunStandings looks for
	// periods to seal.
	DefaultStandingsInterval = 10 * time.Second
	// DefaultStandingsLockTTL is the publisher lock's TTL (renewed every
	// tick and before every period).
	DefaultStandingsLockTTL = 30 * time.Second
	// standingsPerTick bounds the periods of a board sealed in one tick.
	standingsPerTick = 1000
)

// StandingsPublisher writes snapshot revisions to the standings topic and
// returns once the brokers acknowledged every one.
type StandingsPublisher interface {
	Publish(ctx context.Context, msgs []StandingsMessage) error
}

// StandingsSchedule configures RunStandings.
type StandingsSchedule struct {
	// Boards maps each board that publishes to its publication.
	Boards    map[string]Publish
	Publisher StandingsPublisher
	// Interval (DefaultStandingsInterval) and LockTTL
	// (DefaultStandingsLockTTL).
	Interval, LockTTL time.Duration
	Registerer        prometheus.Registerer // nil: not exported
	Logger            *slog.Logger          // nil: discard
	Now               func() time.Time      // wall clock of the overdue gauge (nil: time.Now)
}

// RunStandings seals and publishes the final periods of the boards of
// cfg.Boards until ctx is done, then returns nil.
//
// Every instance runs it; the one holding the publisher lock (a Redis key
// with a TTL, <base>:std:lock, renewed every Interval and before every
// period) does the work, the others only export the gauges. Every Interval
// the holder, for each board:
//
//   - when the board's active generation is newer than the one its sealed
//     periods were checked against (a replay switched it), reads every
//     sealed period still readable (within the board's retention of its
//     low watermark) again, and stores and publishes a new revision of
//     each snapshot whose content changed (rankd_standings_revisions_total);
//   - seals every period from its cursor on that is final (Store.Final):
//     each dims value with members gets a snapshot (rankd_standings_sealed_total),
//     published to Kafka; the cursor moves past the period once every
//     snapshot of it was acknowledged.
//
// A snapshot is written once per revision and published until its
// publication is recorded, so a crash, a lost lock or two holders at once
// (a holder paused past the TTL) can publish a revision again, always with
// the same bytes. Errors are counted (rankd_standings_errors_total),
// logged and retried at the next tick.
func RunStandings(ctx context.Context, st *Store, cfg StandingsSchedule) error {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultStandingsInterval
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = DefaultStandingsLockTTL
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if st.root != nil {
		st = st.root
	}
	m, err := newStandingsMetrics(cfg.Registerer)
	if err != nil {
		return err
	}
	var boards []string
	for name := range cfg.Boards {
		b, err := st.board(name)
		if err != nil {
			return err
		}
		if b.b.Window == ranking.WindowTotal {
			return fmt.Errorf("board %q: total boards are never final: nothing to publish", name)
		}
		boards = append(boards, name)
		for _, c := range []*prometheus.CounterVec{m.sealed, m.published, m.revisions, m.errors} {
			c.WithLabelValues(name)
		}
		m.overdue.WithLabelValues(name).Set(0)
	}
	if len(boards) == 0 {
		<-ctx.Done()
		return nil
	}
	slices.Sort(boards)
	host, _ := os.Hostname()
	token := host + "/" + strconv.Itoa(os.Getpid()) + "/" + newToken()
	defer st.unlockStandings(context.WithoutCancel(ctx), token)
	r := &standingsRunner{st: st, cfg: cfg, m: m, token: token}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		held, err := st.lockStandings(ctx, token, cfg.LockTTL)
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("taking the standings lock failed; retrying at the next tick", "err", err)
		}
		for _, name := range boards {
			if held {
				if err := r.board(ctx, name); err != nil && ctx.Err() == nil {
					m.errors.WithLabelValues(name).Inc()
					cfg.Logger.Warn("sealing standings failed; retrying at the next tick", "board", name, "err", err)
				}
			}
			r.gauges(ctx, name)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type standingsRunner struct {
	st    *Store
	cfg   StandingsSchedule
	m     *standingsMetrics
	token string
}

var errLostStandingsLock = errors.New("the standings lock was lost")

func (r *standingsRunner) renew(ctx context.Context) error {
	held, err := r.st.lockStandings(ctx, r.token, r.cfg.LockTTL)
	if err != nil {
		return err
	}
	if !held {
		return errLostStandingsLock
	}
	return nil
}

// board does one tick's work for a board.
func (r *standingsRunner) board(ctx context.Context, name string) error {
	s := r.st
	bs, _ := s.board(name)
	pub := r.cfg.Boards[name]
	g, err := s.cachedGen(ctx, name)
	if err != nil {
		return err
	}
	low, ok, err := s.LowWatermark(ctx, name)
	if err != nil || !ok {
		return err
	}
	state, err := s.readStandingsState(ctx, name)
	if err != nil {
		return err
	}
	cal := bs.cal
	// The oldest period whose keys may still exist.
	floor := cal.At(low.Add(-time.Duration(bs.retMs) * time.Millisecond))
	if !state.has {
		state = standingsState{next: floor.Start, gen: g.Active, has: true}
		if err := s.writeStandingsState(ctx, name, state); err != nil {
			return err
		}
	}
	next := cal.At(state.next)
	if state.gen < g.Active {
		for p := floor; p.Start.Before(next.Start); p = cal.Next(p) {
			if err := r.renew(ctx); err != nil {
				return err
			}
			if err := r.seal(ctx, name, p, pub, g.Active, true); err != nil {
				return err
			}
		}
		state.gen = g.Active
		if err := s.writeStandingsState(ctx, name, state); err != nil {
			return err
		}
		r.cfg.Logger.Info("sealed standings re-checked against a new generation", "board", name, "generation", g.Active)
	}
	for n := 0; n < standingsPerTick && bs.b.Late(next, low); n++ {
		if err := r.renew(ctx); err != nil {
			return err
		}
		if err := r.seal(ctx, name, next, pub, g.Active, false); err != nil {
			return err
		}
		next = cal.Next(next)
		state.next = next.Start
		if err := s.writeStandingsState(ctx, name, state); err != nil {
			return err
		}
	}
	return nil
}

// seal seals or re-checks one period and publishes what is unpublished.
func (r *standingsRunner) seal(ctx context.Context, board string, p ranking.Period, pub Publish, gen int, revise bool) error {
	res, err := r.st.sealPeriod(ctx, board, p, pub, gen, revise)
	if err != nil {
		return err
	}
	r.m.sealed.WithLabelValues(board).Add(float64(res.sealed))
	r.m.revisions.WithLabelValues(board).Add(float64(res.revised))
	if res.revised > 0 {
		r.cfg.Logger.Warn("a replay changed sealed standings: publishing a new revision", "board", board, "period", p.ID, "snapshots", res.revised)
	}
	if len(res.msgs) == 0 {
		return nil
	}
	if err := r.cfg.Publisher.Publish(ctx, res.msgs); err != nil {
		return fmt.Errorf("publishing the standings of %s: %w", p.ID, err)
	}
	r.m.published.WithLabelValues(board).Add(float64(len(res.msgs)))
	return r.st.markPublished(ctx, res.keys, res.msgs)
}

// gauges sets the board's overdue and sealed-until gauges from Redis.
func (r *standingsRunner) gauges(ctx context.Context, name string) {
	bs, _ := r.st.board(name)
	state, err := r.st.readStandingsState(ctx, name)
	if err != nil || !state.has {
		return
	}
	next := bs.cal.At(state.next)
	r.m.until.WithLabelValues(name).Set(float64(state.next.Unix()))
	due := next.End.Add(bs.b.Grace)
	r.m.overdue.WithLabelValues(name).Set(max(0, r.cfg.Now().Sub(due).Seconds()))
}

type standingsMetrics struct {
	sealed, published, revisions, errors *prometheus.CounterVec
	overdue, until                       *prometheus.GaugeVec
}

func newStandingsMetrics(reg prometheus.Registerer) (*standingsMetrics, error) {
	var errs []error
	counter := func(name, help string) *prometheus.CounterVec {
		return register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "standings", Name: name, Help: help}, []string{"board"}))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return register(reg, &errs, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "rankd", Subsystem: "standings", Name: name, Help: help}, []string{"board"}))
	}
	m := &standingsMetrics{
		sealed:    counter("sealed_total", "Snapshots sealed (revision 0): a final period of one dims value with members."),
		published: counter("published_total", "Snapshot revisions written to the standings topic and acknowledged (a repeat after a crash or a lost lock counts again)."),
		revisions: counter("revisions_total", "Snapshot revisions above 0: a replay changed the standings of a sealed period."),
		errors:    counter("errors_total", "Failed sealing or publishing attempts (retried at the next tick)."),
		overdue: gauge("overdue_seconds",
			"How long (wall clock) the board's oldest unsealed period is past its end plus grace; 0 when none is."),
		until: gauge("sealed_until_timestamp_seconds", "Unix seconds up to which the board's periods are sealed (the start of the first unsealed period)."),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	return m, nil
}
