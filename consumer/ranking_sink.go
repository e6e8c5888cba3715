package consumer

import (
	"context"
	"errors"
	"fmt"
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

	only   map[string]bool       // nil: every board
	behind atomic.Pointer[error] // set while Redis is behind Kafka (CheckCommitted)

	mu     sync.Mutex
	stream map[partitionKey]streamPos // stream time after the last applied batch
}

type partitionKey struct {
	topic     string
	partition int
}

// streamPos is a partition's stream time at an offset: the greatest event
// time of the valid messages below next.
type streamPos struct {
	next int64
	time time.Time
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
	return &RankingSink{schemas: schemas, topics: o.topics, router: router, store: st, m: m, now: o.now,
		only: o.boards, stream: map[partitionKey]streamPos{}}, nil
}

// Store is what RankingSink needs of a *store.Store (see its Apply and
// StreamTimes for the contracts).
type Store interface {
	Apply(ctx context.Context, evs []store.Event, marks ...store.Mark) (ranking.Result, error)
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
	msgs  []msgPlan
	ups   []ranking.Update
	evs   []store.Event // one per routed message, over ups
	marks []store.Mark  // stream time of every partition after the batch
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
	p := batchPlan{msgs: make([]msgPlan, len(msgs)), ups: make([]ranking.Update, 0, 4*len(msgs))}
	seen := make(map[string]int, len(msgs))
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
		ev, err := schema.Decode(m.Topic, m.Partition, m.Offset, m.Value, hdrs, m.Time)
		if err != nil {
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
	for k, v := range pos {
		if _, ok := start[k]; ok {
			p.marks = append(p.marks, store.Mark{Topic: k.topic, Partition: k.partition, Offset: v.next, Time: v.time})
		}
	}
	return p
}

// streamStart returns the stream time of every partition of msgs at its
// first message: from memory when this sink applied the batch just before
// it, else from the marks in Redis (a partition taken over, a restart, a
// retried batch after a failure).
func (s *RankingSink) streamStart(ctx context.Context, msgs []kafka.Message) (map[partitionKey]streamPos, error) {
	start := map[partitionKey]streamPos{}
	var missing []store.Mark
	s.mu.Lock()
	for i := range msgs {
		k := partitionKey{msgs[i].Topic, msgs[i].Partition}
		if _, ok := start[k]; ok {
			continue
		}
		if p, ok := s.stream[k]; ok && p.next == msgs[i].Offset {
			start[k] = p
			continue
		}
		start[k] = streamPos{next: msgs[i].Offset}
		missing = append(missing, store.Mark{Topic: k.topic, Partition: k.partition, Offset: msgs[i].Offset})
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return start, nil
	}
	times, err := s.store.StreamTimes(ctx, missing)
	if err != nil {
		return nil, err
	}
	for i, m := range missing {
		start[partitionKey{m.Topic, m.Partition}] = streamPos{next: m.Offset, time: times[i]}
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
	s.mu.Lock()
	for _, m := range p.marks {
		s.stream[partitionKey{m.Topic, m.Partition}] = streamPos{next: m.Offset, time: m.Time}
	}
	s.mu.Unlock()
	return nil
}

// reasonOf returns the dead-letter reason of a decode or route error.
func reasonOf(err error) string {
	if r := ingest.Reason(err); r != "" {
		return r
	}
	return ingest.ReasonValidation
}

// Apply implements Sink.
func (s *RankingSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	if err := s.behind.Load(); err != nil {
		return nil, *err
	}
	start, err := s.streamStart(ctx, msgs)
	if err != nil {
		s.m.redisErrors.Inc()
		return nil, fmt.Errorf("reading stream times: %w", err)
	}
	p := s.plan(msgs, start)
	res, err := s.store.Apply(ctx, p.evs, p.marks...)
	if err != nil {
		s.m.redisErrors.Inc()
		return nil, fmt.Errorf("applying %d updates of %d messages: %w", len(p.ups), len(msgs), err)
	}
	s.mu.Lock()
	for _, m := range p.marks {
		s.stream[partitionKey{m.Topic, m.Partition}] = streamPos{next: m.Offset, time: m.Time}
	}
	s.mu.Unlock()
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
	}
	return dead, nil
}
