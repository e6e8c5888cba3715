package consumer

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
)

// TestRedisRollback: Redis rolls back to an older state (a snapshot taken
// after the first half was applied and committed) while the group has
// committed the second half. The consumer must notice before applying
// anything, refuse to apply (nothing committed, /readyz 503, the metric up),
// and resume once the boards are rebuilt from the log into a new generation
// (as `rankd replay` does); then every board equals the oracle.
func TestRedisRollback(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 3)
	ctx := t.Context()
	msgs := workload(11, 1200, "rb")
	first, second, third := msgs[:500], msgs[500:900], msgs[900:]

	r := f.start(f.consumerConfig(), f.sink())
	f.produce(f.newWriter(), first)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	prefix := f.prefix + ":*"
	snapshot := map[string]string{}
	for _, k := range f.rdb.Keys(ctx, prefix).Val() {
		snapshot[k] = f.rdb.Dump(ctx, k).Val()
	}

	r = f.start(f.consumerConfig(), f.sink())
	f.produce(f.newWriter(), second)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// Redis goes back to the snapshot: the second half is lost from it.
	for _, k := range f.rdb.Keys(ctx, prefix).Val() {
		f.rdb.Del(ctx, k)
	}
	for k, v := range snapshot {
		if err := f.rdb.Restore(ctx, k, 0, v).Err(); err != nil {
			t.Fatal(err)
		}
	}

	sink := f.sink()
	r = f.start(f.consumerConfig(), sink)
	f.produce(f.newWriter(), third)
	lag := f.lagClient()
	deadline := time.Now().Add(30 * time.Second)
	for !sink.Behind() {
		if time.Now().After(deadline) {
			t.Fatal("the consumer did not notice that Redis is behind Kafka")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // it would have applied and committed the third part by now
	lags, err := GroupLag(ctx, lag, f.group, f.topics)
	if err != nil {
		t.Fatal(err)
	}
	var pending int64
	for _, l := range lags {
		pending += l.Lag
	}
	if pending != int64(len(third)) {
		t.Fatalf("%d messages not committed while Redis is behind, want all %d of the third part", pending, len(third))
	}
	if got := testutil.ToFloat64(f.metrics().behind); got < 1 {
		t.Fatalf("rankd_sink_partitions_behind = %v, want > 0", got)
	}
	rec := httptest.NewRecorder()
	r.c.ReadyHandler(f.store).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "behind kafka") {
		t.Fatalf("/readyz = %d %q, want 503 naming the cause", rec.Code, rec.Body.String())
	}
	if _, err := sink.Apply(ctx, []kafka.Message{{Topic: f.topics[0], Value: []byte(`{}`)}}); !errors.Is(err, ErrRedisBehind) {
		t.Fatalf("Apply while behind: %v, want ErrRedisBehind", err)
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

	// The consumer resumes on its own and applies the third part.
	f.waitCommitted(time.Minute, r)
	if sink.Behind() {
		t.Fatal("still behind after the rebuild")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	o, _ := f.reference(msgs)
	f.compare(o)
}
