package oracle

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
)

// LogMessage is one message of the log, as Kafka stores it.
type LogMessage struct {
	Topic     string
	Partition int
	Offset    int64
	Value     []byte
	Headers   []ingest.Header
	Time      time.Time // the message timestamp
}

// Where names a message of the log: "topic/partition/offset".
func (m LogMessage) Where() string { return fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset) }

// LogResult is what FromLog makes of a log.
type LogResult struct {
	Oracle   *Oracle
	Messages int // messages read
	Applied  int // board updates applied
	// Rejected maps every message that rejected an update as late or out
	// of range (Where) to its reason: the first delivery's verdict, and a
	// duplicate's repeated verdict.
	Rejected map[string]string
	// Invalid maps every message that did not decode or route to its
	// reason.
	Invalid map[string]string
	// Explain says what the oracle saw of the message at where (ID, event
	// time, its partition's stream time before it, the statuses of its
	// updates), for a failure's message.
	Explain func(where string) string
	// StreamTime returns a partition's stream time before offset: the
	// greatest event time of its messages that decoded, at lower offsets
	// (zero: none), as the consumer's stream time marks must hold it.
	StreamTime func(topic string, partition int, offset int64) time.Time
}

// Log is what FromLog needs to decode and route messages: the schemas by
// schema topic, TopicMap from Kafka topics to schema topics (a topic not in
// it is its own schema topic), and the router.
type Log struct {
	Schemas  map[string]*ingest.Schema
	TopicMap map[string]string
	Router   *ingest.Router
	// Apply, when set, selects the messages that are applied; the others
	// (a replay's messages before its start) only advance their
	// partition's stream time.
	Apply func(LogMessage) bool
}

// FromLog recomputes every board from the log, independently of the
// consumer: messages are taken partition by partition (in topic, then
// partition order) and in offset order within a partition, decoded, routed
// and applied one message at a time. Each partition's stream time is
// computed here: the greatest event time of the messages that decoded, at
// lower offsets of the partition; every update of a message carries it, so
// the oracle judges lateness per partition as the store must. Messages
// that fail to decode or route are recorded in Invalid and skipped.
//
// The result equals any interleaving of the partitions as long as one
// message ID never appears in two partitions with different verdicts (the
// order across partitions decides which copy is first).
func (l Log) FromLog(boards []*ranking.Board, log []LogMessage) LogResult {
	msgs := slices.Clone(log)
	slices.SortStableFunc(msgs, func(a, b LogMessage) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	res := LogResult{Oracle: New(boards), Messages: len(msgs), Rejected: map[string]string{}, Invalid: map[string]string{}}
	type tp struct {
		topic     string
		partition int
	}
	stream := map[tp]time.Time{}
	type step struct { // a partition's stream time after the message at off
		off int64
		st  time.Time
	}
	steps := map[tp][]step{}
	res.StreamTime = func(topic string, partition int, offset int64) time.Time {
		ss := steps[tp{topic, partition}]
		i, _ := slices.BinarySearchFunc(ss, offset, func(s step, off int64) int { return cmp.Compare(s.off, off) })
		if i == 0 {
			return time.Time{}
		}
		return ss[i-1].st
	}
	seen := map[string]string{}
	firstAt := map[string]string{} // message ID -> where its first copy is
	res.Explain = func(where string) string {
		if e, ok := seen[where]; ok {
			return e
		}
		return "nothing (not in the log, or not applied)"
	}
	for _, m := range msgs {
		topic := m.Topic
		if t, ok := l.TopicMap[topic]; ok {
			topic = t
		}
		schema := l.Schemas[topic]
		if schema == nil {
			res.Invalid[m.Where()] = ingest.ReasonNoRoute
			continue
		}
		ev, err := schema.Decode(m.Topic, m.Partition, m.Offset, m.Value, m.Headers, m.Time)
		if err != nil {
			res.Invalid[m.Where()] = reason(err)
			continue
		}
		k := tp{m.Topic, m.Partition}
		st := stream[k]
		if ev.Time.After(st) {
			stream[k] = ev.Time
		}
		steps[k] = append(steps[k], step{m.Offset, stream[k]})
		if l.Apply != nil && !l.Apply(m) {
			continue
		}
		ev.Topic = topic
		ups, err := l.Router.Route(ev)
		if err != nil {
			res.Invalid[m.Where()] = reason(err)
			continue
		}
		for i := range ups {
			ups[i].StreamTime = st
		}
		statuses := res.Oracle.Apply(ups)
		if _, ok := firstAt[ev.ID]; !ok {
			firstAt[ev.ID] = m.Where()
		}
		first := ""
		if f := firstAt[ev.ID]; f != m.Where() {
			first = fmt.Sprintf(" (first at %s: %s)", f, seen[f])
		}
		seen[m.Where()] = fmt.Sprintf("id %s%s, event time %s, stream time before it %s, statuses %v",
			ev.ID, first, ev.Time.UTC().Format(time.RFC3339Nano), st.UTC().Format(time.RFC3339Nano), statuses)
		for _, s := range statuses {
			switch s {
			case ranking.StatusApplied:
				res.Applied++
			case ranking.StatusLate:
				res.Rejected[m.Where()] = ingest.ReasonLate
			case ranking.StatusOutOfRange:
				if res.Rejected[m.Where()] == "" {
					res.Rejected[m.Where()] = ingest.ReasonOutOfRange
				}
			}
		}
	}
	return res
}

func reason(err error) string {
	if r := ingest.Reason(err); r != "" {
		return r
	}
	return ingest.ReasonValidation
}
