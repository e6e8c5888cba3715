package ranking_test

import (
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
)

func day(d int, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }

func newStore(t *testing.T, boards ...*ranking.Board) *ranking.Store {
	t.Helper()
	rdb := testenv.Redis(t).Client(t)
	s, err := ranking.NewStore(rdb, boards, ranking.WithPrefix(testenv.Prefix(t)),
		ranking.WithClock(func() time.Time { return day(21, 12) }))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type row struct {
	m string
	v int64
}

func rows(es []ranking.Entry) []row {
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
		{Board: "r3", Member: "c", Value: 1, Time: day(20, 1), MsgID: "4"}, // same event continues: counted
		{Board: "r3", Member: "a", Value: 7, Time: day(17, 3), MsgID: "1"}, // duplicate (non-contiguous)
		{Board: "r3", Member: "a", Value: 9, Time: day(19, 1), MsgID: "5"}, // late: stream at 20th 01:00
	}
	res, err := s.Apply(ctx, ups)
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
