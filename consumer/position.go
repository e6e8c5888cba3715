package consumer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rankd/rankd/ranking/store"
)

// The sink owns its position: see the comment at the top of
// ranking/store/position.go. RankingSink implements Positioner with the
// position records the store keeps beside the effects.

// rewind is a partition re-applying offsets that Redis lost.
type rewind struct {
	until int64     // where the partition stood before the loss
	since time.Time // when the loss was found
}

// Assigned implements Positioner: each partition resumes where Redis says
// it stands when that is behind the committed offset: Redis lost applied
// writes (a rewind: logged, counted, and exact, because the dedupe keys of
// the lost writes were lost with them). Where Redis is ahead (batches
// applied but not committed), it resumes at the committed offset, as a
// consumer without positions would: the batches are applied again as
// duplicates and their dead letters written again (at least once), which
// a crash between the apply and the dead letters would otherwise lose. A partition whose offsets were committed but
// of which Redis holds no position, or with the boards' generation
// pointers gone, is halted: Redis lost everything it knew of it, and only
// `rankd replay` can rebuild the boards. A partition neither committed nor
// known to Redis is new: it starts at the group's start offset.
func (s *RankingSink) Assigned(ctx context.Context, as []Assignment) ([]Resume, error) {
	at := make([]store.Span, len(as))
	for i, a := range as {
		at[i] = store.Span{Topic: a.Topic, Partition: a.Partition}
	}
	ps, err := s.store.Positions(ctx, at)
	if err != nil {
		return nil, fmt.Errorf("reading positions: %w", err)
	}
	intact, err := s.store.GensIntact(ctx)
	if err != nil {
		return nil, err
	}
	// Ahead of the committed offset, the partition is read again from the
	// committed offset: those batches are applied (their updates are
	// duplicates now), but their dead letters may not have been written.
	var ahead []store.Mark
	for i, a := range as {
		if off, _ := ps[i].Resume(); intact && ps[i].Exists() && a.Committed >= 0 && off > a.Committed {
			ahead = append(ahead, store.Mark{Topic: a.Topic, Partition: a.Partition, Offset: a.Committed})
		}
	}
	var times []time.Time
	if len(ahead) > 0 {
		if times, err = s.store.StreamTimes(ctx, ahead); err != nil {
			return nil, fmt.Errorf("reading stream times: %w", err)
		}
	}
	out := make([]Resume, len(as))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range as {
		k := partitionKey{a.Topic, a.Partition}
		p := ps[i]
		committed := a.Committed >= 0
		off, tm := p.Resume()
		switch {
		case !intact:
			out[i].Halt = "redis lost the boards' generation pointers (its gens hash): rebuild the boards with rankd replay"
		case !p.Exists() && committed:
			out[i].Halt = fmt.Sprintf("the group committed offset %d, but redis holds no position for the partition: redis lost its writes (a FLUSHALL, a restart without persistence); rebuild the boards with rankd replay", a.Committed)
		case !p.Exists() || !committed:
			// New, or a group that never committed (its offsets expired, or
			// it was killed before its first commit): from the group's start
			// offset; what Redis holds of it is applied again as duplicates
			// and its dead letters written again.
			s.stream[k] = streamPos{next: -1, record: p.Record}
			out[i].Offset = a.Committed
		case committed && off > a.Committed:
			j := slices.IndexFunc(ahead, func(m store.Mark) bool { return m.Topic == a.Topic && m.Partition == a.Partition })
			s.stream[k] = streamPos{next: a.Committed, time: times[j], record: p.Record}
			out[i].Offset = a.Committed
		default:
			s.stream[k] = streamPos{next: off, time: tm, record: p.Record}
			out[i].Offset = off
			if committed && off < a.Committed {
				s.lost(k, off, a.Committed, "the group committed offset "+fmt.Sprint(a.Committed))
			}
		}
		if out[i].Halt != "" {
			delete(s.stream, k)
		}
	}
	return out, nil
}

// lost records that Redis lost the applied offsets [from, until) of k;
// s.mu is held.
func (s *RankingSink) lost(k partitionKey, from, until int64, why string) {
	if r, ok := s.rewinding[k]; ok && r.until >= until {
		return // found before (another worker of this process had the partition), being re-applied
	}
	s.m.rewinds.Inc()
	s.m.rewound.Add(float64(until - from))
	if f, ok := s.store.(interface{ Forget() }); ok {
		f.Forget() // its caches of Redis state may hold what Redis lost
	}
	s.log.Error("redis lost applied writes; re-applying them from kafka", "topic", k.topic, "partition", k.partition,
		"from_offset", from, "to_offset", until, "evidence", why)
	s.rewinding[k] = rewind{until: until, since: s.now()}
}

// reposition turns the store's refusal into a RepositionError: each
// partition whose record is behind the batch resumes where Redis says
// (Redis lost writes), one whose record is at or ahead of its start is
// retried from its start with that record, and a partition Redis forgot,
// or every partition when the generation pointers are gone, halts.
func (s *RankingSink) reposition(pe *store.PositionError, spans []store.Span) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	re := &RepositionError{}
	if pe.Gens != pe.GensExpected {
		for _, sp := range spans {
			delete(s.stream, partitionKey{sp.Topic, sp.Partition})
			re.Moves = append(re.Moves, Move{Topic: sp.Topic, Partition: sp.Partition,
				Halt: fmt.Sprintf("redis lost the boards' generation pointers (its gens hash: counter %s, %s seen): rebuild the boards with rankd replay", pe.Gens, pe.GensExpected)})
		}
		return re
	}
	for i, sp := range spans {
		p := pe.Positions[i]
		k := partitionKey{sp.Topic, sp.Partition}
		if p.Record == sp.Expect {
			continue
		}
		if !p.Exists() {
			delete(s.stream, k)
			re.Moves = append(re.Moves, Move{Topic: sp.Topic, Partition: sp.Partition,
				Halt: fmt.Sprintf("redis lost the partition's position (it stood at offset %d): redis lost its writes (a FLUSHALL, a restart without persistence); rebuild the boards with rankd replay", sp.From)})
			continue
		}
		off, tm := p.Resume()
		if off >= sp.From {
			// The same start (a call of an earlier attempt), or ahead
			// (another consumer applied further): the batch is applied
			// again from its start, expecting Redis's record; what was
			// applied is a duplicate, and its dead letters are written.
			s.stream[k] = streamPos{next: sp.From, time: sp.FromTime, record: p.Record}
			continue
		}
		s.stream[k] = streamPos{next: off, time: tm, record: p.Record}
		s.lost(k, off, sp.From, "redis holds "+p.String())
		re.Moves = append(re.Moves, Move{Topic: sp.Topic, Partition: sp.Partition, Offset: off})
	}
	if len(re.Moves) == 0 {
		return fmt.Errorf("applying batch: %w (retrying with redis's records)", pe)
	}
	return re
}

// applied records the positions a batch left.
func (s *RankingSink) applied(p batchPlan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range p.marks {
		k := partitionKey{m.Topic, m.Partition}
		st := streamPos{next: m.Offset, time: m.Time}
		if !s.replay {
			st.record = p.spans[i].Left
		}
		s.stream[k] = st
		if r, ok := s.rewinding[k]; ok && m.Offset >= r.until {
			d := s.now().Sub(r.since)
			s.m.rewindDur.Observe(d.Seconds())
			s.log.Info("re-applied what redis lost", "topic", k.topic, "partition", k.partition, "offset", m.Offset, "took", d.Round(time.Millisecond))
			delete(s.rewinding, k)
		}
	}
}

// Position returns the sink's position in a partition, after the last
// batch it applied or observed: the offset after it and the stream time
// there. ok is false for a partition it has not seen.
func (s *RankingSink) Position(topic string, partition int) (Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.stream[partitionKey{topic, partition}]
	return Position{Offset: p.next, Time: p.time}, ok
}

// Position is where a sink stands in a partition (RankingSink.Position).
type Position struct {
	Offset int64
	Time   time.Time
}

// Counts returns the board updates this sink applied and the duplicate
// messages it skipped since it was made.
func (s *RankingSink) Counts() (applied, duplicates int64) {
	return s.nApplied.Load(), s.nDups.Load()
}
