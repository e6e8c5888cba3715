package store_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// lateBoard is the board of issue 12: 30 minute periods that accept events
// for 72 hours after they end, with the default retention.
func lateBoard(t *testing.T) *ranking.Board {
	t.Helper()
	m30, err := ranking.ParseUnit("30m")
	if err != nil {
		t.Fatal(err)
	}
	return &ranking.Board{Name: "late_30m", Window: ranking.WindowPeriodic, Every: m30, Grace: 72 * time.Hour}
}

// TestDefaultRetentionCoversGrace checks the TTL a period key gets on a
// periodic board without a retention: 2 periods plus the grace past the
// period's end, measured on the board's latest event time.
func TestDefaultRetentionCoversGrace(t *testing.T) {
	b := lateBoard(t)
	if got, want := b.DefaultRetention(), 73*time.Hour; got != want {
		t.Fatalf("DefaultRetention = %v, want %v", got, want)
	}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	t0 := time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC)
	p := b.Calendar().At(t0)
	if _, err := s.Apply(ctx, store.Group([]ranking.Update{{Board: b.Name, Member: "a", Value: 5, Time: t0, MsgID: "1"}})); err != nil {
		t.Fatal(err)
	}
	ttl, err := rdb.PTTL(ctx, store.Key(prefix, store.Tag(b.Name, nil), "p", p.ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	// end + 2 × 30m + 72h, less the event time of the write: 73h25m
	want := p.End.Add(time.Hour + b.Grace).Sub(t0)
	if ttl > want || ttl < want-5*time.Second {
		t.Fatalf("period key TTL %v, want %v (2 periods + grace past the end)", ttl, want)
	}
}

// TestWriteWithinGraceAfterShortRetention writes to a period within its
// grace, at a wall time past the expiry the old default retention (the
// grace alone, since 2 periods are shorter) gave its key: the consumer is
// 30 minutes behind the log when the last on-time update arrives. The
// period must still hold every update, as in the oracle; with the old
// default the key had expired and the update recreated a partial period.
// miniredis runs the scripts and lets the test move the wall clock.
func TestWriteWithinGraceAfterShortRetention(t *testing.T) {
	b := lateBoard(t)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := store.New(rdb, []*ranking.Board{b})
	if err != nil {
		t.Fatal(err)
	}
	orc := oracle.New([]*ranking.Board{b})
	ctx := t.Context()
	apply := func(ups ...ranking.Update) {
		t.Helper()
		res, err := s.Apply(ctx, store.Group(ups))
		if err != nil {
			t.Fatal(err)
		}
		want := orc.Apply(ups)
		for i := range ups {
			if res.Status[i] != ranking.StatusApplied || want[i] != ranking.StatusApplied {
				t.Fatalf("update %d: store %v, oracle %v; want applied", i, res.Status[i], want[i])
			}
		}
	}

	t0 := time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC) // consumed at once
	p := b.Calendar().At(t0)
	apply(ranking.Update{Board: b.Name, Member: "a", Value: 5, Time: t0, MsgID: "1"})

	// The last update the period accepts: its partition's stream time is
	// just short of end + grace, and it is consumed 30 minutes later.
	st := p.End.Add(b.Grace - time.Second)
	mr.FastForward(st.Sub(t0) + 30*time.Minute)
	apply(ranking.Update{Board: b.Name, Member: "a", Value: 1, Time: t0.Add(15 * time.Minute), MsgID: "2", StreamTime: st})

	got, err := s.Entries(ctx, b.Name, nil, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := orc.Board(b.Name, nil, p.ID)
	if d := oracle.Diff(got, want); d != "" {
		t.Fatalf("period %s differs from the oracle:\n%s", p.ID, d)
	}
	if len(got) != 1 || got[0].Member != "a" || got[0].Value != 6 {
		t.Fatalf("period %s = %+v, want a = 6", p.ID, got)
	}
}
