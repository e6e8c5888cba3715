package store_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestApplyFromContinuity: every call of a checked batch expects the
// position record the call before it left; a batch that expects another
// record than Redis holds is refused whole, with the record Redis holds,
// and changes nothing; a batch split into several calls leaves "k of n"
// records that resume at its start until its last call.
func TestApplyFromContinuity(t *testing.T) {
	ctx := t.Context()
	b := &ranking.Board{Name: "tot", Window: ranking.WindowTotal}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix), store.WithCallSize(2))
	if err != nil {
		t.Fatal(err)
	}
	t0 := day(21, 10)
	events := func(from, to int64) []store.Event {
		var evs []store.Event
		for o := from; o < to; o++ {
			id := fmt.Sprintf("gift/0/%d", o)
			evs = append(evs, store.Event{ID: id, Updates: []ranking.Update{{
				Board: "tot", Member: fmt.Sprintf("m%d", o%2), Value: 10, Time: t0, MsgID: id}}})
		}
		return evs
	}
	span := func(from, to int64, expect string) store.Span {
		return store.Span{Topic: "gift", Partition: 0, From: from, To: to,
			FromTime: t0.Add(time.Duration(from) * time.Second), ToTime: t0.Add(time.Duration(to) * time.Second), Expect: expect}
	}
	score := func(m string) float64 {
		t.Helper()
		v, err := rdb.ZScore(ctx, prefix+":{tot}:t:all", m).Result()
		if err == redis.Nil {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	pos := func() store.Position {
		t.Helper()
		ps, err := s.Positions(ctx, []store.Span{{Topic: "gift", Partition: 0}})
		if err != nil {
			t.Fatal(err)
		}
		return ps[0]
	}

	if p := pos(); p.Exists() {
		t.Fatalf("position before any batch = %+v, want none", p)
	}
	// 5 events in calls of 2 updates: 3 calls.
	if _, err := s.ApplyFrom(ctx, events(0, 5), []store.Span{span(0, 5, "")}); err != nil {
		t.Fatal(err)
	}
	p := pos()
	if off, at := p.Resume(); !p.Done || off != 5 || !at.Equal(t0.Add(5*time.Second)) || p.Record == "" {
		t.Fatalf("after [0,5): %+v, want done at 5 (stream time %v)", p, t0.Add(5*time.Second))
	}
	if score("m0") != 30 || score("m1") != 20 {
		t.Fatalf("after [0,5): m0 %v m1 %v, want 30 20", score("m0"), score("m1"))
	}
	st, err := s.StreamTimes(ctx, []store.Mark{{Topic: "gift", Partition: 0, Offset: 5}})
	if err != nil || !st[0].Equal(t0.Add(5*time.Second)) {
		t.Fatalf("stream time at 5 = %v, %v; want %v (the batch's mark)", st, err, t0.Add(5*time.Second))
	}

	// A batch that expects nothing where Redis holds [0,5) is refused, and
	// applies nothing.
	_, err = s.ApplyFrom(ctx, events(5, 7), []store.Span{span(5, 7, "")})
	pe, ok := store.IsPositionError(err)
	if !ok || len(pe.Positions) != 1 || pe.Positions[0].Record != p.Record {
		t.Fatalf("expecting no record: err %v, want a PositionError naming %q", err, p.Record)
	}
	if score("m0") != 30 || score("m1") != 20 {
		t.Fatalf("a refused batch applied: m0 %v m1 %v, want 30 20", score("m0"), score("m1"))
	}
	// With the right expectation it applies (nothing of it was deduped).
	res, err := s.ApplyFrom(ctx, events(5, 7), []store.Span{span(5, 7, p.Record)})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range res.Status {
		if st != ranking.StatusApplied {
			t.Fatalf("update %d of [5,7): %v, want applied", i, st)
		}
	}
	if score("m0") != 40 || score("m1") != 30 {
		t.Fatalf("after [5,7): m0 %v m1 %v, want 40 30", score("m0"), score("m1"))
	}

	// Redis lost the last two calls of a batch [7,12): the record says its
	// first call ran, and resumes at 7. (The first call's events are not
	// written here: a new attempt must not take the old attempt's record
	// for its own first call's, so all 5 events must count now.)
	p = pos()
	half := store.Span{Topic: "gift", Partition: 0, From: 7, To: 12, FromTime: t0.Add(7 * time.Second), ToTime: t0.Add(12 * time.Second)}
	rec := fmt.Sprintf("7:%d:12:%d:1:3:x", half.FromTime.UnixMilli(), half.ToTime.UnixMilli())
	if err := rdb.HSet(ctx, prefix+":pos", "gift|0", rec).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyFrom(ctx, events(7, 12), []store.Span{span(7, 12, p.Record)})
	if pe, ok := store.IsPositionError(err); !ok || pe.Positions[0].Done {
		t.Fatalf("after losing a batch's last calls: %v, want a PositionError with a record not done", err)
	} else if off, at := pe.Positions[0].Resume(); off != 7 || !at.Equal(half.FromTime) {
		t.Fatalf("resume at %d (%v), want 7 (%v)", off, at, half.FromTime)
	}
	if _, err := s.ApplyFrom(ctx, events(7, 12), []store.Span{span(7, 12, rec)}); err != nil {
		t.Fatal(err)
	}
	if score("m0") != 60 || score("m1") != 60 {
		t.Fatalf("after [7,12): m0 %v m1 %v, want 60 60", score("m0"), score("m1"))
	}

	// Redis lost everything (keys of this test's prefix deleted): refused,
	// with no record.
	p = pos()
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyFrom(ctx, events(12, 13), []store.Span{span(12, 13, p.Record)})
	if pe, ok := store.IsPositionError(err); !ok || pe.Positions[0].Exists() {
		t.Fatalf("after the wipe: %v, want a PositionError with no record", err)
	}
	if score("m0") != 0 {
		t.Fatalf("a refused batch applied after the wipe: m0 %v", score("m0"))
	}
}

// TestApplyFromGensGone: once live consumption has seen the boards'
// generation pointers, a batch refuses to write when Redis lost them (it
// would write into a generation readers no longer use), until a replay
// rebuilt the boards (RaisePositions).
func TestApplyFromGensGone(t *testing.T) {
	ctx := t.Context()
	b := &ranking.Board{Name: "tot", Window: ranking.WindowTotal}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, prefix+":gens", "next", "3", "a:tot", "3").Err(); err != nil {
		t.Fatal(err)
	}
	ev := func(id string) []store.Event {
		return []store.Event{{ID: id, Updates: []ranking.Update{{Board: "tot", Member: "m", Value: 1, Time: day(21, 10), MsgID: id}}}}
	}
	expect := ""
	apply := func(id string, from int64) error {
		_, err := s.ApplyFrom(ctx, ev(id), []store.Span{{Topic: "gift", Partition: 0, From: from, To: from + 1, Expect: expect}})
		if err == nil {
			ps, perr := s.Positions(ctx, []store.Span{{Topic: "gift", Partition: 0}})
			if perr != nil {
				t.Fatal(perr)
			}
			expect = ps[0].Record
		}
		return err
	}
	if err := apply("a", 0); err != nil {
		t.Fatal(err)
	}
	if v, _ := rdb.ZScore(ctx, prefix+":g3:{tot}:t:all", "m").Result(); v != 1 {
		t.Fatalf("generation 3 holds %v, want 1", v)
	}
	intact := func() bool {
		t.Helper()
		ok, err := s.GensIntact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !intact() {
		t.Fatal("GensIntact = false with the hash in place")
	}
	if err := rdb.Del(ctx, prefix+":gens").Err(); err != nil {
		t.Fatal(err)
	}
	err = apply("b", 1)
	if pe, ok := store.IsPositionError(err); !ok || !pe.GensGone() || pe.Gens != "0" || pe.GensExpected != "3" {
		t.Fatalf("after the gens hash went: %v, want a PositionError with GensGone (0, expected 3)", err)
	}
	if n, _ := rdb.Exists(ctx, prefix+":{tot}:t:all").Result(); n != 0 {
		t.Fatal("a refused batch wrote generation 0")
	}
	if intact() {
		t.Fatal("GensIntact = true with the hash gone")
	}
	// A replay recreates the hash and records its counter.
	if err := rdb.HSet(ctx, prefix+":gens", "next", "1", "a:tot", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if intact() {
		t.Fatal("GensIntact = true with a counter below the one seen")
	}
	if _, err := s.RaisePositions(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if !intact() {
		t.Fatal("GensIntact = false after RaisePositions")
	}
	if err := apply("b", 1); err != nil {
		t.Fatal(err)
	}
	if v, _ := rdb.ZScore(ctx, prefix+":g1:{tot}:t:all", "m").Result(); v != 1 {
		t.Fatalf("generation 1 holds %v, want 1", v)
	}
}

// TestRaisePositions: a replay's end offsets become the positions of
// partitions Redis has no record of, or a record below them; records
// ahead stay.
func TestRaisePositions(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { testRaisePositions(t, testenv.Redis(t).Client(t)) })
	// the position records and the latest marks are in different slots
	t.Run("cluster", func(t *testing.T) { testRaisePositions(t, testenv.Cluster(t).Client(t)) })
}

func testRaisePositions(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	b := &ranking.Board{Name: "tot", Window: ranking.WindowTotal}
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	at := day(21, 10)
	apply := func(p int, from, to int64) {
		t.Helper()
		ps, err := s.Positions(ctx, []store.Span{{Topic: "gift", Partition: p}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApplyFrom(ctx, nil, []store.Span{{Topic: "gift", Partition: p, From: from, To: to, Expect: ps[0].Record}}); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, 0, 50)  // behind the replay's end
	apply(2, 0, 200) // ahead of it
	n, err := s.RaisePositions(ctx, []store.Mark{
		{Topic: "gift", Partition: 0, Offset: 100, Time: at},
		{Topic: "gift", Partition: 1, Offset: 100, Time: at},
		{Topic: "gift", Partition: 2, Offset: 100, Time: at},
	})
	if err != nil || n != 2 {
		t.Fatalf("raised %d, %v; want 2", n, err)
	}
	ps, err := s.Positions(ctx, []store.Span{{Topic: "gift", Partition: 0}, {Topic: "gift", Partition: 1}, {Topic: "gift", Partition: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{100, 100, 200} {
		off, tm := ps[i].Resume()
		if !ps[i].Done || off != want {
			t.Errorf("partition %d resumes at %d (done %v), want %d", i, off, ps[i].Done, want)
		}
		if want == 100 && !tm.Equal(at) {
			t.Errorf("partition %d: stream time %v, want %v", i, tm, at)
		}
	}
	// the latest marks are raised with them (partition 2's stays ahead)
	marks, err := s.LastMarks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int64{}
	for _, m := range marks {
		got[m.Partition] = m.Offset
	}
	if want := map[int]int64{0: 100, 1: 100, 2: 200}; !maps.Equal(got, want) {
		t.Errorf("latest marks at %v, want %v", got, want)
	}
}

// TestReplayLockLost: a replay whose lock and build mark Redis lost can
// neither renew the lock nor switch (it would switch nothing and report
// success).
func TestReplayLockLost(t *testing.T) {
	ctx := t.Context()
	b := &ranking.Board{Name: "tot", Window: ranking.WindowTotal}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LockReplay(ctx, "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	g, _, err := s.BeginBuild(ctx, "tok", []string{"tot"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RenewReplay(ctx, "tok", time.Minute); err != nil {
		t.Fatalf("renewing a held lock: %v", err)
	}
	if err := rdb.Del(ctx, prefix+":gens").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewReplay(ctx, "tok", time.Minute); !errors.Is(err, store.ErrReplayLock) {
		t.Fatalf("renewing a lost lock: %v, want ErrReplayLock", err)
	}
	if err := s.LockReplay(ctx, "tok", time.Minute); err != nil { // taken again, as a new replay would
		t.Fatal(err)
	}
	if err := s.Switch(ctx, "tok", g, []string{"tot"}); !errors.Is(err, store.ErrReplayLock) {
		t.Fatalf("switching to a build Redis lost: %v, want ErrReplayLock", err)
	}
	if gs, err := s.Generations(ctx); err != nil || gs["tot"].Active != 0 {
		t.Fatalf("generations after the refused switch: %v, %v; want tot active 0", gs, err)
	}
}

// TestPositionsLegacy: a partition without a position record resumes at
// its latest stream time mark when a rankd version before position records
// wrote it, but never from a replay's marks, which go to the marks' sorted
// sets only: after Redis lost everything, the partitions live consumption
// halted must stay halted until the replay's switch raises their positions
// (consumption resumed earlier would apply to the old generation, whose
// dedupe keys are gone, and dead-letter by its verdicts), and the replay's
// marks must not make periods final before the switch (LowWatermark) while
// readers still see the old generation.
func TestPositionsLegacy(t *testing.T) {
	ctx := t.Context()
	b := &ranking.Board{Name: "tot", Window: ranking.WindowTotal}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	at := day(21, 10)
	now := day(21, 11)
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	// what a version before position records left: a latest mark only
	if err := rdb.HSet(ctx, prefix+":wm:last", "gift|1", fmt.Sprintf("70:%d:%d", at.UnixMilli(), now.UnixMilli())).Err(); err != nil {
		t.Fatal(err)
	}
	// a replay's build writes marks of partitions 1 (beyond the legacy
	// mark) and 2
	if _, err := s.Generation(1).Apply(ctx, nil,
		store.Mark{Topic: "gift", Partition: 1, Offset: 80, Time: at},
		store.Mark{Topic: "gift", Partition: 2, Offset: 90, Time: at}); err != nil {
		t.Fatal(err)
	}
	positions := func() []store.Position {
		t.Helper()
		ps, err := s.Positions(ctx, []store.Span{{Topic: "gift", Partition: 1}, {Topic: "gift", Partition: 2}})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	ps := positions()
	if off, tm := ps[0].Resume(); !ps[0].Legacy || !ps[0].Done || off != 70 || !tm.Equal(at) {
		t.Errorf("partition 1: %s (legacy %v), want legacy, done at 70 with stream time %v", ps[0], ps[0].Legacy, at)
	}
	if ps[1].Exists() {
		t.Errorf("partition 2: %s, want none: a replay's mark is not a position", ps[1])
	}
	lastMarks := func() []store.PartitionMark {
		t.Helper()
		marks, err := s.LastMarks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(marks, func(a, b store.PartitionMark) int { return a.Partition - b.Partition })
		return marks
	}
	if m := lastMarks(); len(m) != 1 || m[0].Offset != 70 || !m[0].Written.Equal(now) {
		t.Errorf("latest marks %+v, want only gift/1 at 70 written %v (the legacy one)", m, now)
	}
	// the replay's marks are in the sorted sets, for stream times
	if tms, err := s.StreamTimes(ctx, []store.Mark{{Topic: "gift", Partition: 2, Offset: 90}}); err != nil || !tms[0].Equal(at) {
		t.Errorf("stream time of gift/2 at 90: %v, %v; want %v", tms, err, at)
	}
	// the switch's RaisePositions makes them positions and latest marks
	if n, err := s.RaisePositions(ctx, []store.Mark{{Topic: "gift", Partition: 1, Offset: 80, Time: at},
		{Topic: "gift", Partition: 2, Offset: 90, Time: at}}); err != nil || n != 2 {
		t.Fatalf("raised %d, %v; want 2", n, err)
	}
	ps = positions()
	for i, want := range []int64{80, 90} {
		if off, _ := ps[i].Resume(); ps[i].Legacy || !ps[i].Done || off != want {
			t.Errorf("partition %d after the raise: %s (legacy %v), want a record done at %d", i+1, ps[i], ps[i].Legacy, want)
		}
	}
	if m := lastMarks(); len(m) != 2 || m[0].Offset != 80 || m[1].Offset != 90 || !m[1].Time.Equal(at) || !m[1].Written.Equal(now) {
		t.Errorf("latest marks %+v, want gift/1 at 80 and gift/2 at 90, stream time %v, written %v", m, at, now)
	}
}

// TestClusterPositionsForward: on a cluster, where ApplyFrom checks no
// record, a batch that a worker of an ended group generation finishes late
// (it retried through an outage while another consumer applied the
// partition further and committed) leaves the newer record in place: set
// back, it would read as Redis having lost the newer batches (a false
// rewind, seen in TestChaos/cluster). A record behind is still raised.
func TestClusterPositionsForward(t *testing.T) {
	rdb := testenv.Cluster(t).Client(t)
	ctx := t.Context()
	b := &ranking.Board{Name: "tot", Window: ranking.WindowTotal}
	s, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(testenv.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	at := day(21, 10)
	ev := func(id string) []store.Event {
		return store.Group([]ranking.Update{{Board: "tot", Member: "m", Value: 1, Time: at, MsgID: id}})
	}
	apply := func(id string, from, to int64) {
		t.Helper()
		if _, err := s.ApplyFrom(ctx, ev(id), []store.Span{{Topic: "gift", Partition: 0, From: from, To: to, FromTime: at, ToTime: at}}); err != nil {
			t.Fatal(err)
		}
	}
	resume := func() int64 {
		t.Helper()
		ps, err := s.Positions(ctx, []store.Span{{Topic: "gift", Partition: 0}})
		if err != nil {
			t.Fatal(err)
		}
		off, _ := ps[0].Resume()
		return off
	}
	apply("a", 0, 10)
	apply("b", 10, 20) // the partition's new consumer, further on
	apply("c", 5, 10)  // the old one's late batch
	if got := resume(); got != 20 {
		t.Fatalf("after a late batch up to 10, the partition resumes at %d, want 20", got)
	}
	apply("d", 20, 30)
	if got := resume(); got != 30 {
		t.Fatalf("after the batch up to 30, the partition resumes at %d, want 30", got)
	}
	// the records leave the gens counter last seen alone (none here)
	if ok, err := s.GensIntact(ctx); !ok || err != nil {
		t.Fatalf("GensIntact = %v, %v after live records on a cluster, want true", ok, err)
	}
}
