package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
)

func TestBatch(t *testing.T) {
	b := &batch{maxCount: 4, maxBytes: 100}
	add := func(topic string, p int, off int64, size int) {
		b.add(kafka.Message{Topic: topic, Partition: p, Offset: off, Value: make([]byte, size)})
	}
	add("a", 0, 5, 10)
	add("a", 1, 9, 10)
	add("a", 0, 6, 10)
	if b.full() {
		t.Fatal("full after 3 messages of 10 bytes")
	}
	add("b", 0, 1, 10)
	if !b.full() {
		t.Fatal("not full at the count limit")
	}
	got := b.offsets()
	want := []kafka.Message{{Topic: "a", Partition: 0, Offset: 6}, {Topic: "a", Partition: 1, Offset: 9}, {Topic: "b", Partition: 0, Offset: 1}}
	if len(got) != len(want) {
		t.Fatalf("offsets = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Topic != want[i].Topic || got[i].Partition != want[i].Partition || got[i].Offset != want[i].Offset {
			t.Errorf("offsets[%d] = %s/%d@%d, want %s/%d@%d", i, got[i].Topic, got[i].Partition, got[i].Offset,
				want[i].Topic, want[i].Partition, want[i].Offset)
		}
	}
	b.reset()
	add("a", 0, 7, 120)
	if !b.full() || len(b.offsets()) != 1 {
		t.Fatal("one message over the byte limit does not close the batch")
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 5*time.Second
	for attempt, want := range map[int]time.Duration{1: lo, 2: 2 * lo, 3: 4 * lo, 7: hi, 100: hi} {
		for range 50 {
			if d := Backoff(attempt, lo, hi); d < want/2 || d > want {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

func TestDeadLetterMessage(t *testing.T) {
	d := &DeadLetterWriter{max: 1000}
	orig := kafka.Message{Topic: "gift", Partition: 2, Offset: 42, Key: []byte("k"), Value: []byte("{bad"), Time: time.UnixMilli(1234),
		Headers: []kafka.Header{{Key: "id", Value: []byte("x")}}}
	m := d.message(DeadLetter{Msg: orig, Reason: "decode", Err: errors.New("unexpected EOF")})
	want := []string{"reason=decode", "topic=gift", "partition=2", "offset=42", "error=unexpected EOF", "timestamp=1234", "id=x"}
	if got := headerList(m); strings.Join(got, ",") != strings.Join(want, ",") || string(m.Value) != "{bad" || string(m.Key) != "k" {
		t.Errorf("dead letter = %q %q %v, want %v", m.Key, m.Value, headerList(m), want)
	}

	orig.Value = make([]byte, 5000)
	m = d.message(DeadLetter{Msg: orig, Reason: "too_large"})
	if len(m.Value) != 0 || string(m.Key) != "k" || !strings.Contains(strings.Join(headerList(m), ","), "truncated=5000") {
		t.Errorf("oversized dead letter = %q, %d bytes, %v", m.Key, len(m.Value), headerList(m))
	}
	orig.Key = make([]byte, 5000)
	m = d.message(DeadLetter{Msg: orig, Reason: "too_large"})
	if len(m.Value)+len(m.Key) != 0 || len(m.Headers) != 7 {
		t.Errorf("oversized key: dead letter keeps %d key bytes and %d headers", len(m.Key), len(m.Headers))
	}
}

func headerList(m kafka.Message) []string {
	var out []string
	for _, h := range m.Headers {
		out = append(out, h.Key+"="+string(h.Value))
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Brokers: []string{"b:9092"}, Group: "g", Topics: []string{"gift"}}
	if _, err := New(ok, SinkFunc(nil)); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "brokers"},
		{"no group", func(c *Config) { c.Group = "" }, "group"},
		{"no topics", func(c *Config) { c.Topics = nil }, "topics"},
		{"dead-letter topic consumed", func(c *Config) { c.Topics = append(c.Topics, DefaultDeadLetterTopic) }, "dead-letter"},
		{"slow close", func(c *Config) { c.MaxWait = time.Second }, "max wait"},
		{"bad backoff", func(c *Config) { c.RetryMin, c.RetryMax = time.Second, time.Millisecond }, "backoff"},
		{"bad start offset", func(c *Config) { c.StartOffset = 17 }, "start offset"},
		{"negative workers", func(c *Config) { c.Workers = -1 }, "workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			c.Topics = append([]string(nil), ok.Topics...)
			tt.edit(&c)
			_, err := New(c, SinkFunc(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error about %q", err, tt.want)
			}
		})
	}
	if _, err := New(ok, nil); err == nil {
		t.Error("nil sink accepted")
	}
}

func TestApplying(t *testing.T) {
	c := &Consumer{cfg: Config{LagInterval: time.Second, StallTimeout: 2 * time.Second}}
	now := time.Now()
	set := func(commit, lagOK time.Duration, lag int64) {
		c.lastCommit.Store(now.Add(-commit).UnixNano())
		c.lagOK.Store(now.Add(-lagOK).UnixNano())
		c.lagTotal.Store(lag)
	}
	tests := []struct {
		name          string
		commit, lagOK time.Duration
		lag           int64
		want          bool
	}{
		{"nothing waits, no commit for long", time.Hour, 0, 0, true},
		{"messages wait, recent commit", time.Second, 0, 500, true},
		{"messages wait, no commit for the stall timeout", 3 * time.Second, 0, 500, false},
		{"lag unreadable (brokers down) past stall + interval", 0, 4 * time.Second, 0, false},
		{"lag read within stall + interval", 0, 2900 * time.Millisecond, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set(tt.commit, tt.lagOK, tt.lag)
			if got := c.Applying(); got != tt.want {
				t.Fatalf("Applying() = %v, want %v", got, tt.want)
			}
		})
	}
	c.cfg.LagInterval = -1
	set(time.Hour, time.Hour, 9)
	if !c.Applying() {
		t.Fatal("with the lag check disabled, Applying() must be true")
	}
}

// TestBehindCountsMessages checks that the queue half full is counted in
// messages: small chunks waiting (a worker keeping up with a trickle of
// fetches) are not behind, half the queue's messages are, and so is a
// full batch.
func TestBehindCountsMessages(t *testing.T) {
	cfg := Config{QueueCapacity: 1000}
	f := newFeed(t.Context(), cfg, slog.New(slog.DiscardHandler))
	b := &batch{maxCount: 200, maxBytes: 1 << 20}
	b.add(kafka.Message{Value: []byte("x")})
	chunk := func(n int) fed { return fed{msgs: make([]kafka.Message, n)} }
	if !f.send(t.Context(), chunk(10)) || !f.send(t.Context(), chunk(10)) {
		t.Fatal("send failed")
	}
	if behind(cfg, f, b) {
		t.Errorf("behind with 2 chunks of 10 messages waiting (queue 1000), want not")
	}
	if !f.send(t.Context(), chunk(480)) {
		t.Fatal("send failed")
	}
	if !behind(cfg, f, b) {
		t.Errorf("not behind with 500 of 1000 messages waiting, want behind")
	}
	f.got(<-f.ch)
	if behind(cfg, f, b) {
		t.Errorf("behind with 490 messages waiting once a chunk of 10 was taken, want not")
	}
	for len(f.ch) > 0 {
		f.got(<-f.ch)
	}
	if got := f.queued.Load(); got != 0 {
		t.Errorf("queued = %d with the channel empty, want 0", got)
	}
	for !b.full() {
		b.add(kafka.Message{Value: []byte("x")})
	}
	if !behind(cfg, f, b) {
		t.Errorf("not behind with a full batch, want behind")
	}
}

// TestBehindGaugeAfterConcurrentChanges: workers halting and resuming
// partitions at once (as all do when `rankd replay` has rebuilt the
// boards) leave rankd_sink_partitions_behind at what is halted in the end,
// not at a count one of them took before another's change.
func TestBehindGaugeAfterConcurrentChanges(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := &Consumer{m: m, log: slog.New(slog.DiscardHandler)}
	ws := []*worker{newWorker(c, 0, nil), newWorker(c, 1, nil), newWorker(c, 2, nil)}
	c.workers = ws
	for i := range 3000 {
		var wg sync.WaitGroup
		for j, w := range ws {
			wg.Go(func() {
				for p := range 4 {
					w.setHalted(partitionKey{"t", 4*j + p}, "lost")
				}
				for p := range 4 {
					w.setHalted(partitionKey{"t", 4*j + p}, "")
				}
			})
		}
		wg.Wait()
		if got := testutil.ToFloat64(m.behind); got != 0 {
			t.Fatalf("round %d: rankd_sink_partitions_behind = %v with nothing halted, want 0", i, got)
		}
	}
}

// TestLingerCountsFromFirstFetch: a batch closes Linger after its first
// message was fetched, not Linger after the worker began filling it. A
// message that waited out the linger behind the previous batch's apply
// goes at once, with what else is fetched already (Linger is an hour
// here: waiting it would hang the test), while a batch whose first
// message is fresh waits for more.
func TestLingerCountsFromFirstFetch(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := &Consumer{cfg: Config{Linger: time.Hour, QueueCapacity: 1000}, m: m, log: slog.New(slog.DiscardHandler)}
	w := newWorker(c, 0, nil)
	f := newFeed(t.Context(), c.cfg, slog.New(slog.DiscardHandler))
	part := &feedPart{}
	chunk := func(n int, at int64) fed {
		return fed{msgs: make([]kafka.Message, n), k: partitionKey{"t", 0}, part: part, at: at}
	}
	old := mono() - int64(2*time.Hour)
	if !f.send(t.Context(), chunk(3, old)) || !f.send(t.Context(), chunk(2, mono())) {
		t.Fatal("send failed")
	}
	b := &batch{maxCount: 100, maxBytes: 1 << 20}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.fill(t.Context(), f, b, nil)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("fill still lingering 10 s after a batch whose first message was fetched 2 h ago")
	}
	if len(b.msgs) != 5 || b.first != old {
		t.Errorf("batch of %d messages, first fetched at %d; want 5, at %d", len(b.msgs), b.first, old)
	}

	// A fresh first message: fill waits for more until its context ends.
	b.reset()
	if !f.send(t.Context(), chunk(1, mono())) {
		t.Fatal("send failed")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done = make(chan struct{})
	go func() {
		defer close(done)
		w.fill(ctx, f, b, nil)
	}()
	if !f.send(t.Context(), chunk(4, mono())) {
		t.Fatal("send failed")
	}
	select {
	case <-done:
		t.Fatal("fill returned before the linger of a fresh batch ended")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	<-done
	if len(b.msgs) != 5 {
		t.Errorf("batch of %d messages, want 5 (both chunks, taken while lingering)", len(b.msgs))
	}
}

// TestCommitterPending: the offsets handed over while a commit is in
// flight wait merged per partition, the newest batch winning even when it
// is lower (a partition rewound after Redis lost writes resumes committing
// from where it re-applied), with the oldest batch's fetch time.
func TestCommitterPending(t *testing.T) {
	c := &committer{wake: make(chan struct{}, 1)}
	batchOf := func(first int64, ms ...kafka.Message) *batch {
		return &batch{msgs: ms, first: first}
	}
	if err := c.add(batchOf(7, kafka.Message{Topic: "a", Partition: 0, Offset: 99}, kafka.Message{Topic: "a", Partition: 0, Offset: 100},
		kafka.Message{Topic: "b", Partition: 2, Offset: 5})); err != nil {
		t.Fatal(err)
	}
	if err := c.add(batchOf(9, kafka.Message{Topic: "a", Partition: 0, Offset: 50}, kafka.Message{Topic: "a", Partition: 1, Offset: 3})); err != nil {
		t.Fatal(err)
	}
	if len(c.wake) != 1 {
		t.Fatalf("wake holds %d signals, want 1", len(c.wake))
	}
	offs, n, first := c.take()
	want := map[string]map[int]int64{"a": {0: 51, 1: 4}, "b": {2: 6}}
	if fmt.Sprint(offs) != fmt.Sprint(want) || n != 5 || first != 7 {
		t.Fatalf("pending %v of %d messages, first fetched at %d; want %v of 5, at 7", offs, n, first, want)
	}
	if offs, n, _ := c.take(); offs != nil || n != 0 {
		t.Fatalf("taken twice: %v of %d messages", offs, n)
	}
	if err := c.add(batchOf(11, kafka.Message{Topic: "a", Partition: 0, Offset: 60})); err != nil {
		t.Fatal(err)
	}
	if _, _, first := c.take(); first != 11 {
		t.Fatalf("after a take, the next batch's fetch time is %d, want 11", first)
	}
	c.err = errors.New("stopped")
	if err := c.add(batchOf(12, kafka.Message{Topic: "a", Partition: 0, Offset: 61})); err == nil {
		t.Fatal("a committer that stopped on an error took more offsets")
	}
}
