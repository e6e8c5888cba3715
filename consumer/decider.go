package consumer

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

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
// caller starts over). It keeps 21 to 43 bytes per message ID (a table of
// 16-byte slots at most three quarters full; measured: 32 for 1M IDs), and
// 12 more for a moment in Held.
//
// With a Folder, the updates of the boards it can fold are applied in
// memory (store.Folder) rather than by the store, which writes them at the
// end.
type Decider struct {
	fold Folder
	// width is the dedupe buckets' width in ms (BucketBy; 0: every ID's
	// bucket is unknown), step the resolution of the times kept, in ms
	width, step int64
	mu          sync.Mutex
	claims      claimTable    // the batch that applies the ID: its claimRef's index in refs
	made        chan struct{} // closed once claims is made (NewDecider)
	verdicts    map[store.IDKey][]ranking.Status
	refs        []*claimRef            // every batch's, for Held
	parts       map[partitionKey]int32 // an index per partition
	last        []int64                // the latest Kafka time (ms) of each partition's messages
	failed      error
}

// decideSteps is how many steps of time a dedupe bucket has for a
// Decider: it keeps its messages' Kafka times in steps of TTL/16, and
// rounds them up (an ID is held at most a sixteenth of a TTL longer).
const decideSteps = 16

// claimBatch is one Apply of a deciding sink: done is closed once its
// events are applied (or failed).
type claimBatch struct {
	done   chan struct{}
	failed bool
	refs   []*claimRef // one per dedupe bucket of its messages (few)
}

// claimRef is a batch's claim of the IDs of its messages of one partition
// and step of Kafka time (-1: unknown): a pointer per ID, as the batch
// alone would be.
type claimRef struct {
	batch *claimBatch
	part  int32
	at    int64
	n     int   // IDs claimed through it
	out   int   // Held: its bucket's index in the result
	idx   int32 // in Decider.refs
}

// ref returns b's claimRef of part and at, made on first use; d.mu is
// held.
func (d *Decider) ref(b *claimBatch, part int32, at int64) *claimRef {
	for _, r := range b.refs {
		if r.part == part && r.at == at {
			return r
		}
	}
	r := &claimRef{batch: b, part: part, at: at, idx: int32(len(d.refs))}
	b.refs = append(b.refs, r)
	d.refs = append(d.refs, r)
	return r
}

// Folder is what a Decider folds updates with: store.Folder.
type Folder interface {
	Foldable(board string) bool
	FoldAt(ups []ranking.Update, at []int, out []ranking.Status) error
}

// NewDecider returns an empty Decider folding with f (nil: none), with
// room for about expect IDs (growing a table of millions costs more than
// filling it).
func NewDecider(f Folder, expect int) *Decider {
	d := &Decider{fold: f, verdicts: map[store.IDKey][]ranking.Status{}, parts: map[partitionKey]int32{}, made: make(chan struct{})}
	if expect < 1<<16 {
		d.claims = newClaimTable(expect)
		close(d.made)
		return d
	}
	// A table for millions is tens of MB, most of whose cost is the
	// kernel's first touch of each page: it is made while the replay
	// connects and fetches, not before (the first claim waits for it).
	go func() {
		d.claims = newClaimTable(expect)
		close(d.made)
	}()
	return d
}

// BucketBy makes Held give each ID the dedupe bucket (of width ttl, the
// dedupe TTL: store.Store.DedupeBucket) in which live consumption, as far
// behind as it is now, would have held it: the bucket of its message's
// Kafka time plus its partition's lag, now minus the latest Kafka time of
// the partition's messages claimed (live consumption applied those last).
// RegisterIDs then holds it for as long as live consumption would have and
// no longer (up to a sixteenth of a TTL more: times are kept in steps).
// Call it before the first Apply.
func (d *Decider) BucketBy(ttl time.Duration) {
	d.width = ttl.Milliseconds()
	d.step = max(d.width/decideSteps, 1)
}

// part returns the index of partition k (one per partition, in the order
// first seen).
func (d *Decider) part(k partitionKey) int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	part, ok := d.parts[k]
	if !ok {
		part = int32(len(d.last))
		d.parts[k] = part
		d.last = append(d.last, -1)
	}
	return part
}

// claim records that batch applies key's message, of Kafka time t in the
// partition of index part (Decider.part), unless an earlier one claimed
// it: then it returns that one.
func (d *Decider) claim(key store.IDKey, part int32, t time.Time, batch *claimBatch) (*claimBatch, bool) {
	c := []claimReq{{key: key, part: part, t: t}}
	d.claimAll(c, batch)
	if c[0].first != nil {
		return c[0].first, false
	}
	return batch, true
}

// claimReq is one message for claimAll: its ID's key, the index of its
// partition (Decider.part) and its Kafka time; claimAll sets first to the
// batch that claimed the ID before (nil: batch claims it now).
type claimReq struct {
	key   store.IDKey
	part  int32
	t     time.Time
	first *claimBatch
}

// claimAll claims the messages of cs for batch, in order, under one lock.
// It first touches the slot of every ID: those loads miss the caches (the
// table is tens of MB, its slots hit at random) and, independent of one
// another, overlap; one claim at a time among the batch's other work,
// each waited for its miss alone (about 400 ns a claim in a replay).
func (d *Decider) claimAll(cs []claimReq, batch *claimBatch) {
	<-d.made
	d.mu.Lock()
	defer d.mu.Unlock()
	d.claims.touch(cs)
	for i := range cs {
		c := &cs[i]
		ms := int64(-1) // unknown
		if d.width > 0 && !c.t.IsZero() && c.t.Unix() > 0 {
			ms = c.t.UnixMilli()
		}
		d.last[c.part] = max(d.last[c.part], ms)
		slot := d.claims.find(c.key)
		if slot.ref != 0 {
			c.first = d.refs[slot.ref-1].batch
			continue
		}
		at := int64(-1)
		if ms >= 0 {
			at = ms / d.step
		}
		r := d.ref(batch, c.part, at)
		r.n++
		slot.key, slot.ref = c.key, r.idx+1
		d.claims.added()
	}
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

// Held returns every ID claimed, grouped by dedupe bucket (BucketBy; 0:
// unknown) as of now, with the statuses of those not all applied, for
// store.Store.RegisterIDs (12 bytes per ID), and forgets them: call it
// once, when every batch is done. It returns an error when an Apply
// failed.
func (d *Decider) Held(now time.Time) ([]store.HeldBucket, error) {
	<-d.made
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed != nil {
		return nil, d.failed
	}
	bucket := func(r *claimRef) int64 {
		if r.at < 0 {
			return 0
		}
		lag := max(now.UnixMilli()-d.last[r.part], 0)
		return ((r.at+1)*d.step - 1 + lag) / d.width // the step's end: rounded up
	}
	// per claimRef (a few per batch) its bucket, and the room of each
	// bucket's IDs; then one pass over the IDs
	index, count := map[int64]int{}, []int{}
	for _, r := range d.refs {
		b := bucket(r)
		i, ok := index[b]
		if !ok {
			i = len(count)
			index[b] = i
			count = append(count, 0)
		}
		r.out, count[i] = i, count[i]+r.n
	}
	all := make([]store.IDKey, d.claims.n)
	out := make([]store.HeldBucket, len(count))
	for b, i := range index {
		out[i] = store.HeldBucket{Bucket: b, IDs: all[:0:count[i]]}
		all = all[count[i]:]
	}
	for _, c := range d.claims.slots {
		if c.ref != 0 {
			h := &out[d.refs[c.ref-1].out]
			h.IDs = append(h.IDs, c.key)
		}
	}
	for k, st := range d.verdicts {
		h := &out[d.refs[d.claims.find(k).ref-1].out]
		if h.Verdicts == nil {
			h.Verdicts = map[store.IDKey][]ranking.Status{}
		}
		h.Verdicts[k] = st
	}
	d.claims, d.verdicts, d.refs = claimTable{}, nil, nil
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

// claimTable maps the IDKeys claimed to their claimRefs: open addressing
// with linear probing in one pointer-free slice, which the collector does
// not scan. An IDKey is SHA-256 output, so its first bytes are the hash.
// A Go map in its place took a tenth of a 1M replay's CPU in its lookups
// (cache misses on its control words) and 0.2 s to make at full size.
type claimTable struct {
	slots   []claimSlot
	n       int   // slots in use
	touched int32 // touch's sum
}

// claimSlot is one entry: ref is the claimRef's index in Decider.refs
// plus one (0: empty).
type claimSlot struct {
	key store.IDKey
	ref int32
}

// newClaimTable returns a table with room for expect keys (at most
// three quarters full).
func newClaimTable(expect int) claimTable {
	size := 1024
	for 3*size < 4*expect {
		size *= 2
	}
	return claimTable{slots: make([]claimSlot, size)}
}

// find returns key's slot, or the empty slot where it goes.
func (t *claimTable) find(key store.IDKey) *claimSlot {
	mask := uint64(len(t.slots) - 1)
	for i := binary.LittleEndian.Uint64(key[:8]) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.ref == 0 || s.key == key {
			return s
		}
	}
}

// touch loads the first slot of each key of cs.
func (t *claimTable) touch(cs []claimReq) {
	mask := uint64(len(t.slots) - 1)
	var sum int32
	for i := range cs {
		sum += t.slots[binary.LittleEndian.Uint64(cs[i].key[:8])&mask].ref
	}
	t.touched = sum // kept, so that the loads are not dropped
}

// added counts a key put in the slot find returned, and doubles the table
// past three quarters full.
func (t *claimTable) added() {
	t.n++
	if 4*t.n <= 3*len(t.slots) {
		return
	}
	old := t.slots
	t.slots = make([]claimSlot, 2*len(old))
	for _, s := range old {
		if s.ref != 0 {
			*t.find(s.key) = s
		}
	}
}
