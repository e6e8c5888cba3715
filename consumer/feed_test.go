package consumer

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
)

// TestFeedTruncated: a partition whose next messages retention deleted
// while it was being read is halted, naming the offsets; its reader does
// not skip to the first offset Kafka still holds (kafka-go's Reader did,
// silently).
func TestFeedTruncated(t *testing.T) {
	k := testenv.Kafka(t)
	topic := k.Topic(t, "trunc")
	k.CreateTopic(t, topic, 1)
	w := &kafka.Writer{Addr: kafka.TCP(k.Addrs()...), Topic: topic, BatchSize: 100, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := make([]kafka.Message, 300)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: fmt.Appendf(nil, "%d", i)}
	}
	if err := w.WriteMessages(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	k.DeleteRecords(t, topic, 0, 200)

	cfg := Config{Brokers: k.Addrs(), MaxWait: 100 * time.Millisecond, QueueCapacity: 1000,
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond}
	f := newFeed(t.Context(), cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	defer f.close()
	key := partitionKey{topic, 0}
	f.start(key, 150)
	var m fed
	select {
	case m = <-f.ch:
	case <-time.After(30 * time.Second):
		t.Fatal("nothing from the feed in 30s")
	}
	if m.trunc == nil || len(m.msgs) != 0 || m.trunc.Offset != 150 || m.trunc.First != 200 {
		t.Fatalf("from a deleted offset the feed sent %d messages, truncation %+v; want none and offsets 150 to 200", len(m.msgs), m.trunc)
	}

	halts := 0
	wk := &worker{log: slog.New(slog.NewTextHandler(t.Output(), nil)), topics: map[string]prometheus.Counter{},
		halted: map[partitionKey]string{}, onHalt: func() { halts++ }}
	b := &batch{maxCount: 100, maxBytes: 1 << 20}
	wk.take(f, b, m)
	want := "its messages from offset 150 are not applied, and Kafka holds them only from offset 200 on"
	if r := wk.haltedReasons(); len(r) != 1 || !strings.Contains(r[0], want) || halts != 1 || len(b.msgs) != 0 {
		t.Fatalf("after the truncation: halted %q (%d changes), batch of %d; want one halt saying %q and an empty batch", r, halts, len(b.msgs), want)
	}
	// the reader stopped: nothing more comes
	select {
	case m := <-f.ch:
		t.Fatalf("after the truncation the feed sent %d messages, truncation %v", len(m.msgs), m.trunc)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestTakeChunks: a chunk that does not fit in the batch leaves its rest
// for the next one, in order; a chunk of a restarted reader is dropped.
func TestTakeChunks(t *testing.T) {
	f := &feed{}
	part := &feedPart{}
	chunk := func(from, n int) fed {
		m := fed{k: partitionKey{"t", 0}, part: part, epoch: part.epoch.Load()}
		for i := range n {
			m.msgs = append(m.msgs, kafka.Message{Topic: "t", Offset: int64(from + i), Value: []byte("v")})
		}
		return m
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{topics: map[string]prometheus.Counter{}, m: m}
	offsets := func(b *batch) (o []int64) {
		for _, m := range b.msgs {
			o = append(o, m.Offset)
		}
		return o
	}
	b := &batch{maxCount: 3, maxBytes: 1 << 20}
	w.take(f, b, chunk(0, 2))
	w.take(f, b, chunk(2, 4))
	if got := offsets(b); fmt.Sprint(got) != "[0 1 2]" || len(f.rest.msgs) != 3 {
		t.Fatalf("batch %v, rest %d; want [0 1 2] and 3", got, len(f.rest.msgs))
	}
	b.reset()
	w.take(f, b, f.rest)
	if got := offsets(b); fmt.Sprint(got) != "[3 4 5]" || len(f.rest.msgs) != 0 {
		t.Fatalf("next batch %v, rest %d; want [3 4 5] and 0", got, len(f.rest.msgs))
	}
	b.reset()
	stale := chunk(6, 2)
	part.epoch.Add(1) // the reader was restarted (a rewind) after it fetched these
	w.take(f, b, stale)
	if len(b.msgs) != 0 {
		t.Fatalf("a restarted reader's chunk went into the batch: %v", offsets(b))
	}
}
