package consumer

import (
	"context"
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
)

// Sink is what the consumer delivers batches of messages to.
//
// Apply blocks until it has dealt with every message of msgs, which are in
// fetch order (per partition, in offset order). A nil error means that every
// message is either applied or returned as a DeadLetter (a permanent
// failure: it can never be applied, so it is written to the dead-letter
// topic and its offset committed like the others). A non-nil error is
// transient: the consumer commits nothing, waits, and calls Apply again with
// the same messages, so Apply must be idempotent (a message applied by the
// failed call must not count twice).
//
// Apply must honour ctx: when it is done, Apply returns promptly with an
// error. The consumer calls Apply from several workers at once. The
// messages' keys and values are not written after they are fetched, so
// Apply may keep pointers into them (RankingSink's decoded strings do).
type Sink interface {
	Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error)
}

// DeadLetter is a message that failed permanently, with the reason written
// to the dead-letter topic's "reason" header and counted in
// rankd_consumer_dead_letters_total. Reasons are short, stable words (see
// the ingest.Reason constants).
type DeadLetter struct {
	Msg    kafka.Message
	Reason string
	Err    error
	// Boards names every board that rejected the message (reasons late and
	// out_of_range), written to the "boards" header as a comma list; the
	// message's updates of the other boards were applied.
	Boards []string
}

// SinkFunc adapts a function to the Sink interface.
type SinkFunc func(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error)

// Apply calls f.
func (f SinkFunc) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	return f(ctx, msgs)
}

// Positioner is implemented by sinks that keep each partition's position
// in their own store, beside the effects (RankingSink): where a partition
// is read from is theirs to say, not the group's committed offset.
//
// Assigned is called when the group assigns partitions to a worker (at
// start, after every rebalance), and again every few seconds for the
// partitions it halted; it returns one Resume per assignment, in order. A
// non-nil error is transient: the worker retries. Apply of a Positioner
// may return a *RepositionError.
type Positioner interface {
	Assigned(ctx context.Context, as []Assignment) ([]Resume, error)
}

// Assignment is a partition assigned to a worker with the group's
// committed offset (-1 or kafka.FirstOffset/LastOffset when the group has
// none: the group's start offset).
type Assignment struct {
	Topic     string
	Partition int
	Committed int64
}

// Resume says where to read a partition from: Offset, or nowhere (Halt
// names the reason) when the sink cannot apply it exactly.
type Resume struct {
	Offset int64
	Halt   string
}

// RepositionError is returned by a Positioner's Apply when its store holds
// other positions than the batch started from: nothing of the batch was
// applied for the partitions in Moves, which must be read again from the
// offsets given (or halted); the batch's other messages were not applied
// by this call either, and are retried as they are.
type RepositionError struct {
	Moves []Move
}

// Move is one partition of a RepositionError.
type Move struct {
	Topic     string
	Partition int
	Offset    int64
	Halt      string // non-empty: stop reading the partition, for this reason
}

func (e *RepositionError) Error() string {
	parts := make([]string, 0, len(e.Moves))
	for _, m := range e.Moves {
		if m.Halt != "" {
			parts = append(parts, fmt.Sprintf("%s/%d halted: %s", m.Topic, m.Partition, m.Halt))
		} else {
			parts = append(parts, fmt.Sprintf("%s/%d from offset %d", m.Topic, m.Partition, m.Offset))
		}
	}
	return "repositioning partitions: " + strings.Join(parts, "; ")
}
