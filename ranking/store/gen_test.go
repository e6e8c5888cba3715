package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestGenerations walks a board through a rebuild: live writes go to the
// active generation and, while a replay holds the lock, to the one being
// built; the switch moves readers atomically; dropping the old generation
// deletes its keys and nothing else.
func TestGenerations(t *testing.T) {
	unit, _ := ranking.ParseUnit("1d")
	a := &ranking.Board{Name: "a", Window: ranking.WindowPeriodic, Every: unit, Grace: time.Hour, Dims: []string{"zone"}}
	b := &ranking.Board{Name: "b", Window: ranking.WindowTotal}
	rsrv := testenv.Redis(t)
	rdb := rsrv.Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{a, b}, store.WithPrefix(prefix),
		store.WithClock(func() time.Time { return day(21, 12) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ev := func(id string, m string, v int64) []ranking.Update {
		return []ranking.Update{
			{Board: "a", Dims: []string{"z1"}, Member: m, Value: v, Time: day(21, 1), MsgID: id},
			{Board: "b", Member: m, Value: v, Time: day(21, 1), MsgID: id},
		}
	}
	apply := func(st *store.Store, ups ...[]ranking.Update) {
		t.Helper()
		var all []ranking.Update
		for _, u := range ups {
			all = append(all, u...)
		}
		if _, err := st.Apply(ctx, store.Group(all)); err != nil {
			t.Fatal(err)
		}
	}
	top := func(board string, dims []string) string {
		t.Helper()
		es, err := s.Entries(ctx, board, dims, "20261121")
		if board == "b" {
			es, err = s.Entries(ctx, board, dims, "all")
		}
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows(es))
	}

	apply(s, ev("1", "x", 1), ev("2", "y", 5)) // before the replay: gen 0 only

	if err := s.LockReplay(ctx, "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.LockReplay(ctx, "other", time.Minute); !errors.Is(err, store.ErrReplayLock) {
		t.Fatalf("second replay lock: %v, want ErrReplayLock", err)
	}
	g, stale, err := s.BeginBuild(ctx, "tok", []string{"a"})
	if err != nil || g != 1 || len(stale) != 0 {
		t.Fatalf("BeginBuild = %d, %v; want 1", g, err)
	}
	apply(s, ev("3", "x", 10)) // live: gen 0 and, for board a, gen 1

	// The replay rebuilds a from the log into gen 1: events 1, 2 and 3
	// (3 again: a duplicate there).
	build := s.Generation(g)
	var replayed []ranking.Update
	for _, e := range [][]ranking.Update{ev("1", "x", 1), ev("2", "y", 5), ev("3", "x", 10)} {
		replayed = append(replayed, e[0])
	}
	res, err := build.Apply(ctx, store.Group(replayed))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Status); got != "[applied applied duplicate]" {
		t.Fatalf("replay statuses = %s", got)
	}
	before := top("a", []string{"z1"})
	if want := "[{x 11} {y 5}]"; before != want {
		t.Fatalf("gen 0 board a = %s, want %s", before, want)
	}

	if err := s.Switch(ctx, "other", g, []string{"a"}); !errors.Is(err, store.ErrReplayLock) {
		t.Fatalf("switch without the lock: %v, want ErrReplayLock", err)
	}
	if err := s.Switch(ctx, "tok", g, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	gs, err := s.Generations(ctx)
	if err != nil || gs["a"] != (store.BoardGen{Active: 1, Building: -1}) {
		t.Fatalf("generations after the switch = %v, %v", gs, err)
	}
	if got := top("a", []string{"z1"}); got != before {
		t.Fatalf("gen 1 board a = %s, want %s", got, before)
	}
	if p, err := s.PendingDrops(ctx); err != nil || fmt.Sprint(p) != "map[a:[0]]" {
		t.Fatalf("pending drops after the switch = %v, %v; want a: [0]", p, err)
	}
	n, err := s.DropGeneration(ctx, 0, []string{"a"}, 2)
	if err != nil || n == 0 {
		t.Fatalf("DropGeneration = %d, %v", n, err)
	}
	if err := s.MarkDropped(ctx, "tok", "a", 0); err != nil {
		t.Fatal(err)
	}
	if p, err := s.PendingDrops(ctx); err != nil || len(p) != 0 {
		t.Fatalf("pending drops after MarkDropped = %v, %v; want none", p, err)
	}
	if keys, _ := rdb.Keys(ctx, prefix+":{a|*").Result(); len(keys) != 0 {
		t.Fatalf("gen 0 keys of a left: %v", keys)
	}
	if keys, _ := rdb.Keys(ctx, prefix+":g1:{a|*").Result(); len(keys) == 0 {
		t.Fatal("gen 1 keys of a gone")
	}
	if got := top("b", nil); got != "[{x 11} {y 5}]" {
		t.Fatalf("board b = %s", got)
	}
	apply(s, ev("4", "y", 7)) // after the switch: a in gen 1, b in gen 0
	if got := top("a", []string{"z1"}); got != "[{y 12} {x 11}]" {
		t.Fatalf("board a after the switch = %s", got)
	}

	if err := s.UnlockReplay(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	// A build whose replay died: its lock expires and live writes stop
	// going to it.
	if err := s.LockReplay(ctx, "tok2", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	g2, _, err := s.BeginBuild(ctx, "tok2", []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	if gs, _ := s.Generations(ctx); gs["b"].Building != g2 {
		t.Fatalf("building = %v, want %d", gs["b"], g2)
	}
	time.Sleep(400 * time.Millisecond)
	if gs, _ := s.Generations(ctx); gs["b"].Building != -1 {
		t.Fatalf("building after the lock expired = %v, want none", gs["b"])
	}
	// The next replay learns of the dead build, to drop it.
	if err := s.LockReplay(ctx, "tok3", time.Minute); err != nil {
		t.Fatal(err)
	}
	g3, stale, err := s.BeginBuild(ctx, "tok3", []string{"b"})
	if err != nil || g3 != g2+1 || stale["b"] != g2 {
		t.Fatalf("BeginBuild after a dead build = %d, %v, %v; want %d, stale b=%d", g3, stale, err, g2+1, g2)
	}
	if p, err := s.PendingDrops(ctx); err != nil || fmt.Sprint(p["b"]) != fmt.Sprint([]int{g2}) {
		t.Fatalf("pending drops after a dead build = %v, %v; want b: [%d]", p, err, g2)
	}
}

// TestReservedBuild: a generation ReserveBuild hands out is written by its
// replay alone (live writers do not know of it) and listed to delete until
// BeginReservedBuild makes it a build like BeginBuild's; one whose replay
// died before that is left for the next replay to delete.
func TestReservedBuild(t *testing.T) {
	b := &ranking.Board{Name: "b", Window: ranking.WindowTotal}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	apply := func(st *store.Store, id string, v int64) {
		t.Helper()
		if _, err := st.Apply(ctx, []store.Event{{ID: id, Updates: []ranking.Update{{Board: "b", Member: "m", Value: v, Time: day(21, 1), MsgID: id}}}}); err != nil {
			t.Fatal(err)
		}
	}
	score := func(st *store.Store) string {
		t.Helper()
		es, err := st.Entries(ctx, "b", nil, "all")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows(es))
	}
	if _, err := s.ReserveBuild(ctx, "tok", []string{"b"}); !errors.Is(err, store.ErrReplayLock) {
		t.Fatalf("ReserveBuild without the lock: %v, want ErrReplayLock", err)
	}
	if err := s.LockReplay(ctx, "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	g, err := s.ReserveBuild(ctx, "tok", []string{"b"})
	if err != nil || g != 1 {
		t.Fatalf("ReserveBuild = %d, %v; want 1", g, err)
	}
	if gs, err := s.Generations(ctx); err != nil || gs["b"].Building == g {
		t.Fatalf("generations of a reserved build = %v, %v; want %d not building", gs, err, g)
	}
	if p, err := s.PendingDrops(ctx); err != nil || fmt.Sprint(p) != "map[b:[1]]" {
		t.Fatalf("pending drops with a reserved build = %v, %v; want b: [1]", p, err)
	}
	apply(s, "live1", 2)             // live: gen 0 only
	apply(s.Generation(g), "old", 5) // the replay, alone in gen 1
	if got, want := score(s), "[{m 2}]"; got != want {
		t.Fatalf("gen 0 = %s, want %s", got, want)
	}
	if got, want := score(s.Generation(g)), "[{m 5}]"; got != want {
		t.Fatalf("reserved gen 1 = %s, want %s (no live write)", got, want)
	}

	stale, err := s.BeginReservedBuild(ctx, "tok", g, []string{"b"})
	if err != nil || len(stale) != 0 {
		t.Fatalf("BeginReservedBuild = %v, %v", stale, err)
	}
	if gs, _ := s.Generations(ctx); gs["b"].Building != g {
		t.Fatalf("building = %v, want %d", gs["b"], g)
	}
	if p, err := s.PendingDrops(ctx); err != nil || len(p) != 0 {
		t.Fatalf("pending drops after BeginReservedBuild = %v, %v; want none", p, err)
	}
	apply(s, "live2", 3) // live: both
	if got, want := score(s.Generation(g)), "[{m 8}]"; got != want {
		t.Fatalf("gen 1 after a live write = %s, want %s", got, want)
	}
	if err := s.Switch(ctx, "tok", g, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.PendingDrops(ctx); err != nil || fmt.Sprint(p) != "map[b:[0]]" {
		t.Fatalf("pending drops after the switch = %v, %v; want b: [0]", p, err)
	}
	if _, err := s.BeginReservedBuild(ctx, "tok", 7, []string{"b"}); !errors.Is(err, store.ErrReplayLock) {
		t.Fatalf("BeginReservedBuild of a generation never handed out: %v, want ErrReplayLock", err)
	}

	// A reservation whose replay died is deleted by the next replay.
	g2, err := s.ReserveBuild(ctx, "tok", []string{"b"})
	if err != nil || g2 != 2 {
		t.Fatalf("second ReserveBuild = %d, %v; want 2", g2, err)
	}
	if err := s.UnlockReplay(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	if p, err := s.PendingDrops(ctx); err != nil || fmt.Sprint(p) != "map[b:[0 2]]" {
		t.Fatalf("pending drops after a dead reservation = %v, %v; want b: [0 2]", p, err)
	}
}
