package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// newWriter returns the producer's kafka-go Writer: synchronous, batches of
// up to 1000 messages or 5 ms (kafka-go's 1 s default is far too slow),
// acks from all replicas, partitioned by a hash of the key (the anchor id,
// so an anchor's events stay in order). Topics are per message.
func newWriter(brokers []string) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Balancer:     &kafka.Hash{},
		BatchSize:    1000,
		BatchBytes:   4 << 20,
		BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll,
		Async:        false,
	}
}

// messageWriter is what pace writes to (a *kafka.Writer).
type messageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// messageSource returns the next message, or ok false when there is none
// left.
type messageSource func() (m kafka.Message, ok bool, err error)

// workloadSource returns the messages of a workload, without end.
func workloadSource(w *workload) messageSource {
	return func() (kafka.Message, bool, error) {
		ev := w.next()
		return kafka.Message{Topic: ev.Topic, Key: ev.Key, Value: ev.Value}, true, nil
	}
}

// fileSource returns one message per line of r: blank lines and lines
// starting with # are skipped. A JSON object line goes to the topic of its
// "topic" field, else to topic; its key is the value of keyField (a string
// or a number), if any. Other lines (not JSON: useful to test dead
// letters) go as they are to topic.
func fileSource(r io.Reader, topic, keyField string) messageSource {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	return func() (kafka.Message, bool, error) {
		for sc.Scan() {
			line++
			text := strings.TrimSpace(sc.Text())
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
			m := kafka.Message{Topic: topic, Value: []byte(text)}
			var obj map[string]json.RawMessage
			if json.Unmarshal(m.Value, &obj) == nil {
				var t string
				if raw, ok := obj["topic"]; ok && json.Unmarshal(raw, &t) == nil && t != "" {
					m.Topic = t
				}
				if raw, ok := obj[keyField]; ok {
					var s string
					if json.Unmarshal(raw, &s) == nil {
						m.Key = []byte(s)
					} else {
						m.Key = []byte(strings.TrimSpace(string(raw)))
					}
				}
			}
			if m.Topic == "" {
				return m, false, fmt.Errorf("line %d: no topic: add a \"topic\" field or give --topic", line)
			}
			return m, true, nil
		}
		if err := sc.Err(); err != nil {
			return kafka.Message{}, false, fmt.Errorf("line %d: %w", line+1, err)
		}
		return kafka.Message{}, false, nil
	}
}

// paceOptions bound a pace run.
type paceOptions struct {
	Rate     float64       // messages per second; 0: as fast as possible
	Count    int64         // stop after this many; 0: no limit
	Duration time.Duration // stop after this long; 0: no limit
	// Sent, if set, is increased after every acknowledged write.
	Sent *atomic.Int64
}

// paceChunk is the most messages handed to one WriteMessages call.
const paceChunk = 4096

// paceTick is how often a rate-limited run tops up its messages.
const paceTick = 10 * time.Millisecond

// pace writes the messages of src to w at opts.Rate until src ends, a limit
// is reached or ctx is done, and returns how many were acknowledged. Being
// stopped by ctx is not an error.
func pace(ctx context.Context, w messageWriter, src messageSource, opts paceOptions) (int64, error) {
	var sent int64
	start := time.Now()
	var deadline <-chan time.Time
	if opts.Duration > 0 {
		t := time.NewTimer(opts.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var tick *time.Ticker
	if opts.Rate > 0 {
		tick = time.NewTicker(paceTick)
		defer tick.Stop()
	}
	batch := make([]kafka.Message, 0, paceChunk)
	for {
		select {
		case <-ctx.Done():
			return sent, nil
		case <-deadline:
			return sent, nil
		default:
		}
		n := int64(paceChunk)
		if opts.Rate > 0 {
			due := int64(opts.Rate*time.Since(start).Seconds()) - sent
			if due <= 0 {
				select {
				case <-ctx.Done():
					return sent, nil
				case <-deadline:
					return sent, nil
				case <-tick.C:
				}
				continue
			}
			n = min(n, due)
		}
		if opts.Count > 0 {
			n = min(n, opts.Count-sent)
		}
		if n <= 0 {
			return sent, nil
		}
		batch = batch[:0]
		done := false
		for range n {
			m, ok, err := src()
			if err != nil {
				return sent, err
			}
			if !ok {
				done = true
				break
			}
			batch = append(batch, m)
		}
		if len(batch) > 0 {
			if err := w.WriteMessages(ctx, batch...); err != nil {
				if ctx.Err() != nil {
					return sent, nil
				}
				return sent, fmt.Errorf("writing %d messages: %w", len(batch), writeErr(err))
			}
			sent += int64(len(batch))
			if opts.Sent != nil {
				opts.Sent.Add(int64(len(batch)))
			}
		}
		if done {
			return sent, nil
		}
	}
}

// writeErr shortens kafka-go's per-message errors to the first one.
func writeErr(err error) error {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil {
				return fmt.Errorf("%d of %d failed, first: %w", we.Count(), len(we), e)
			}
		}
	}
	return err
}
