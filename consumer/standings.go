package consumer

import (
	"context"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/ranking/store"
)

// DefaultStandingsTopic receives the sealed standings (store.RunStandings).
const DefaultStandingsTopic = "rankd-standings"

// Headers of a standings message.
const (
	HeaderStandingsID       = "id"       // the revision's ID: <tag>/<period>/<revision>
	HeaderStandingsBoard    = "board"    // the board
	HeaderStandingsPeriod   = "period"   // the period id
	HeaderStandingsRevision = "revision" // the revision, decimal
)

// StandingsWriter writes sealed standings to the standings topic: key
// "<tag>/<period>" (every revision of a snapshot in one partition, in
// order; murmur2, as Java clients partition), the snapshot's JSON as the
// value, and the headers above. Everything but the Kafka timestamp is a
// function of the snapshot, so a repeated publication is byte-identical.
type StandingsWriter struct {
	w  *kafka.Writer
	tr *kafka.Transport
}

// NewStandingsWriter returns a writer to topic on brokers, with dialer's
// TLS and SASL settings (nil: plain).
func NewStandingsWriter(brokers []string, dialer *kafka.Dialer, topic string) *StandingsWriter {
	tr := Transport(dialer)
	return &StandingsWriter{tr: tr, w: &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Topic:                  topic,
		Transport:              tr,
		Balancer:               kafka.Murmur2Balancer{},
		BatchSize:              1000,
		BatchBytes:             16 << 20,
		BatchTimeout:           5 * time.Millisecond,
		RequiredAcks:           kafka.RequireAll,
		MaxAttempts:            3,
		AllowAutoTopicCreation: true,
	}}
}

// Publish writes msgs and returns once the brokers acknowledged all of
// them (on error, some may have been written: the caller publishes them
// again, byte-identical).
func (w *StandingsWriter) Publish(ctx context.Context, msgs []store.StandingsMessage) error {
	out := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		out[i] = kafka.Message{Key: []byte(m.Key), Value: m.Value, Headers: []kafka.Header{
			{Key: HeaderStandingsID, Value: []byte(m.ID)},
			{Key: HeaderStandingsBoard, Value: []byte(m.Board)},
			{Key: HeaderStandingsPeriod, Value: []byte(m.Period)},
			{Key: HeaderStandingsRevision, Value: []byte(strconv.Itoa(m.Revision))},
		}}
	}
	return w.w.WriteMessages(ctx, out...)
}

// Close flushes and closes the writer.
func (w *StandingsWriter) Close() error {
	err := w.w.Close()
	w.tr.CloseIdleConnections()
	return err
}
