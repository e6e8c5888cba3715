package store

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/workload"
	"github.com/rankd/rankd/ranking"
)

// BenchmarkPlanArgs measures the Go side of Apply without Redis: plan and
// args of a batch of 2,000 events of the standard workload
// (internal/workload) routed by the example config:
//
//	go test -run '^$' -bench BenchmarkPlanArgs -benchmem ./ranking/store/
func BenchmarkPlanArgs(b *testing.B) {
	cfg, router := LoadExample(b)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never called
	defer rdb.Close()
	s, err := New(rdb, cfg.Boards())
	if err != nil {
		b.Fatal(err)
	}
	const batch = 2000
	g, err := workload.New(workload.Config{Seed: 1, Start: time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC), Step: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	var ups []ranking.Update
	for i := range batch {
		ev := g.Next()
		e, err := cfg.Schemas()[ev.Topic].Decode(ev.Topic, 0, int64(i), ev.Value, nil, ev.Time)
		if err != nil {
			b.Fatal(err)
		}
		if ups, err = router.AppendRoute(ups, e); err != nil {
			b.Fatal(err)
		}
	}
	evs := Group(ups)
	// The steady state: every tag registered (Apply notes them).
	_, tags, err := s.plan(evs, len(ups))
	if err != nil {
		b.Fatal(err)
	}
	for board, ts := range tags {
		for _, tag := range ts {
			s.known[dimsKey{board, tag.(string)}] = time.Now()
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		calls, _, err := s.plan(evs, len(ups))
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range calls {
			c.packed = true
			c.argv = c.args(s)
		}
		for _, c := range calls {
			c.release() // as applyAll does
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
}
