package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

func day(d int, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }

func newStore(t *testing.T, boards ...*ranking.Board) *store.Store {
	t.Helper()
	rdb := testenv.Redis(t).Client(t)
	s, err := store.New(rdb, boards, store.WithPrefix(testenv.Prefix(t)),
		store.WithClock(func() time.Time { return day(21, 12) }))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type row struct {
	m string
	v int64
}

func rows(es []store.Entry) []row {
	out := make([]row, len(es))
	for i, e := range es {
		out[i] = row{e.Member, e.Value}
	}
	return out
}

func eq(a, b []row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStoreRollingHandCase(t *testing.T) {
	unit, _ := ranking.ParseUnit("1d")
	b := &ranking.Board{Name: "r3", Window: ranking.WindowRolling, Every: unit, Periods: 3, Grace: 5 * time.Minute}
	s := newStore(t, b)
	ctx := t.Context()
	ups := []ranking.Update{
		{Board: "r3", Member: "a", Value: 5, Time: day(17, 1), MsgID: "1"},
		{Board: "r3", Member: "b", Value: 3, Time: day(17, 2), MsgID: "2"},
		{Board: "r3", Member: "a", Value: 2, Time: day(18, 1), MsgID: "3"},
		{Board: "r3", Member: "c", Value: 1, Time: day(20, 1), MsgID: "4"},
		{Board: "r3", Member: "c", Value: 1, Time: day(20, 1), MsgID: "4"},                         // same event continues: counted
		{Board: "r3", Member: "a", Value: 7, Time: day(17, 3), MsgID: "1"},                         // duplicate (non-contiguous)
		{Board: "r3", Member: "a", Value: 9, Time: day(19, 1), MsgID: "5", StreamTime: day(20, 1)}, // late: its partition is at the 20th 01:00
	}
	res, err := s.Apply(ctx, store.Group(ups))
	if err != nil {
		t.Fatal(err)
	}
	want := []ranking.Status{0, 0, 0, 0, 0, 1, 2}
	for i := range want {
		if res.Status[i] != want[i] {
			t.Fatalf("status %d = %v, want %v (all %v)", i, res.Status[i], want[i], res.Status)
		}
	}
	check := func(period string, want []row) {
		t.Helper()
		es, err := s.Entries(ctx, "r3", nil, period)
		if err != nil {
			t.Fatal(err)
		}
		if got := rows(es); !eq(got, want) {
			t.Fatalf("%s: got %v want %v", period, got, want)
		}
	}
	check("20261117", []row{{"a", 5}, {"b", 3}})
	check("20261118", []row{{"a", 7}, {"b", 3}})
	check("20261119", []row{{"a", 7}, {"b", 3}})
	check("20261120", []row{{"c", 2}, {"a", 2}})
	check("20261121", []row{{"c", 2}})
	check("20261122", []row{{"c", 2}})
	check("20261123", nil)
}

func TestMain(m *testing.M) { testenv.Main(m) }

func TestApplyEdgeCases(t *testing.T) {
	d1, _ := ranking.ParseUnit("1d")
	m30, _ := ranking.ParseUnit("30m")
	boards := []*ranking.Board{
		{Name: "tot", Window: ranking.WindowTotal},
		{Name: "day", Window: ranking.WindowPeriodic, Every: d1, Grace: 5 * time.Minute, Tiebreak: ranking.TieFirst},
		{Name: "zone30", Window: ranking.WindowPeriodic, Every: m30, Dims: []string{"zone"}, Grace: 5 * time.Minute},
		{Name: "r7", Window: ranking.WindowRolling, Every: d1, Periods: 7, Grace: 5 * time.Minute},
		{Name: "best", Window: ranking.WindowPeriodic, Every: d1, Aggregate: ranking.AggMax, Grace: 5 * time.Minute},
	}
	ctx := t.Context()

	t.Run("empty batch", func(t *testing.T) {
		s := newStore(t, boards...)
		res, err := s.Apply(ctx, nil)
		if err != nil || len(res.Status) != 0 {
			t.Fatalf("Apply(nil) = %v, %v", res, err)
		}
	})

	t.Run("one event touching many boards", func(t *testing.T) {
		s := newStore(t, boards...)
		at := day(21, 10)
		ev := []ranking.Update{
			{Board: "tot", Member: "a", Value: 7, Time: at, MsgID: "e1"},
			{Board: "day", Member: "a", Value: 7, Time: at, MsgID: "e1"},
			{Board: "zone30", Dims: []string{"z:{1}|"}, Member: "a", Value: 7, Time: at, MsgID: "e1"},
			{Board: "zone30", Dims: []string{""}, Member: "a", Value: 7, Time: at, MsgID: "e1"},
			{Board: "r7", Member: "a", Value: 7, Time: at, MsgID: "e1"},
			{Board: "best", Member: "a", Value: 7, Time: at, MsgID: "e1"},
		}
		for round, want := range []ranking.Status{ranking.StatusApplied, ranking.StatusDuplicate} {
			res, err := s.Apply(ctx, store.Group(ev))
			if err != nil {
				t.Fatal(err)
			}
			if n := res.Count(want); n != len(ev) {
				t.Fatalf("round %d: %d of %d updates %v: %v", round, n, len(ev), want, res.Status)
			}
		}
		for _, c := range []struct {
			board  string
			dims   []string
			period string
		}{{"tot", nil, "all"}, {"day", nil, "20261121"}, {"zone30", []string{"z:{1}|"}, "20261121T1000"},
			{"zone30", []string{""}, "20261121T1000"}, {"r7", nil, "20261121"}, {"r7", nil, "20261127"}, {"best", nil, "20261121"}} {
			es, err := s.Entries(ctx, c.board, c.dims, c.period)
			if err != nil {
				t.Fatal(err)
			}
			if got := rows(es); !eq(got, []row{{"a", 7}}) {
				t.Errorf("%s %v %s = %v, want [a 7]", c.board, c.dims, c.period, got)
			}
		}
		es, err := s.Entries(ctx, "r7", nil, "20261128")
		if err != nil || len(es) != 0 {
			t.Errorf("r7 20261128 (out of the window) = %v, %v; want empty", es, err)
		}
	})

	t.Run("NOSCRIPT after SCRIPT FLUSH", func(t *testing.T) {
		s := newStore(t, boards...)
		rdb := testenv.Redis(t).Client(t)
		for i := range 3 {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			res, err := s.Apply(ctx, store.Group([]ranking.Update{{Board: "tot", Member: "a", Value: 1, Time: day(21, 1), MsgID: fmt.Sprint(i)}}))
			if err != nil || res.Status[0] != ranking.StatusApplied {
				t.Fatalf("apply after flush %d: %v %v", i, res.Status, err)
			}
		}
		es, _ := s.Entries(ctx, "tot", nil, "all")
		if got := rows(es); !eq(got, []row{{"a", 3}}) {
			t.Fatalf("got %v", got)
		}
	})

	t.Run("redis restart between batches", func(t *testing.T) {
		srv := testenv.NewRedis(t, testenv.RedisOptions{Persist: true})
		rdb := srv.Client(t)
		s, err := store.New(rdb, boards, store.WithPrefix("restart"))
		if err != nil {
			t.Fatal(err)
		}
		batch := func(id string, v int64) []ranking.Update {
			return []ranking.Update{{Board: "r7", Member: "a", Value: v, Time: day(21, 1), MsgID: id}}
		}
		if _, err := s.Apply(ctx, store.Group(batch("1", 5))); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		// the script cache is empty after a restart, and the first call may
		// hit a closed pooled connection: retry like the consumer does
		var res ranking.Result
		for try := 0; ; try++ {
			if res, err = s.Apply(ctx, store.Group(append(batch("1", 5), batch("2", 4)...))); err == nil || try == 3 {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.Status[0] != ranking.StatusDuplicate || res.Status[1] != ranking.StatusApplied {
			t.Fatalf("statuses after restart %v", res.Status)
		}
		es, _ := s.Entries(ctx, "r7", nil, "20261121")
		if got := rows(es); !eq(got, []row{{"a", 9}}) {
			t.Fatalf("got %v", got)
		}
	})
}
