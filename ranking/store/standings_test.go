package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// recorder is a StandingsPublisher that keeps what it was given; its
// first call "crashes" after the write (returns an error), as a process
// killed between Kafka's acknowledgement and recording it would.
type recorder struct {
	mu    sync.Mutex
	calls int
	msgs  []store.StandingsMessage
}

func (r *recorder) Publish(_ context.Context, msgs []store.StandingsMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.msgs = append(r.msgs, msgs...)
	if r.calls == 1 {
		return errors.New("crashed after the write")
	}
	return nil
}

func (r *recorder) snapshot() []store.StandingsMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]store.StandingsMessage(nil), r.msgs...)
}

// TestStandingsSealRepeatRevise: a final period is sealed once; a
// publication whose acknowledgement was not recorded is repeated with the
// same bytes; nothing is sealed before the grace ends; after a switch to a
// generation whose standings differ, revision 1 is published.
func TestStandingsSealRepeatRevise(t *testing.T) {
	b := ranking.NewBoard("h")
	every, err := ranking.ParseUnit("1h")
	if err != nil {
		t.Fatal(err)
	}
	b.Window, b.Every, b.Dims, b.Grace = ranking.WindowPeriodic, every, []string{"zone"}, 5*time.Minute
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := store.New(testenv.Redis(t).Client(t), []*ranking.Board{b}, store.WithPrefix(testenv.Prefix(t)),
		store.WithBoardTopics(map[string][]string{"h": {"gift"}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	h10 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	apply := func(st *store.Store, gen string, vals map[string]int64, at time.Time, marks ...store.Mark) {
		t.Helper()
		var evs []store.Event
		for m, v := range vals {
			id := m + "/" + gen
			evs = append(evs, store.Event{ID: id, Updates: []ranking.Update{{Board: "h", Dims: []string{"z"}, Member: m, Value: v,
				Time: at, MsgID: id, StreamTime: at}}})
		}
		if _, err := st.Apply(ctx, evs, marks...); err != nil {
			t.Fatal(err)
		}
	}
	apply(s, "0", map[string]int64{"a": 5, "b": 3, "c": 1}, h10.Add(20*time.Minute),
		store.Mark{Topic: "gift", Partition: 0, Offset: 10, Time: h10.Add(64 * time.Minute)})

	rec := &recorder{}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		_ = store.RunStandings(rctx, s, store.StandingsSchedule{Boards: map[string]store.Publish{"h": {Top: 2}},
			Publisher: rec, Interval: 20 * time.Millisecond, LockTTL: time.Second})
	})
	time.Sleep(300 * time.Millisecond)
	if got := rec.snapshot(); len(got) != 0 {
		t.Fatalf("published before the grace ended: %s", got[0].Value)
	}
	if _, err := s.Apply(ctx, nil, store.Mark{Topic: "gift", Partition: 0, Offset: 11, Time: h10.Add(65 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(n int) []store.StandingsMessage {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if got := rec.snapshot(); len(got) >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d publications: %v", n, rec.snapshot())
			}
		}
	}
	got := waitFor(2)
	if got[0].ID != "h|z/20260301T1000/0" || string(got[0].Value) != string(got[1].Value) || got[0].ID != got[1].ID {
		t.Fatalf("the repeated publication differs:\n%s %s\n%s %s", got[0].ID, got[0].Value, got[1].ID, got[1].Value)
	}
	var doc struct {
		Entries []struct {
			Member string
			Raw    int64
		}
		Counts struct{ Members int }
		Period struct{ Start, End string }
	}
	if err := json.Unmarshal(got[0].Value, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Entries) != 2 || doc.Entries[0].Member != "a" || doc.Entries[1].Member != "b" || doc.Counts.Members != 3 ||
		doc.Period.Start != "2026-03-01T10:00:00Z" {
		t.Fatalf("unexpected standings %s", got[0].Value)
	}
	api, err := s.Standings(ctx, "h", []string{"z"}, "20260301T1000")
	if err != nil || string(api) != string(got[0].Value) {
		t.Fatalf("Standings: %v %s", err, api)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(rec.snapshot()); n != 2 {
		t.Fatalf("published %d times, want 2 (the write and its repeat)", n)
	}

	// A rebuild whose standings differ: revision 1.
	const token = "test-replay"
	if err := s.LockReplay(ctx, token, time.Minute); err != nil {
		t.Fatal(err)
	}
	g, _, err := s.BeginBuild(ctx, token, []string{"h"})
	if err != nil {
		t.Fatal(err)
	}
	apply(s.Generation(g), "g", map[string]int64{"a": 5, "b": 7, "c": 1}, h10.Add(20*time.Minute))
	if err := s.Switch(ctx, token, g, []string{"h"}); err != nil {
		t.Fatal(err)
	}
	got = waitFor(3)
	if got[2].ID != "h|z/20260301T1000/1" || got[2].Revision != 1 || got[2].Key != got[0].Key {
		t.Fatalf("revision: got %s (key %s)", got[2].ID, got[2].Key)
	}
	if err := json.Unmarshal(got[2].Value, &doc); err != nil || doc.Entries[0].Member != "b" {
		t.Fatalf("revision 1: %v %s", err, got[2].Value)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(rec.snapshot()); n != 3 {
		t.Fatalf("published %d times, want 3", n)
	}
}
