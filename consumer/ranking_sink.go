package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

// RankingSink is rankd's Sink: it decodes every message with the schema of
// its topic, routes the event to board updates, applies the updates of the
// whole batch with one store.Store.Apply, and maps the store's verdicts
// back to messages.
//
// A message becomes a DeadLetter when it cannot be decoded or routed (the
// reason of its *ingest.PermanentError: decode, validation, too_large,
// future, out_of_range, no_member, expression, no_route) or when the store
// rejects one of its updates (late, out_of_range). A message is
// dead-lettered once, with the first reason found, even when some of its
// updates were applied to other boards (the store applies each update on
// its own merits). A message whose event was applied before (same message
// ID) is a duplicate: it is counted and not dead-lettered, except that a
// rejected update reports its verdict again, so a redelivered late message
// is dead-lettered again.
//
// The router and the store must be built from the same boards (config.Load
// does so): an update for a board the store does not know makes every
// Apply fail, which the consumer retries forever.
type RankingSink struct {
	schemas map[string]*ingest.Schema
	topics  map[string]string
	router  *ingest.Router
	store   Store
	m       *metrics
	now     func() time.Time

	only   map[string]bool // nil: every board
	replay bool            // Apply with marks only (a replay's sink), not ApplyFrom
	log    *slog.Logger

	nApplied, nDups atomic.Int64 // Counts

	decider atomic.Pointer[Decider] // a replay deciding which messages are new (Decide)

	// scratch holds the planScratch of batches done, for later plans. Not a
	// sync.Pool: a pool is emptied by the collector, and a new scratch grows
	// again to the updates of its batches (a batch of gifts routes to about
	// 6.5 updates per message, of likes to 1).
	scratch chan *planScratch
	sorted  sync.Pool // *[]kafka.Message: byPartition's copies of batches done

	notices notices // change notices waiting for their PUBLISH (notice)

	mu        sync.Mutex
	stream    map[partitionKey]streamPos // position after the last applied batch (or where Assigned started it)
	rewinding map[partitionKey]rewind    // partitions re-applying what Redis lost
}

type partitionKey struct {
	topic     string
	partition int
}

// streamPos is a partition's stream time at an offset: the greatest event
// time of the valid messages below next (-1: the offset of the next
// message, whatever it is); record is the position record Redis holds
// there (see store.Position).
type streamPos struct {
	next   int64
	time   time.Time
	record string
}

// NewRankingSink returns a RankingSink. schemas are keyed by topic name
// (config.Config.Schemas); WithTopicMap maps Kafka topics named otherwise.
// Options: WithRegisterer, WithClock, WithTopicMap.
func NewRankingSink(schemas map[string]*ingest.Schema, router *ingest.Router, st Store, opts ...Option) (*RankingSink, error) {
	if router == nil || st == nil {
		return nil, fmt.Errorf("consumer: ranking sink needs a router and a store")
	}
	o := newOptions(opts)
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	if bs, ok := st.(interface{ Boards() []*ranking.Board }); ok {
		m.touchBoards(bs.Boards())
	}
	return &RankingSink{schemas: schemas, topics: o.topics, router: router, store: st, m: m, now: o.now, scratch: make(chan *planScratch, scratchKept),
		only: o.boards, replay: o.replay, log: o.log, stream: map[partitionKey]streamPos{},
		rewinding: map[partitionKey]rewind{}}, nil
}

// Store is what RankingSink needs of a *store.Store (see its Apply,
// ApplyFrom, Positions, GensIntact and StreamTimes for the contracts).
type Store interface {
	Apply(ctx context.Context, evs []store.Event, marks ...store.Mark) (ranking.Result, error)
	ApplyFrom(ctx context.Context, evs []store.Event, spans []store.Span) (ranking.Result, error)
	Positions(ctx context.Context, at []store.Span) ([]store.Position, error)
	GensIntact(ctx context.Context) (bool, error)
	StreamTimes(ctx context.Context, at []store.Mark) ([]time.Time, error)
}

// msgPlan is what decoding and routing made of one message.
type msgPlan struct {
	ev     *ingest.Event // nil when decoding failed
	reason string        // permanent failure, "" if none
	boards []string      // late or out_of_range: every board that rejected it
	err    error
	dupOf  int // index of an earlier message of the batch with the same ID, or -1
	lo, hi int // its updates: ups[lo:hi]
}

// batchPlan is a batch decoded and routed, before the store sees it.
type batchPlan struct {
	sc    *planScratch // where msgs, ups and evs live; nil once released
	msgs  []msgPlan
	ups   []ranking.Update
	evs   []store.Event // one per routed message, over ups
	marks []store.Mark  // stream time of every partition after the batch
	spans []store.Span  // every partition's share of the batch (ApplyFrom)
}

// planRoom is the room for updates a plan keeps before it routes a message:
// more than one message routes to in the example config.
const planRoom = 16

// scratchKept is how many planScratch a RankingSink keeps: more than the
// batches planned at once (the workers, or a replay's partitions applied
// side by side).
const scratchKept = 8

// planScratch is the memory of a batchPlan's messages, updates and events
// and of its ID index, which the plan of a later batch reuses once the
// batch is done (release).
type planScratch struct {
	msgs   []msgPlan
	events []ingest.Event // the decoded messages (Schema.DecodeTo)
	ups    []ranking.Update
	evs    []store.Event
	seen   map[string]int
}

// release gives the memory of p, a batch done with (nothing of it is
// used any more), to the plans of later batches; it clears it first, so
// that it holds nothing of the batch.
func (s *RankingSink) release(p *batchPlan) {
	sc := p.sc
	if sc == nil {
		return
	}
	clear(p.msgs)
	for i := range sc.events {
		sc.events[i].Reset()
	}
	clear(p.ups)
	clear(p.evs)
	clear(sc.seen)
	sc.msgs, sc.ups, sc.evs = p.msgs[:0], p.ups[:0], p.evs[:0]
	*p = batchPlan{}
	select {
	case s.scratch <- sc:
	default: // enough kept
	}
}

// plan decodes and routes msgs into events (one per routed message). It
// touches no server. A message whose ID belongs to an earlier routed
// message of the batch contributes no event: it takes the verdict of that
// one.
//
// start holds the stream time of every partition of msgs at its first
// message; every update gets its partition's stream time before its
// message, and every message that decodes (a valid event) then advances it.
func (s *RankingSink) plan(msgs []kafka.Message, start map[partitionKey]streamPos) batchPlan {
	var sc *planScratch
	select {
	case sc = <-s.scratch:
	default:
	}
	if sc == nil {
		sc = &planScratch{seen: make(map[string]int, len(msgs))} // its slices are sized just below
	}
	// a scratch that served a smaller batch grows here and by doubling
	// (below), rather than append by append (an event routes to 1.3
	// boards in the standard workload, a gift to about 6.5)
	p := batchPlan{sc: sc, msgs: slices.Grow(sc.msgs, len(msgs))[:len(msgs)], ups: slices.Grow(sc.ups, 2*len(msgs)),
		evs: slices.Grow(sc.evs, len(msgs))}
	if len(sc.events) < len(msgs) {
		sc.events = append(sc.events, make([]ingest.Event, len(msgs)-len(sc.events))...)
	}
	seen := sc.seen
	var hdrs []ingest.Header
	pos := make(map[partitionKey]streamPos, len(start))
	for k, v := range start {
		pos[k] = v
	}
	var cur partitionKey
	var curPos streamPos
	flush := func() {
		if cur.topic != "" {
			pos[cur] = curPos
		}
	}
	for i := range msgs {
		m := &msgs[i]
		mp := &p.msgs[i]
		mp.dupOf = -1
		mp.lo, mp.hi = len(p.ups), len(p.ups)
		if k := (partitionKey{m.Topic, m.Partition}); k != cur {
			flush()
			cur, curPos = k, pos[k]
		}
		if curPos.next < 0 {
			curPos.next = m.Offset
		}
		streamTime := curPos.time
		curPos.next = m.Offset + 1
		topic := m.Topic
		if t, ok := s.topics[topic]; ok {
			topic = t
		}
		schema := s.schemas[topic]
		if schema == nil {
			mp.reason, mp.err = ingest.ReasonNoRoute, fmt.Errorf("no schema for topic %q", m.Topic)
			continue
		}
		hdrs = hdrs[:0]
		for _, h := range m.Headers {
			hdrs = append(hdrs, ingest.Header{Key: h.Key, Value: h.Value})
		}
		ev := &sc.events[i]
		if err := schema.DecodeToKept(ev, m.Topic, m.Partition, m.Offset, m.Value, hdrs, m.Time); err != nil {
			mp.reason, mp.err = reasonOf(err), err
			continue
		}
		ev.Topic = topic // routes are keyed by the schema topic; the ID keeps the Kafka topic
		mp.ev = ev
		if ev.Time.After(curPos.time) {
			curPos.time = ev.Time
		}
		if j, dup := seen[ev.ID]; dup {
			mp.dupOf = j
			continue
		}
		if cap(p.ups)-len(p.ups) < planRoom {
			// double: append grows a large slice by a quarter, copying
			// the whole of it each time (a batch of gifts routes to about
			// 6.5 updates per message)
			p.ups = slices.Grow(p.ups, cap(p.ups))
		}
		ups, err := s.router.AppendRoute(p.ups, ev)
		if err != nil {
			// Not applied, so not an event yet: a later message with this
			// ID is judged on its own, as it would be in a later batch.
			mp.reason, mp.err = reasonOf(err), err
			continue
		}
		if s.only != nil {
			kept := ups[:mp.lo]
			for _, u := range ups[mp.lo:] {
				if s.only[u.Board] {
					kept = append(kept, u)
				}
			}
			clear(ups[len(kept):]) // the scratch holds nothing beyond the plan's updates
			ups = kept
		}
		for k := mp.lo; k < len(ups); k++ {
			ups[k].StreamTime = streamTime
		}
		seen[ev.ID] = i
		p.ups = ups
		mp.hi = len(p.ups)
	}
	flush()
	for i := range p.msgs {
		if mp := &p.msgs[i]; mp.hi > mp.lo {
			p.evs = append(p.evs, store.Event{ID: mp.ev.ID, Updates: p.ups[mp.lo:mp.hi:mp.hi]})
		}
	}
	p.marks = make([]store.Mark, 0, len(pos))
	p.spans = make([]store.Span, 0, len(pos))
	for k, v := range pos {
		if st, ok := start[k]; ok {
			p.marks = append(p.marks, store.Mark{Topic: k.topic, Partition: k.partition, Offset: v.next, Time: v.time})
			from := st.next
			if from < 0 { // the first message of the partition in the batch
				from = firstOffset(msgs, k)
			}
			p.spans = append(p.spans, store.Span{Topic: k.topic, Partition: k.partition, From: from, To: v.next,
				FromTime: st.time, ToTime: v.time, Expect: st.record})
		}
	}
	return p
}

// firstOffset returns the offset of the first message of k in msgs.
func firstOffset(msgs []kafka.Message, k partitionKey) int64 {
	for i := range msgs {
		if msgs[i].Topic == k.topic && msgs[i].Partition == k.partition {
			return msgs[i].Offset
		}
	}
	return 0
}

// streamStart returns the position of every partition of msgs at its
// first message: from memory when this sink applied the batch just before
// it (or Assigned placed the partition there), else from Redis (a
// partition taken over without Assigned, a retried batch after a failure):
// its position record when it resumes at that message, else the stream
// time mark at or below it.
func (s *RankingSink) streamStart(ctx context.Context, msgs []kafka.Message) (map[partitionKey]streamPos, error) {
	start := map[partitionKey]streamPos{}
	var missing []store.Span
	s.mu.Lock()
	for i := range msgs {
		k := partitionKey{msgs[i].Topic, msgs[i].Partition}
		if _, ok := start[k]; ok {
			continue
		}
		// A belief at or below the first message: offsets are not dense
		// (transaction markers, compaction), and the check of ApplyFrom
		// catches a stale one.
		if p, ok := s.stream[k]; ok && p.next <= msgs[i].Offset {
			start[k] = p
			continue
		}
		start[k] = streamPos{next: msgs[i].Offset}
		missing = append(missing, store.Span{Topic: k.topic, Partition: k.partition, From: msgs[i].Offset})
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return start, nil
	}
	var ps []store.Position
	if !s.replay {
		var err error
		if ps, err = s.store.Positions(ctx, missing); err != nil {
			return nil, err
		}
	}
	var at []store.Mark
	for i, m := range missing {
		k := partitionKey{m.Topic, m.Partition}
		if ps != nil {
			st := start[k]
			st.record = ps[i].Record
			if off, tm := ps[i].Resume(); ps[i].Exists() && off == m.From {
				st.time = tm
				start[k] = st
				continue
			}
			start[k] = st
		}
		at = append(at, store.Mark{Topic: m.Topic, Partition: m.Partition, Offset: m.From})
	}
	if len(at) == 0 {
		return start, nil
	}
	times, err := s.store.StreamTimes(ctx, at)
	if err != nil {
		return nil, err
	}
	for i, m := range at {
		k := partitionKey{m.Topic, m.Partition}
		st := start[k]
		st.time = times[i]
		start[k] = st
	}
	return start, nil
}

// Observe advances the stream times of the partitions of msgs past them
// without applying anything: a replay that starts after the beginning of
// the log reads the messages before its start this way, so that its
// verdicts equal those of a replay from the beginning.
func (s *RankingSink) Observe(ctx context.Context, msgs []kafka.Message) error {
	start, err := s.streamStart(ctx, msgs)
	if err != nil {
		return fmt.Errorf("reading stream times: %w", err)
	}
	p := s.plan(msgs, start)
	defer s.release(&p)
	s.mu.Lock()
	for _, m := range p.marks {
		s.stream[partitionKey{m.Topic, m.Partition}] = streamPos{next: m.Offset, time: m.Time}
	}
	s.mu.Unlock()
	return nil
}

// reasonOf returns the dead-letter reason of a decode or route error.
// Retarget makes a replay's sink apply to st from now on as a new sink
// would: it forgets the partitions' stream times and its Counts (a replay
// starting over in another generation; the metrics keep counting). Call it
// between Applies.
func (s *RankingSink) Retarget(st Store) {
	s.mu.Lock()
	s.store = st
	s.stream, s.rewinding = map[partitionKey]streamPos{}, map[partitionKey]rewind{}
	s.mu.Unlock()
	s.nApplied.Store(0)
	s.nDups.Store(0)
}

// Decide makes a replay's sink decide which messages are new with d, in
// memory, instead of the dedupe in Redis (nil: the dedupe in Redis again);
// see Decider for when a replay may. Call it between Applies.
func (s *RankingSink) Decide(d *Decider) { s.decider.Store(d) }

// applyDecided applies p's events as decided: the first delivery of an ID
// (in d, over every batch) is applied without a lookup, and a later one
// gets the statuses Redis would have given it (duplicate, or its first
// delivery's late or out-of-range verdict repeated), once the batch with
// the first delivery has applied. A batch resolves its own messages before
// it waits for others', so batches waiting for each other cannot block.
// The updates of boards d folds go to its Folder instead of the store.
func (s *RankingSink) applyDecided(ctx context.Context, d *Decider, msgs []kafka.Message, p *batchPlan) (ranking.Result, error) {
	type later struct {
		key    store.IDKey
		first  *claimBatch
		lo, hi int
	}
	batch := &claimBatch{done: make(chan struct{})}
	var (
		laters []later
		keys   = make([]store.IDKey, 0, len(p.msgs))
		mine   = make([]int, 0, len(p.msgs)) // the messages this batch applies
		folds  []int                         // the updates of theirs that d folds
		sent   = make([]int, 0, len(p.ups))  // the others, in the order of evs
		rests  []ranking.Update              // the events' updates that d does not fold (their Updates)
	)
	if d.fold != nil {
		folds = make([]int, 0, len(p.ups))
		// the updates that do not fold, of events some of whose updates
		// fold (a gift: one of seven): when rests grows, the events'
		// Updates before stay in the old array, unchanged
		rests = make([]ranking.Update, 0, len(p.ups)/4+1)
	}
	evs := make([]store.Event, 0, len(p.evs))
	var (
		curPart partitionKey // the partition of the message before, and its index in d
		curIdx  int32
		claims  = make([]claimReq, 0, len(p.msgs)) // the messages with updates, in order
	)
	for i := range p.msgs {
		if mp := &p.msgs[i]; mp.hi > mp.lo { // else no update: not sent, not held (as without a Decider)
			if k := (partitionKey{msgs[i].Topic, msgs[i].Partition}); k != curPart {
				curPart, curIdx = k, d.part(k)
			}
			claims = append(claims, claimReq{key: store.KeyOf(mp.ev.ID), part: curIdx, t: msgs[i].Time})
		}
	}
	d.claimAll(claims, batch)
	for i, ci := 0, 0; i < len(p.msgs); i++ {
		mp := &p.msgs[i]
		if mp.hi <= mp.lo {
			continue
		}
		c := &claims[ci]
		ci++
		key := c.key
		if c.first != nil {
			laters = append(laters, later{key, c.first, mp.lo, mp.hi})
			continue
		}
		keys, mine = append(keys, key), append(mine, i)
		ups := p.ups[mp.lo:mp.hi:mp.hi]
		if d.fold != nil {
			// the updates the folder takes leave the event; the others stay
			// one event, in order: the event's own updates when none folds
			s0, f0 := len(sent), len(folds)
			for k := mp.lo; k < mp.hi; k++ {
				if d.fold.Foldable(p.ups[k].Board) {
					folds = append(folds, k)
				} else {
					sent = append(sent, k)
				}
			}
			switch {
			case len(sent) == s0:
				continue
			case len(folds) > f0:
				r0 := len(rests)
				for _, k := range sent[s0:] {
					rests = append(rests, p.ups[k])
				}
				ups = rests[r0:len(rests):len(rests)]
			}
		} else {
			for k := mp.lo; k < mp.hi; k++ {
				sent = append(sent, k)
			}
		}
		evs = append(evs, store.Event{ID: mp.ev.ID, Updates: ups, Decided: true})
	}
	r, err := s.store.Apply(ctx, evs, p.marks...)
	if err == nil && len(folds) > 0 {
		out := make([]ranking.Status, len(folds))
		if err = d.fold.FoldAt(p.ups, folds, out); err == nil {
			r.Status = append(r.Status, out...)
			r.Repeated = append(r.Repeated, make([]bool, len(out))...)
			sent = append(sent, folds...)
		}
	}
	if err != nil {
		d.fail(batch, err)
		return r, err
	}
	res := ranking.Result{Status: make([]ranking.Status, len(p.ups)), Repeated: make([]bool, len(p.ups))}
	for j, k := range sent {
		res.Status[k] = r.Status[j]
	}
	verdicts := make([][]ranking.Status, len(mine))
	for j, i := range mine {
		mp := &p.msgs[i]
		if got := res.Status[mp.lo:mp.hi]; slices.ContainsFunc(got, func(st ranking.Status) bool { return st != ranking.StatusApplied }) {
			verdicts[j] = slices.Clone(got)
		}
	}
	d.resolve(batch, keys, verdicts)
	for _, l := range laters {
		orig, err := d.verdict(ctx, l.key, l.first)
		if err != nil {
			return ranking.Result{}, err
		}
		for i := l.lo; i < l.hi; i++ {
			res.Status[i], res.Repeated[i] = repeatOf(orig, i-l.lo)
		}
	}
	return res, nil
}

func reasonOf(err error) string {
	if r := ingest.Reason(err); r != "" {
		return r
	}
	return ingest.ReasonValidation
}

// Apply implements Sink. A live sink (not WithReplay) applies with
// store.Store.ApplyFrom: when Redis holds other positions than the batch
// starts from, it returns a *RepositionError (see reposition).
func (s *RankingSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	if sorted := s.byPartition(msgs); sorted != nil {
		defer func() { clear(*sorted); s.sorted.Put(sorted) }()
		msgs = *sorted
	}
	start, err := s.streamStart(ctx, msgs)
	if err != nil {
		s.m.redisErrors.Inc()
		return nil, fmt.Errorf("reading stream times: %w", err)
	}
	p := s.plan(msgs, start)
	defer s.release(&p)
	var res ranking.Result
	if d := s.decider.Load(); s.replay && d != nil {
		res, err = s.applyDecided(ctx, d, msgs, &p)
	} else if s.replay {
		res, err = s.store.Apply(ctx, p.evs, p.marks...)
	} else {
		res, err = s.store.ApplyFrom(ctx, p.evs, p.spans)
		if pe, ok := store.IsPositionError(err); ok {
			return nil, s.reposition(pe, p.spans)
		}
	}
	if err != nil {
		s.m.redisErrors.Inc()
		return nil, fmt.Errorf("applying %d updates of %d messages: %w", len(p.ups), len(msgs), err)
	}
	s.applied(p)
	status, repeated := res.Status, res.Repeated
	now := s.now()
	applied := map[string]int{}
	var dead []DeadLetter
	for i := range p.msgs {
		mp := &p.msgs[i]
		if mp.reason == "" && mp.dupOf >= 0 {
			orig := &p.msgs[mp.dupOf]
			if orig.reason == ingest.ReasonLate || orig.reason == ingest.ReasonOutOfRange {
				mp.reason, mp.err, mp.boards = orig.reason, orig.err, orig.boards
			} else {
				s.m.duplicates.Inc()
				s.nDups.Add(1)
				continue
			}
		}
		if mp.reason == "" {
			dup, visible := false, false
			var late, oor []string // boards that rejected the message
			var oorErr error
			for k := mp.lo; k < mp.hi; k++ {
				u := &p.ups[k]
				switch status[k] {
				case ranking.StatusApplied:
					applied[u.Board]++
					visible = true
				case ranking.StatusDuplicate:
					dup = true
				case ranking.StatusLate:
					if !repeated[k] {
						s.m.late.WithLabelValues(u.Board).Inc()
					}
					late = append(late, u.Board)
				case ranking.StatusOutOfRange:
					if !repeated[k] {
						s.m.outOfRange.WithLabelValues(u.Board).Inc()
					}
					if oorErr == nil {
						oorErr = fmt.Errorf("value %d of member %q leaves the board's exact range", u.Value, u.Member)
					}
					oor = append(oor, u.Board)
				}
			}
			if len(late) > 0 || len(oor) > 0 {
				mp.boards = append(late, oor...)
				var parts []string
				if len(late) > 0 {
					mp.reason = ingest.ReasonLate
					parts = append(parts, fmt.Sprintf("late on %s: the period of %s was final for its partition",
						strings.Join(late, ","), mp.ev.Time.UTC().Format(time.RFC3339Nano)))
				}
				if len(oor) > 0 {
					if mp.reason == "" {
						mp.reason = ingest.ReasonOutOfRange
					}
					parts = append(parts, fmt.Sprintf("out of range on %s: %v", strings.Join(oor, ","), oorErr))
				}
				if n := mp.hi - mp.lo - len(mp.boards); n > 0 {
					parts = append(parts, fmt.Sprintf("its %d other updates were applied (or were duplicates)", n))
				}
				mp.err = errors.New(strings.Join(parts, "; "))
			}
			if dup {
				s.m.duplicates.Inc()
				s.nDups.Add(1)
			}
			if visible {
				s.m.eventLag.WithLabelValues(msgs[i].Topic).Observe(now.Sub(mp.ev.Time).Seconds())
			}
		}
		if mp.reason != "" {
			dead = append(dead, DeadLetter{Msg: msgs[i], Reason: mp.reason, Err: mp.err, Boards: mp.boards})
		}
	}
	for board, n := range applied {
		s.m.sinkUpdates.WithLabelValues(board).Add(float64(n))
		s.nApplied.Add(int64(n))
	}
	s.notice(applied)
	return dead, nil
}

// changePublisher is a Store that tells the API servers which boards a
// batch changed, so that their caches read them again (store.Store).
type changePublisher interface {
	PublishChanges(ctx context.Context, boards []string) error
}

// notice hands the boards a live batch changed to the notice publisher
// (a replay's writes are not served until its switch, which notices every
// board). A notice is a hint, so it never holds up the batch's commit: it
// is published off the apply path, and when it fails the batch stays
// applied and the caches serve the boards until their TTL.
func (s *RankingSink) notice(applied map[string]int) {
	pub, ok := s.store.(changePublisher)
	if !ok || s.replay || len(applied) == 0 {
		return
	}
	n := &s.notices
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending == nil {
		n.pending = map[string]bool{}
	}
	for b := range applied {
		n.pending[b] = true
	}
	if !n.running {
		n.running = true
		go s.publishNotices(pub)
	}
}

// noticeTimeout bounds one PUBLISH of change notices; a Redis that does not
// answer within it costs those notices (counted), never the apply path.
const noticeTimeout = 2 * time.Second

// notices are the boards changed by applied batches whose notice is not
// published yet. At most one goroutine publishes them (running), one
// PUBLISH at a time, each naming every board changed since the last: while
// a PUBLISH waits for Redis, later batches' boards gather into the next.
type notices struct {
	mu      sync.Mutex
	pending map[string]bool
	running bool
}

// publishNotices publishes the pending notices until none are left.
func (s *RankingSink) publishNotices(pub changePublisher) {
	n := &s.notices
	for {
		n.mu.Lock()
		if len(n.pending) == 0 {
			n.running = false
			n.mu.Unlock()
			return
		}
		boards := make([]string, 0, len(n.pending))
		for b := range n.pending {
			boards = append(boards, b)
		}
		clear(n.pending)
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), noticeTimeout)
		err := pub.PublishChanges(ctx, boards)
		cancel()
		if err != nil {
			s.m.noticeErrors.Inc()
			s.log.Debug("change notice not published", "boards", len(boards), "err", err)
		}
	}
}

// byPartition returns a copy of msgs with the messages of each partition
// together (topic, then partition), each partition's in their order, or
// nil when they already are. A worker's batch interleaves its partitions'
// fetches; the store cuts a batch into calls in event order, and a call
// pays its reads and writes per stream it touches, so a call of one
// topic's events touches few streams (one board of likes) where a call of
// the mix touches every board's. Any such order is one the fetches could
// have delivered (only a partition's own order is given), so verdicts are
// those of some delivery, as before.
func (s *RankingSink) byPartition(msgs []kafka.Message) *[]kafka.Message {
	cmp := func(a, b partitionKey) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return a.partition - b.partition
	}
	// the batch's partitions and their message counts (a batch holds a
	// worker's few partitions: a linear search beats a map)
	type part struct {
		k     partitionKey
		n, at int
	}
	var buf [32]part
	parts := buf[:0]
	sorted, last := true, -1
	for i := range msgs {
		k := partitionKey{msgs[i].Topic, msgs[i].Partition}
		j := -1
		if last >= 0 && parts[last].k == k {
			j = last
		} else {
			for x := range parts {
				if parts[x].k == k {
					j = x
					break
				}
			}
			if j < 0 {
				parts = append(parts, part{k: k})
				j = len(parts) - 1
			}
			if last >= 0 && cmp(parts[last].k, k) > 0 || j < len(parts)-1 {
				sorted = false // back to a partition seen before, or an earlier one
			}
		}
		parts[j].n++
		last = j
	}
	if sorted {
		return nil
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp(a.k, b.k) })
	for i := 1; i < len(parts); i++ {
		parts[i].at = parts[i-1].at + parts[i-1].n
	}
	out, _ := s.sorted.Get().(*[]kafka.Message)
	if out == nil {
		out = new([]kafka.Message)
	}
	if cap(*out) < len(msgs) {
		*out = make([]kafka.Message, len(msgs))
	}
	*out = (*out)[:len(msgs)]
	// each message to its partition's next slot: one copy each, in order
	for i := range msgs {
		k := partitionKey{msgs[i].Topic, msgs[i].Partition}
		j := 0
		for parts[j].k != k {
			j++
		}
		(*out)[parts[j].at] = msgs[i]
		parts[j].at++
	}
	return out
}
