package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

// TestRedisRollback: Redis rolls back to an older state (a snapshot taken
// after the first part was applied and committed) while the group has
// committed the second part. The consumer must find out before applying
// anything on top, re-apply the lost part from Kafka by itself, and end
// with every board equal to the oracle.
func TestRedisRollback(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 3)
	msgs := world.Workload(11, 1200, "rb")
	first, second, third := msgs[:500], msgs[500:900], msgs[900:]

	r := f.start(f.consumerConfig(), f.sink())
	f.Produce(f.NewWriter(), first)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	snapshot := f.snapshot()

	r = f.start(f.consumerConfig(), f.sink())
	f.Produce(f.NewWriter(), second)
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	f.restore(snapshot) // the second part is lost from Redis

	sink := f.sink()
	r = f.start(f.consumerConfig(), sink)
	f.Produce(f.NewWriter(), third)
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
	o, _ := f.Reference(msgs)
	f.Compare(o)
}

// snapshot returns a DUMP of every key of the fixture's prefix.
func (f *fixture) snapshot() map[string]string {
	snap := map[string]string{}
	for _, k := range f.RDB.Keys(context.Background(), f.Prefix+":*").Val() {
		snap[k] = f.RDB.Dump(context.Background(), k).Val()
	}
	return snap
}

// restore replaces every key of the fixture's prefix with snap.
func (f *fixture) restore(snap map[string]string) {
	ctx := context.Background()
	for _, k := range f.RDB.Keys(ctx, f.Prefix+":*").Val() {
		f.RDB.Del(ctx, k)
	}
	for k, v := range snap {
		if err := f.RDB.Restore(ctx, k, 0, v).Err(); err != nil {
			f.T.Fatal(err)
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
