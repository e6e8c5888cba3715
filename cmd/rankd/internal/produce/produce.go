// Package produce sends events to Kafka at a given rate: the load
// generator of `rankd produce` and `rankd dev`. A Source gives the messages
// (the standard workload, or the lines of a file with FileSource); Pace
// writes them to a Writer at a rate, up to a count or a duration; Run does
// both with a kafka-go Writer and progress lines.
package produce

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

// NewWriter returns the producer's kafka-go Writer: synchronous, batches of
// up to 1000 messages or 5 ms (kafka-go's 1 s default is far too slow),
// acks from all replicas, partitioned by a hash of the key (the anchor id,
// so an anchor's events stay in order). Topics are per message.
func NewWriter(brokers []string) *kafka.Writer {
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

// Writer is what Pace writes to (a *kafka.Writer).
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Source returns the next message, or ok false when there is none left.
type Source func() (m kafka.Message, ok bool, err error)

// FileSource returns one message per line of r: blank lines and lines
// starting with # are skipped. A JSON object line goes to the topic of its
// "topic" field, else to topic; its key is the value of keyField (a string
// or a number), if any. Other lines (not JSON: useful to test dead
// letters) go as they are to topic.
func FileSource(r io.Reader, topic, keyField string) Source {
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

// Options bound a Pace run.
type Options struct {
	Rate     float64       // messages per second; 0: as fast as possible
	Count    int64         // stop after this many; 0: no limit
	Duration time.Duration // stop after this long; 0: no limit
	// Sent, if set, is increased after every acknowledged write.
	Sent *atomic.Int64
	// Throttled, if set, is called once, the first time the rate holds
	// back messages that are ready after a second's worth (Rate) of them
	// was sent: the source has more than the rate lets through.
	Throttled func()
}

// Chunk is the most messages handed to one WriteMessages call.
const Chunk = 4096

// tick is how often a rate-limited run tops up its messages.
const tick = 10 * time.Millisecond

// Pace writes the messages of src to w at opts.Rate until src ends, a limit
// is reached or ctx is done, and returns how many were acknowledged. Being
// stopped by ctx is not an error.
func Pace(ctx context.Context, w Writer, src Source, opts Options) (int64, error) {
	var sent int64
	start := time.Now()
	var deadline <-chan time.Time
	if opts.Duration > 0 {
		t := time.NewTimer(opts.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var ticker *time.Ticker
	if opts.Rate > 0 {
		ticker = time.NewTicker(tick)
		defer ticker.Stop()
	}
	batch := make([]kafka.Message, 0, Chunk)
	for {
		select {
		case <-ctx.Done():
			return sent, nil
		case <-deadline:
			return sent, nil
		default:
		}
		n := int64(Chunk)
		if opts.Rate > 0 {
			due := int64(opts.Rate*time.Since(start).Seconds()) - sent
			if due <= 0 {
				if opts.Throttled != nil && float64(sent) >= opts.Rate {
					opts.Throttled()
					opts.Throttled = nil
				}
				select {
				case <-ctx.Done():
					return sent, nil
				case <-deadline:
					return sent, nil
				case <-ticker.C:
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
				return sent, fmt.Errorf("writing %d messages: %w", len(batch), WriteError(err))
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

// WriteError shortens kafka-go's per-message errors to the first one.
func WriteError(err error) error {
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

// Restamp returns the lines of r with the integer millisecond field of
// every JSON object line moved by one offset, so that the latest is now:
// the gaps between events stay, and a file of past events becomes a file
// of events of the last moments. Lines without the field, and lines that
// are not JSON objects, stay as they are. It also returns the offset and
// how many lines it changed. A restamped line is re-encoded: its keys come
// out sorted.
func Restamp(r io.Reader, field string, now time.Time) (out io.Reader, shift time.Duration, n int, err error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, 0, 0, err
	}
	lines := strings.Split(string(data), "\n")
	objs := make([]map[string]json.RawMessage, len(lines))
	stamps := make([]int64, len(lines))
	var latest int64
	found := false
	for i, line := range lines {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(strings.TrimSpace(line)), &obj) != nil {
			continue
		}
		raw, ok := obj[field]
		if !ok {
			continue
		}
		var ts int64
		if err := json.Unmarshal(raw, &ts); err != nil {
			return nil, 0, 0, fmt.Errorf("line %d: %q is not integer milliseconds: %s", i+1, field, raw)
		}
		objs[i], stamps[i] = obj, ts
		if !found || ts > latest {
			latest, found = ts, true
		}
	}
	if !found {
		return strings.NewReader(string(data)), 0, 0, nil
	}
	delta := now.UnixMilli() - latest
	for i, obj := range objs {
		if obj == nil {
			continue
		}
		obj[field] = json.RawMessage(fmt.Appendf(nil, "%d", stamps[i]+delta))
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("line %d: %w", i+1, err)
		}
		lines[i] = string(b)
		n++
	}
	return strings.NewReader(strings.Join(lines, "\n")), time.Duration(delta) * time.Millisecond, n, nil
}
