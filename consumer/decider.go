package consumer

import (
	"context"
	"errors"
	"sync"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// Decider decides for a replay's sink which messages are new, in memory,
// instead of the dedupe in Redis: the sink then applies their events as
// store.Event.Decided (no ID lookup, nothing held), and Held gives the IDs
// to hold afterwards (store.Store.RegisterIDs). Only a replay writing a
// generation that no one else writes yet (store.Store.ReserveBuild) may
// decide, and an Apply of a deciding sink is not retried: a decided event
// applied twice would count twice, so an error ends the deciding (the
// caller starts over). It keeps about 40 bytes per message ID (measured:
// 41 for 1M IDs), and twice that for a moment in Held.
//
// With a Folder, the updates of the boards it can fold are applied in
// memory (store.Folder) rather than by the store, which writes them at the
// end.
type Decider struct {
	fold     Folder
	mu       sync.Mutex
	claims   map[store.IDKey]*claimBatch // the batch that applies the ID
	verdicts map[store.IDKey][]ranking.Status
	failed   error
}

// claimBatch is one Apply of a deciding sink: done is closed once its
// events are applied (or failed).
type claimBatch struct {
	done   chan struct{}
	failed bool
}

// Folder is what a Decider folds updates with: store.Folder.
type Folder interface {
	Foldable(board string) bool
	Fold(ups []ranking.Update, out []ranking.Status) error
}

// NewDecider returns an empty Decider folding with f (nil: none), with
// room for about expect IDs (growing a map of millions costs more than
// filling it).
func NewDecider(f Folder, expect int) *Decider {
	return &Decider{fold: f, claims: make(map[store.IDKey]*claimBatch, expect), verdicts: map[store.IDKey][]ranking.Status{}}
}

// claim records that batch applies key's message, unless an earlier one
// claimed it: then it returns that one.
func (d *Decider) claim(key store.IDKey, batch *claimBatch) (*claimBatch, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.claims[key]; ok {
		return b, false
	}
	d.claims[key] = batch
	return batch, true
}

// resolve records the statuses of the claimed messages of a batch that
// applied (nil: all applied), then wakes those waiting for it.
func (d *Decider) resolve(batch *claimBatch, keys []store.IDKey, statuses [][]ranking.Status) {
	d.mu.Lock()
	for i, k := range keys {
		if statuses[i] != nil {
			d.verdicts[k] = statuses[i]
		}
	}
	d.mu.Unlock()
	close(batch.done)
}

// fail wakes those waiting for batch, whose Apply failed, and ends the
// deciding.
func (d *Decider) fail(batch *claimBatch, err error) {
	d.mu.Lock()
	if d.failed == nil {
		d.failed = err
	}
	d.mu.Unlock()
	batch.failed = true
	close(batch.done)
}

// verdict waits until key's claiming batch has applied and returns the
// statuses of its message (nil: all applied).
func (d *Decider) verdict(ctx context.Context, key store.IDKey, batch *claimBatch) ([]ranking.Status, error) {
	select {
	case <-batch.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if batch.failed {
		return nil, errors.New("the batch with the first delivery of a message failed")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.verdicts[key], nil
}

// Held returns every ID claimed, with the statuses of those not all
// applied, for store.Store.RegisterIDs, and forgets them (the slice takes
// the map's memory, not twice it): call it once, when every batch is done.
// It returns an error when an Apply failed.
func (d *Decider) Held() ([]store.HeldID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed != nil {
		return nil, d.failed
	}
	out := make([]store.HeldID, 0, len(d.claims))
	for k := range d.claims {
		out = append(out, store.HeldID{Key: k, Statuses: d.verdicts[k]})
	}
	d.claims, d.verdicts = nil, nil
	return out, nil
}

// repeatOf returns the status of update i of a later delivery of a message
// whose first delivery's statuses are orig, and whether it repeats a
// verdict (as apply.lua: late and out of range repeat, the rest are
// duplicates).
func repeatOf(orig []ranking.Status, i int) (ranking.Status, bool) {
	if i < len(orig) && (orig[i] == ranking.StatusLate || orig[i] == ranking.StatusOutOfRange) {
		return orig[i], true
	}
	return ranking.StatusDuplicate, false
}
