package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestRunRollover checks that the scheduler prefills the next period of a
// rolling board (the example's anchor_7d, Shanghai days) once the clock is
// within Lead of the boundary, and only then, and that it records its
// duration.
func TestRunRollover(t *testing.T) {
	cfg, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		t.Fatal(err)
	}
	prefix := testenv.Prefix(t)
	rdb := testenv.Redis(t).Client(t)
	st, err := store.New(rdb, cfg.Boards(), store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Board("anchor_7d")
	sh := b.Location
	at := time.Date(2026, 11, 20, 23, 40, 0, 0, sh) // 20 minutes before a boundary
	next := b.Calendar().Next(b.Calendar().At(at))
	nextKey := store.Key(prefix, store.Tag(b.Name, nil), "r", next.ID)
	ups := []ranking.Update{{Board: b.Name, Member: "a1", Value: 100, Time: at, MsgID: "m1"}}
	if _, err := st.Apply(t.Context(), store.Group(ups)); err != nil {
		t.Fatal(err)
	}

	run := func(now time.Time, wait func() bool) float64 {
		t.Helper()
		reg := prometheus.NewRegistry()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- store.RunRollover(ctx, st, cfg.Boards(), store.Schedule{Lead: 10 * time.Minute, Interval: 20 * time.Millisecond,
				Now: func() time.Time { return now }, Registerer: reg})
		}()
		deadline := time.Now().Add(10 * time.Second)
		for !wait() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("RunRollover: %v", err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "rankd_rollover_duration_seconds" {
				return float64(mf.GetMetric()[0].GetHistogram().GetSampleCount())
			}
		}
		return 0
	}
	exists := func() bool { return rdb.Exists(t.Context(), nextKey).Val() == 1 }

	// 20 minutes before the boundary, a 10 minute lead stays in the current
	// period: nothing to prefill.
	start := time.Now()
	if n := run(at, func() bool { return time.Since(start) > 300*time.Millisecond }); n < 2 {
		t.Errorf("%v rollovers recorded in the first run, want several", n)
	}
	if exists() {
		t.Fatalf("%s exists 20 minutes before the boundary", nextKey)
	}
	// 5 minutes before it, the next period is prefilled.
	run(at.Add(15*time.Minute), exists)
	if !exists() {
		t.Fatalf("%s not prefilled 5 minutes before the boundary", nextKey)
	}
	es, err := st.Entries(t.Context(), b.Name, nil, next.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Member != "a1" || es[0].Value != 100 {
		t.Errorf("prefilled %s = %+v, want a1 = 100 carried over", next.ID, es)
	}
}
