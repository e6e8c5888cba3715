package replay

import (
	"context"
	"sync"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// DryRunStore stands in for the store in `rankd replay --dry-run`: it
// judges updates as a replay from the start of the log would, without
// Redis. Duplicates are found by message ID (kept in memory) and take their
// first delivery's verdicts; lateness is judged from the updates' stream
// times. It keeps no values, so it never reports out_of_range (that needs
// the boards' contents). Every update of a non-duplicate event that is not
// late counts as applied.
type DryRunStore struct {
	mu     sync.Mutex
	boards map[string]*ranking.Board
	cals   map[string]ranking.Calendar
	seen   map[string][]ranking.Status
}

// NewDryRunStore returns a DryRunStore for boards.
func NewDryRunStore(boards []*ranking.Board) *DryRunStore {
	d := &DryRunStore{boards: map[string]*ranking.Board{}, cals: map[string]ranking.Calendar{}, seen: map[string][]ranking.Status{}}
	for _, b := range boards {
		d.boards[b.Name], d.cals[b.Name] = b, b.Calendar()
	}
	return d
}

// Apply implements consumer.Store.
func (d *DryRunStore) Apply(_ context.Context, evs []store.Event, _ ...store.Mark) (ranking.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, ev := range evs {
		n += len(ev.Updates)
	}
	res := ranking.Result{Status: make([]ranking.Status, n), Repeated: make([]bool, n)}
	s := 0
	for _, ev := range evs {
		e := s + len(ev.Updates)
		if first, ok := d.seen[ev.ID]; ok {
			for k := s; k < e; k++ {
				res.Status[k] = ranking.StatusDuplicate
				if n := k - s; n < len(first) && first[n] == ranking.StatusLate {
					res.Status[k], res.Repeated[k] = ranking.StatusLate, true
				}
			}
		} else {
			for k, u := range ev.Updates {
				if b := d.boards[u.Board]; b != nil && b.Late(d.cals[u.Board].At(u.Time), u.StreamTime) {
					res.Status[s+k] = ranking.StatusLate
				}
			}
			d.seen[ev.ID] = append([]ranking.Status(nil), res.Status[s:e]...)
		}
		s = e
	}
	return res, nil
}

// StreamTimes implements consumer.Store: a dry run reads every partition from its
// start, so every stream time starts at zero.
func (d *DryRunStore) StreamTimes(_ context.Context, at []store.Mark) ([]time.Time, error) {
	return make([]time.Time, len(at)), nil
}

// ApplyFrom implements consumer.Store: Apply (a dry run's sink is a replay's, which
// never calls it).
func (d *DryRunStore) ApplyFrom(ctx context.Context, evs []store.Event, _ []store.Span) (ranking.Result, error) {
	return d.Apply(ctx, evs)
}

// Positions implements consumer.Store: a dry run knows no positions.
func (d *DryRunStore) Positions(_ context.Context, at []store.Span) ([]store.Position, error) {
	return make([]store.Position, len(at)), nil
}

// GensIntact implements consumer.Store.
func (d *DryRunStore) GensIntact(context.Context) (bool, error) { return true, nil }
