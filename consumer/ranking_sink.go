package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/ranking"
)

// RankingSink is rankd's Sink: it decodes every message with the schema of
// its topic, routes the event to board updates, applies the updates of the
// whole batch with one ranking.Store.Apply, and maps the store's verdicts
// back to messages.
//
// A message becomes a DeadLetter when it cannot be decoded or routed (the
// reason of its *ranking.PermanentError: decode, validation, too_large,
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
	schemas map[string]*ranking.Schema
	topics  map[string]string
	router  *ranking.Router
	store   *ranking.Store
	m       *metrics
	now     func() time.Time
}

// NewRankingSink returns a RankingSink. schemas are keyed by topic name
// (config.Config.Schemas); WithTopicMap maps Kafka topics named otherwise.
// Options: WithRegisterer, WithClock, WithTopicMap.
func NewRankingSink(schemas map[string]*ranking.Schema, router *ranking.Router, store *ranking.Store, opts ...Option) (*RankingSink, error) {
	if router == nil || store == nil {
		return nil, fmt.Errorf("consumer: ranking sink needs a router and a store")
	}
	o := newOptions(opts)
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	return &RankingSink{schemas: schemas, topics: o.topics, router: router, store: store, m: m, now: o.now}, nil
}

// msgPlan is what decoding and routing made of one message.
type msgPlan struct {
	ev     *ranking.Event // nil when decoding failed
	reason string         // permanent failure, "" if none
	err    error
	dupOf  int // index of an earlier message of the batch with the same ID, or -1
	lo, hi int // its updates: ups[lo:hi]
}

// batchPlan is a batch decoded and routed, before the store sees it.
type batchPlan struct {
	msgs []msgPlan
	ups  []ranking.Update
}

// plan decodes and routes msgs. It touches no server. A message whose ID
// belongs to an earlier routed message of the batch contributes no updates:
// it takes the verdict of that one (Store.Apply treats consecutive updates
// with one MsgID as one event, so two such messages must never be adjacent).
func (s *RankingSink) plan(msgs []kafka.Message) batchPlan {
	p := batchPlan{msgs: make([]msgPlan, len(msgs)), ups: make([]ranking.Update, 0, 4*len(msgs))}
	seen := make(map[string]int, len(msgs))
	var hdrs []ranking.Header
	for i := range msgs {
		m := &msgs[i]
		mp := &p.msgs[i]
		mp.dupOf = -1
		mp.lo, mp.hi = len(p.ups), len(p.ups)
		topic := m.Topic
		if t, ok := s.topics[topic]; ok {
			topic = t
		}
		schema := s.schemas[topic]
		if schema == nil {
			mp.reason, mp.err = ranking.ReasonNoRoute, fmt.Errorf("no schema for topic %q", m.Topic)
			continue
		}
		hdrs = hdrs[:0]
		for _, h := range m.Headers {
			hdrs = append(hdrs, ranking.Header{Key: h.Key, Value: h.Value})
		}
		ev, err := schema.Decode(m.Topic, m.Partition, m.Offset, m.Value, hdrs, m.Time)
		if err != nil {
			mp.reason, mp.err = reasonOf(err), err
			continue
		}
		ev.Topic = topic // routes are keyed by the schema topic; the ID keeps the Kafka topic
		mp.ev = ev
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
		seen[ev.ID] = i
		p.ups = ups
		mp.hi = len(p.ups)
	}
	return p
}

// reasonOf returns the dead-letter reason of a decode or route error.
func reasonOf(err error) string {
	if r := ranking.Reason(err); r != "" {
		return r
	}
	return ranking.ReasonValidation
}

// Apply implements Sink.
func (s *RankingSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	p := s.plan(msgs)
	var status []ranking.Status
	if len(p.ups) > 0 {
		res, err := s.store.Apply(ctx, p.ups)
		if err != nil {
			s.m.redisErrors.Inc()
			return nil, fmt.Errorf("applying %d updates of %d messages: %w", len(p.ups), len(msgs), err)
		}
		status = res.Status
	}
	now := s.now()
	applied := map[string]int{}
	var dead []DeadLetter
	for i := range p.msgs {
		mp := &p.msgs[i]
		if mp.reason == "" && mp.dupOf >= 0 {
			orig := &p.msgs[mp.dupOf]
			if orig.reason == ranking.ReasonLate || orig.reason == ranking.ReasonOutOfRange {
				mp.reason, mp.err = orig.reason, orig.err
			} else {
				s.m.duplicates.Inc()
				continue
			}
		}
		if mp.reason == "" {
			dup, visible := false, false
			for k := mp.lo; k < mp.hi; k++ {
				u := &p.ups[k]
				switch status[k] {
				case ranking.StatusApplied:
					applied[u.Board]++
					visible = true
				case ranking.StatusDuplicate:
					dup = true
				case ranking.StatusLate:
					s.m.late.WithLabelValues(u.Board).Inc()
					if mp.reason == "" {
						mp.reason, mp.err = ranking.ReasonLate, fmt.Errorf("board %q: the period of %s is sealed",
							u.Board, u.Time.UTC().Format(time.RFC3339Nano))
					}
				case ranking.StatusOutOfRange:
					s.m.outOfRange.WithLabelValues(u.Board).Inc()
					if mp.reason == "" {
						mp.reason, mp.err = ranking.ReasonOutOfRange, fmt.Errorf("board %q: value %d of member %q leaves the board's exact range",
							u.Board, u.Value, u.Member)
					}
				}
			}
			if dup {
				s.m.duplicates.Inc()
			}
			if visible {
				s.m.eventLag.WithLabelValues(msgs[i].Topic).Observe(now.Sub(mp.ev.Time).Seconds())
			}
		}
		if mp.reason != "" {
			dead = append(dead, DeadLetter{Msg: msgs[i], Reason: mp.reason, Err: mp.err})
		}
	}
	for board, n := range applied {
		s.m.sinkUpdates.WithLabelValues(board).Add(float64(n))
	}
	return dead, nil
}
