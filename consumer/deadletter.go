package consumer

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// Headers of a dead-letter message, before the original message's headers.
const (
	HeaderReason    = "reason"    // the DeadLetter's Reason
	HeaderTopic     = "topic"     // original topic
	HeaderPartition = "partition" // original partition, decimal
	HeaderOffset    = "offset"    // original offset, decimal
	HeaderError     = "error"     // the DeadLetter's error text
	HeaderTimestamp = "timestamp" // original message time, Unix milliseconds
	HeaderBoards    = "boards"    // late / out_of_range: the boards that rejected it, comma-separated
	// HeaderTruncated is present when the original value (and, if needed,
	// key and headers) was left out to fit DeadLetterMaxBytes: the original
	// size of the value, decimal.
	HeaderTruncated = "truncated"
)

// DeadLetterWriter writes dead letters to the dead-letter topic. It is
// shared by the workers of a Consumer.
type DeadLetterWriter struct {
	w   *kafka.Writer
	tr  *kafka.Transport
	max int
}

func NewDeadLetterWriter(cfg Config) *DeadLetterWriter {
	tr := Transport(cfg.Dialer)
	return &DeadLetterWriter{
		tr:  tr,
		max: cfg.DeadLetterMaxBytes,
		w: &kafka.Writer{
			Addr:         kafka.TCP(cfg.Brokers...),
			Topic:        cfg.DeadLetterTopic,
			Transport:    tr,
			BatchSize:    1000,
			BatchBytes:   int64(cfg.DeadLetterMaxBytes + 64<<10),
			BatchTimeout: 5 * time.Millisecond,
			RequiredAcks: kafka.RequireAll,
			// The worker retries with its own backoff; a failed write is
			// transient and the whole write is retried.
			MaxAttempts:            3,
			AllowAutoTopicCreation: true,
		},
	}
}

// write writes dead letters and returns once the brokers acknowledged all of
// them. On error some may have been written: a retry writes them again (the
// dead-letter topic is at least once).
func (d *DeadLetterWriter) Write(ctx context.Context, dead []DeadLetter) error {
	msgs := make([]kafka.Message, len(dead))
	for i, dl := range dead {
		msgs[i] = d.message(dl)
	}
	return d.w.WriteMessages(ctx, msgs...)
}

// message builds the dead-letter message of dl: the original key, value and
// headers, after the headers that say why, where from and when.
func (d *DeadLetterWriter) message(dl DeadLetter) kafka.Message {
	m := dl.Msg
	errText := ""
	if dl.Err != nil {
		errText = dl.Err.Error()
		if len(errText) > 4096 {
			errText = errText[:4096]
		}
	}
	hdrs := []kafka.Header{
		{Key: HeaderReason, Value: []byte(dl.Reason)},
		{Key: HeaderTopic, Value: []byte(m.Topic)},
		{Key: HeaderPartition, Value: []byte(strconv.Itoa(m.Partition))},
		{Key: HeaderOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
		{Key: HeaderError, Value: []byte(errText)},
	}
	if !m.Time.IsZero() {
		hdrs = append(hdrs, kafka.Header{Key: HeaderTimestamp, Value: []byte(strconv.FormatInt(m.Time.UnixMilli(), 10))})
	}
	if len(dl.Boards) > 0 {
		hdrs = append(hdrs, kafka.Header{Key: HeaderBoards, Value: []byte(strings.Join(dl.Boards, ","))})
	}
	// The dead letter is timestamped now (the writer's default), so that
	// the topic's time-based retention counts from when it was written.
	out := kafka.Message{Key: m.Key, Value: m.Value}
	size := len(m.Key) + len(m.Value) + headersSize(m.Headers) + headersSize(hdrs)
	if size <= d.max {
		out.Headers = append(hdrs, m.Headers...)
		return out
	}
	hdrs = append(hdrs, kafka.Header{Key: HeaderTruncated, Value: []byte(strconv.Itoa(len(m.Value)))})
	out.Value = nil
	if len(m.Key)+headersSize(m.Headers)+headersSize(hdrs) <= d.max {
		out.Headers = append(hdrs, m.Headers...)
	} else {
		out.Key = nil
		out.Headers = hdrs
	}
	return out
}

// Close flushes and closes the writer.
func (d *DeadLetterWriter) Close() error {
	err := d.w.Close()
	d.tr.CloseIdleConnections()
	return err
}

func headersSize(hs []kafka.Header) int {
	n := 0
	for _, h := range hs {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
