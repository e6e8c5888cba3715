package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/fetch"
	"github.com/rankd/rankd/internal/testenv"
)

// produce writes n messages "0".."n-1" to partition 0 of topic.
func produce(t *testing.T, addrs []string, topic string, from, n int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, BatchSize: 50, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: fmt.Appendf(nil, "%d", from+i)}
	}
	if err := w.WriteMessages(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// fetchAll fetches from p until it has n messages, checking every chunk's
// size, and returns their offsets and values.
func fetchAll(t *testing.T, p *fetch.Partition, chunk, n int) (offsets []int64, values []string) {
	t.Helper()
	for len(offsets) < n {
		err := p.Fetch(t.Context(), chunk, func(msgs []kafka.Message) bool {
			if len(msgs) == 0 || len(msgs) > chunk {
				t.Errorf("a chunk of %d messages, want 1 to %d", len(msgs), chunk)
			}
			for _, m := range msgs {
				offsets = append(offsets, m.Offset)
				values = append(values, string(m.Value))
			}
			return true
		})
		if err != nil {
			t.Fatalf("fetch at offset %d: %v", p.Offset(), err)
		}
	}
	return offsets, values
}

// TestPartition reads a partition from its start, from the middle, past a
// stop of the caller, and from an offset that retention deleted, which it
// reports instead of skipping.
func TestPartition(t *testing.T) {
	k := testenv.NewKafka(t, testenv.KafkaOptions{})
	topic := k.Topic(t, "fetch")
	k.CreateTopic(t, topic, 1)
	produce(t, k.Addrs(), topic, 0, 300)
	cfg := fetch.Config{Brokers: k.Addrs(), MaxWait: 100 * time.Millisecond}

	p := fetch.New(cfg, topic, 0, kafka.FirstOffset)
	defer p.Close()
	offsets, values := fetchAll(t, p, 64, 300)
	if len(offsets) != 300 {
		t.Fatalf("%d messages, want 300", len(offsets))
	}
	for i := range offsets {
		if offsets[i] != int64(i) || values[i] != fmt.Sprint(i) {
			t.Fatalf("message %d: offset %d value %q, want %d and %q", i, offsets[i], values[i], i, fmt.Sprint(i))
		}
	}
	if p.Offset() != 300 {
		t.Errorf("Offset %d after 300 messages, want 300", p.Offset())
	}
	// at the end: nothing within MaxWait, no error
	got := 0
	if err := p.Fetch(t.Context(), 64, func(msgs []kafka.Message) bool { got += len(msgs); return true }); err != nil || got != 0 {
		t.Errorf("fetch at the end: %d messages, %v; want none and no error", got, err)
	}

	// from the middle, with a caller that stops after its first chunk: the
	// next fetch goes on after that chunk
	q := fetch.New(cfg, topic, 0, 150)
	defer q.Close()
	var first []kafka.Message
	if err := q.Fetch(t.Context(), 10, func(msgs []kafka.Message) bool { first = msgs; return false }); err != nil {
		t.Fatal(err)
	}
	if len(first) != 10 || first[0].Offset != 150 || first[9].Offset != 159 || q.Offset() != 160 {
		t.Fatalf("stopped after one chunk of %d from offset %d, Offset %d; want 10 from 150, Offset 160", len(first), first[0].Offset, q.Offset())
	}
	offsets, _ = fetchAll(t, q, 10, 140)
	if offsets[0] != 160 || offsets[139] != 299 {
		t.Errorf("after the stop: offsets %d to %d, want 160 to 299", offsets[0], offsets[len(offsets)-1])
	}

	// retention deletes offsets 0-199: a fetch from 100 says so, and stays at 100
	k.DeleteRecords(t, topic, 0, 200)
	r := fetch.New(cfg, topic, 0, 100)
	defer r.Close()
	n := 0
	err := r.Fetch(t.Context(), 64, func(msgs []kafka.Message) bool { n += len(msgs); return true })
	var trunc *fetch.TruncatedError
	if !errors.As(err, &trunc) || trunc.Offset != 100 || trunc.First != 200 || n != 0 || r.Offset() != 100 {
		t.Fatalf("fetch from a deleted offset: %v, %d messages, Offset %d; want a TruncatedError from 100 to 200, none, Offset 100", err, n, r.Offset())
	}
	// from the first offset it now holds
	s := fetch.New(cfg, topic, 0, kafka.FirstOffset)
	defer s.Close()
	if offsets, _ = fetchAll(t, s, 64, 100); offsets[0] != 200 || offsets[99] != 299 {
		t.Errorf("from the first offset after the deletion: %d to %d, want 200 to 299", offsets[0], offsets[99])
	}
}

// TestPartitionCancel ends a fetch waiting for messages when its context
// ends, however long MaxWait.
func TestPartitionCancel(t *testing.T) {
	k := testenv.NewKafka(t, testenv.KafkaOptions{})
	topic := k.Topic(t, "fetch")
	k.CreateTopic(t, topic, 1)
	produce(t, k.Addrs(), topic, 0, 1)
	p := fetch.New(fetch.Config{Brokers: k.Addrs(), MaxWait: time.Hour}, topic, 0, 1)
	defer p.Close()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	err := p.Fetch(ctx, 64, func([]kafka.Message) bool { t.Error("a message past the end"); return true })
	if !errors.Is(err, context.Canceled) || p.Offset() != 1 {
		t.Errorf("a cancelled fetch: %v, Offset %d; want context.Canceled, Offset 1", err, p.Offset())
	}
}
