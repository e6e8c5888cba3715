package consumer

import (
	"context"

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
// error. The consumer calls Apply from several workers at once.
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
