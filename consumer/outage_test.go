package consumer

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

// TestRedisOutage stops Redis for about 3 seconds while events are being
// produced and consumed, then starts it again on the same port.
//
// Recovery mode: the data is kept. The dedicated server runs with
// persistence (RDB snapshots plus an append-only file fsynced on every
// write) and is stopped with SIGTERM, so every script that Redis executed
// before the stop, including the dedupe keys written in the same script,
// is there after the restart. Batches that failed during the outage were
// never committed; the workers retry them and dedupe skips whatever part had
// been applied.
//
// It checks that no offset is ever committed past the highest applied
// offset of its partition (polled throughout), that nothing is committed
// while Redis is down, that /readyz reports the outage, and that the boards
// equal the oracle after recovery.
func TestRedisOutage(t *testing.T) {
	srv := testenv.NewRedis(t, testenv.RedisOptions{Persist: true})
	f := newFixture(t, srv, 3)
	msgs := world.Workload(4, 3000, "outage")
	w := f.NewWriter()
	rec := newRecordingSink(f.sink())
	cfg := f.consumerConfig()
	cfg.BatchCount = 50
	cfg.StallTimeout = time.Second
	r := f.start(cfg, &countingSink{inner: rec, delay: 2 * time.Millisecond})

	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < len(msgs); i += 50 { // over 3 seconds or more: also during the outage
			if t.Context().Err() != nil {
				return
			}
			f.Produce(w, msgs[i:min(i+50, len(msgs))])
			time.Sleep(50 * time.Millisecond)
		}
	}()

	client := f.LagClient()
	// Poll commits against applied offsets for the whole test.
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(30 * time.Millisecond):
				f.committedTotal(client, rec)
			}
		}
	}()

	deadline := time.Now().Add(time.Minute)
	for f.committedTotal(client, rec) < 600 {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the first commits")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Log("redis stopped")
	// Batches applied just before the stop may still commit: wait until the
	// committed offsets have not changed for a second (under load this can
	// take longer than a fixed sleep), then they must not move at all.
	before := f.committedTotal(client, rec)
	for stable, settle := time.Now(), time.Now().Add(15*time.Second); time.Since(stable) < time.Second; {
		if time.Now().After(settle) {
			t.Fatal("commits kept moving for 15 s after Redis stopped")
		}
		time.Sleep(100 * time.Millisecond)
		if now := f.committedTotal(client, rec); now != before {
			before, stable = now, time.Now()
		}
	}
	// /readyz (assembly.ReadyHandler) is 503 when NotReady has a reason or
	// Redis does not answer its ping.
	if r.c.NotReady() == nil && f.Store.Ping(t.Context()) == nil {
		t.Error("ready (NotReady nil, Redis answers PING) while Redis is down, want /readyz 503")
	}
	// Without asking Redis: messages wait and nothing is committed, so the
	// consumer is not applying once the stall timeout has passed.
	for deadline := time.Now().Add(10 * time.Second); r.c.Applying(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Applying() still true 10 s into the outage (stall timeout 1 s)")
		}
	}
	if err := r.c.NotReady(); err == nil || !strings.Contains(err.Error(), "not applying") {
		t.Errorf("NotReady() = %v while nothing is applied, want not applying (/readyz 503 without pingers)", err)
	}
	if got := testutil.ToFloat64(r.c.applying); got != 0 {
		t.Errorf("rankd_consumer_applying = %v during the outage, want 0", got)
	}
	time.Sleep(2 * time.Second)
	after := f.committedTotal(client, rec)
	if after != before {
		t.Errorf("offsets moved from %d to %d while Redis was down", before, after)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("redis started again; %d offsets committed before the outage", before)

	<-produced
	f.waitCommitted(time.Minute, r)
	for deadline := time.Now().Add(10 * time.Second); !r.c.Applying(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Applying() still false 10 s after recovery")
		}
	}
	close(stopPoll)
	<-polled
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if testutil.ToFloat64(f.metrics().redisErrors) == 0 || testutil.ToFloat64(f.metrics().retries.WithLabelValues("apply")) == 0 {
		t.Error("the outage left no Redis errors or apply retries in the metrics")
	}
	o, applied := f.Reference(msgs)
	f.Compare(o)
	// Scripts that ran just before the stop but whose replies were lost
	// are counted as duplicates on the retry, never twice.
	if got := total(f.metrics().sinkUpdates); got > float64(applied) {
		t.Errorf("updates applied = %v, want at most %d", got, applied)
	}
}
