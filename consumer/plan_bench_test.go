package consumer

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/workload"
	"github.com/rankd/rankd/ranking/store"
)

// BenchmarkSinkPlan measures RankingSink.plan (decode and route, no Redis)
// of a batch of 2,000 messages of the standard workload (internal/workload)
// over 4 partitions, with the example config; it reports ns and allocations
// per event besides per batch:
//
//	go test -run '^$' -bench BenchmarkSinkPlan -benchmem ./consumer/
func BenchmarkSinkPlan(b *testing.B) {
	cfg := loadExample(b)
	router, err := cfg.Router()
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never called
	defer rdb.Close()
	st, err := store.New(rdb, cfg.Boards())
	if err != nil {
		b.Fatal(err)
	}
	sink, err := NewRankingSink(cfg.Schemas(), router, st)
	if err != nil {
		b.Fatal(err)
	}
	const batch, parts = 2000, 4
	g, err := workload.New(workload.Config{Seed: 1, Start: time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC), Step: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]kafka.Message, batch)
	start := map[partitionKey]streamPos{}
	for i := range msgs {
		ev := g.Next()
		p := i % parts
		msgs[i] = kafka.Message{Topic: ev.Topic, Partition: p, Offset: int64(i / parts), Key: ev.Key, Value: ev.Value, Time: ev.Time}
		start[partitionKey{ev.Topic, p}] = streamPos{next: -1}
	}
	ups := 0
	b.ReportAllocs()
	for b.Loop() {
		p := sink.plan(msgs, start)
		ups = len(p.ups)
		sink.release(&p) // as Apply does
	}
	if ups == 0 {
		b.Fatal("no updates")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
}
