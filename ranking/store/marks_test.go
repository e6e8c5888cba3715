package store_test

import (
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestMarksAndFinality: stream time marks are found at or below an offset,
// and a period is final once every non-idle partition feeding the board
// has passed its end plus the grace.
func TestMarksAndFinality(t *testing.T) {
	unit, _ := ranking.ParseUnit("1h")
	b := &ranking.Board{Name: "h", Window: ranking.WindowPeriodic, Every: unit, Grace: 5 * time.Minute}
	now := day(21, 12)
	clock := func() time.Time { return now }
	s, err := store.New(testenv.Redis(t).Client(t), []*ranking.Board{b}, store.WithPrefix(testenv.Prefix(t)),
		store.WithClock(clock), store.WithIdleTimeout(time.Minute),
		store.WithBoardTopics(map[string][]string{"h": {"gift"}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	mark := func(topic string, p int, off int64, at time.Time) {
		t.Helper()
		if _, err := s.Apply(ctx, nil, store.Mark{Topic: topic, Partition: p, Offset: off, Time: at}); err != nil {
			t.Fatal(err)
		}
	}
	mark("gift", 0, 100, day(21, 9))
	mark("gift", 0, 250, day(21, 11))
	mark("gift", 1, 40, day(21, 10).Add(4*time.Minute))
	mark("like", 0, 7, day(20, 1)) // feeds other boards only

	got, err := s.StreamTimes(ctx, []store.Mark{
		{Topic: "gift", Partition: 0, Offset: 99}, {Topic: "gift", Partition: 0, Offset: 100},
		{Topic: "gift", Partition: 0, Offset: 249}, {Topic: "gift", Partition: 0, Offset: 900},
		{Topic: "gift", Partition: 2, Offset: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{{}, day(21, 9), day(21, 9), day(21, 11), {}}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("stream time %d = %v, want %v", i, got[i], want[i])
		}
	}

	final := func(h int) bool {
		t.Helper()
		ok, err := s.Final(ctx, "h", ranking.Period{ID: "x", Start: day(21, h), End: day(21, h+1)})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// Low watermark: partition 1 at 10:04 (like is not a feed of h).
	if !final(8) || final(9) || final(10) {
		t.Fatalf("final 08:00 %v, 09:00 %v, 10:00 %v; want true, false, false", final(8), final(9), final(10))
	}
	if p, err := s.OldestOpen(ctx, "h"); err != nil || !p.Start.Equal(day(21, 9)) {
		t.Fatalf("oldest open period = %v, %v; want the one at 09:00", p, err)
	}
	// Partition 1 goes idle; partition 0 (at 11:00) alone holds the board.
	now = now.Add(30 * time.Second)
	mark("gift", 0, 300, day(21, 11))
	now = now.Add(45 * time.Second)
	time.Sleep(1100 * time.Millisecond) // marks are cached for a second
	if !final(9) || final(10) {
		t.Fatalf("with partition 1 idle: final 09:00 %v, 10:00 %v; want true, false", final(9), final(10))
	}
}
