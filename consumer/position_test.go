package consumer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/rankd/rankd/internal/testenv"
)

// TestRedisRollback: Redis rolls back to an older state (a snapshot taken
// after the first part was applied and committed) while the group has
// committed the second part. The consumer must find out before applying
// anything on top, re-apply the lost part from Kafka by itself, and end
// with every board equal to the oracle.
func TestRedisRollback(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 3)
	msgs := workload(11, 1200, "rb")
	first, second, third := msgs[:500], msgs[500:900], msgs[900:]

	r := f.start(f.consumerConfig(), f.sink())
	f.produce(f.newWriter(), first)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	snapshot := f.snapshot()

	r = f.start(f.consumerConfig(), f.sink())
	f.produce(f.newWriter(), second)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	f.restore(snapshot) // the second part is lost from Redis

	sink := f.sink()
	r = f.start(f.consumerConfig(), sink)
	f.produce(f.newWriter(), third)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	m := f.metrics()
	if got := testutil.ToFloat64(m.rewinds); got < 1 || got > 9 {
		t.Fatalf("rankd_sink_rewinds_total = %v, want 1..9 (one per partition that lost writes)", got)
	}
	if got := testutil.ToFloat64(m.rewound); got < 1 || got > float64(len(second)) {
		t.Fatalf("rankd_sink_rewound_offsets_total = %v, want 1..%d", got, len(second))
	}
	if got := testutil.ToFloat64(m.behind); got != 0 {
		t.Fatalf("rankd_sink_partitions_behind = %v, want 0", got)
	}
	o, _ := f.reference(msgs)
	f.compare(o)
}

// TestRedisWiped: Redis loses everything (a FLUSHALL) while the group has
// committed offsets. The consumer must halt those partitions (nothing
// applied or committed, /readyz 503 naming the cause, the metric up), and
// resume by itself once the boards are rebuilt from the log (`rankd
// replay`); then every board equals the oracle.
func TestRedisWiped(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 3)
	ctx := t.Context()
	msgs := workload(12, 1000, "wp")
	first, second := msgs[:600], msgs[600:]

	r := f.start(f.consumerConfig(), f.sink())
	f.produce(f.newWriter(), first)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	f.restore(nil) // everything of this test's prefix is gone

	sink := f.sink()
	r = f.start(f.consumerConfig(), sink)
	f.produce(f.newWriter(), second)
	deadline := time.Now().Add(30 * time.Second)
	for len(r.c.Halted()) < 9 {
		if time.Now().After(deadline) {
			t.Fatalf("halted %v, want all 9 partitions (3 topics x 3)", r.c.Halted())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // it would have applied and committed the second part by now
	lags, err := GroupLag(ctx, f.lagClient(), f.group, f.topics)
	if err != nil {
		t.Fatal(err)
	}
	var pending int64
	for _, l := range lags {
		pending += l.Lag
	}
	if pending != int64(len(second)) {
		t.Fatalf("%d messages not committed while halted, want all %d of the second part", pending, len(second))
	}
	if got := testutil.ToFloat64(f.metrics().behind); got != 9 {
		t.Fatalf("rankd_sink_partitions_behind = %v, want 9", got)
	}
	rec := httptest.NewRecorder()
	r.c.ReadyHandler(f.store).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "redis holds no position") {
		t.Fatalf("/readyz = %d %q, want 503 naming the cause", rec.Code, rec.Body.String())
	}
	if n, _ := f.rdb.Keys(ctx, f.prefix+":{*").Result(); len(n) != 0 {
		t.Fatalf("%d board keys written while halted, want 0", len(n))
	}

	// Rebuild, as rankd replay does, while the consumer waits.
	var boards []string
	for _, b := range f.cfg.Boards() {
		boards = append(boards, b.Name)
	}
	rb := &Rebuild{Replay: ReplayConfig{Brokers: f.broker.Addrs(), Topics: f.topics, BatchCount: 97},
		Schemas: f.cfg.Schemas(), Router: f.router, Boards: boards, Group: f.group,
		Logger: testLogger(t), SinkOptions: []Option{WithTopicMap(f.topicMap)}}
	if _, err := rb.Run(ctx, f.store); err != nil {
		t.Fatal(err)
	}

	// The consumer resumes on its own.
	f.waitCommitted(time.Minute, r)
	if h := r.c.Halted(); len(h) != 0 {
		t.Fatalf("still halted after the rebuild: %v", h)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	o, _ := f.reference(msgs)
	f.compare(o)
}

// snapshot returns a DUMP of every key of the fixture's prefix.
func (f *fixture) snapshot() map[string]string {
	snap := map[string]string{}
	for _, k := range f.rdb.Keys(context.Background(), f.prefix+":*").Val() {
		snap[k] = f.rdb.Dump(context.Background(), k).Val()
	}
	return snap
}

// restore replaces every key of the fixture's prefix with snap.
func (f *fixture) restore(snap map[string]string) {
	ctx := context.Background()
	for _, k := range f.rdb.Keys(ctx, f.prefix+":*").Val() {
		f.rdb.Del(ctx, k)
	}
	for k, v := range snap {
		if err := f.rdb.Restore(ctx, k, 0, v).Err(); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestRefusedSessionTimeout: a broker whose group.min.session.timeout.ms is
// above the configured session timeout refuses every join; Run returns at
// once with an error naming the setting instead of retrying for ever.
func TestRefusedSessionTimeout(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.GroupMinSessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cons, err := New(Config{Brokers: c.ListenAddrs(), Group: "g", Topics: []string{"t"}, Workers: 1,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: time.Second,
		LagInterval: -1}, SinkFunc(func(context.Context, []kafka.Message) ([]DeadLetter, error) { return nil, nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = cons.Run(ctx)
	if !errors.Is(err, kafka.InvalidSessionTimeout) || !strings.Contains(err.Error(), "kafka.session_timeout 1s") {
		t.Fatalf("Run = %v, want an error naming kafka.session_timeout and wrapping InvalidSessionTimeout", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended")
	}
}
