package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// queryStore returns a store (clock: 2026-11-21 12:00 UTC) with these boards:
//
//	day    periodic 1d, desc, tiebreak first
//	       20261121: a 10, c 7 (02:00), b 7 (03:00), d 7 (04:00), e 3
//	       20261120: x 9, b 5 (02:00), c 5 (03:00), a 1
//	lap    periodic 1d, asc, min, tiebreak first
//	       20261121: m2 20 (02:00), m3 20 (03:00), m1 30, m4 50
//	zoned  total, dims [zone]: z1: p 4; z2: q 8, r 2
//	kt     periodic 1d, keep_top 2: 20261121: u1 50, u2 40, u3 30, u4 20
//	r3     rolling 3 x 1d, no tiebreak: P(18) a 5; P(19) b 3, a 1, d 2;
//	       P(20) c 2; nothing on the 21st
//	many   periodic 1d, no tiebreak: 20261121: m00001..m10002 with values 1..10002
func queryStore(t *testing.T) *store.Store {
	t.Helper()
	d1, err := ranking.ParseUnit("1d")
	if err != nil {
		t.Fatal(err)
	}
	periodic := func(name string) *ranking.Board {
		return &ranking.Board{Name: name, Window: ranking.WindowPeriodic, Every: d1, Grace: 5 * time.Minute}
	}
	dayB := periodic("day")
	dayB.Tiebreak = ranking.TieFirst
	lap := periodic("lap")
	lap.Order, lap.Aggregate, lap.Tiebreak = ranking.Asc, ranking.AggMin, ranking.TieFirst
	kt := periodic("kt")
	kt.Tiebreak, kt.KeepTop = ranking.TieFirst, 2
	zoned := &ranking.Board{Name: "zoned", Window: ranking.WindowTotal, Dims: []string{"zone"}}
	r3 := &ranking.Board{Name: "r3", Window: ranking.WindowRolling, Every: d1, Periods: 3, Grace: 5 * time.Minute}
	many := periodic("many")
	s := newStore(t, dayB, lap, kt, zoned, r3, many)

	up := func(board, member string, v int64, at time.Time, dims ...string) ranking.Update {
		return ranking.Update{Board: board, Dims: dims, Member: member, Value: v, Time: at}
	}
	ups := []ranking.Update{
		up("day", "x", 9, day(20, 1)), up("day", "b", 5, day(20, 2)), up("day", "c", 5, day(20, 3)), up("day", "a", 1, day(20, 4)),
		up("day", "a", 10, day(21, 1)), up("day", "c", 7, day(21, 2)), up("day", "b", 7, day(21, 3)), up("day", "d", 7, day(21, 4)), up("day", "e", 3, day(21, 5)),
		up("lap", "m1", 30, day(21, 1)), up("lap", "m2", 20, day(21, 2)), up("lap", "m3", 20, day(21, 3)), up("lap", "m4", 50, day(21, 4)),
		up("zoned", "p", 4, day(21, 1), "z1"), up("zoned", "q", 8, day(21, 1), "z2"), up("zoned", "r", 2, day(21, 2), "z2"),
		up("kt", "u1", 50, day(21, 1)), up("kt", "u2", 40, day(21, 2)), up("kt", "u3", 30, day(21, 3)), up("kt", "u4", 20, day(21, 4)),
		up("r3", "a", 5, day(18, 1)), up("r3", "b", 3, day(19, 1)), up("r3", "a", 1, day(19, 2)), up("r3", "d", 2, day(19, 3)), up("r3", "c", 2, day(20, 1)),
	}
	for i := 1; i <= 10002; i++ {
		ups = append(ups, up("many", fmt.Sprintf("m%05d", i), int64(i), day(21, 1)))
	}
	for i := range ups {
		ups[i].MsgID = fmt.Sprintf("ev%d", i)
	}
	res, err := s.Apply(t.Context(), store.Group(ups))
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Count(ranking.StatusApplied); n != len(ups) {
		t.Fatalf("applied %d of %d updates: %v", n, len(ups), res.Status)
	}
	return s
}

// ranked is an entry as the tests compare it: member, value, rank.
type ranked struct {
	m    string
	v    int64
	rank int64
}

func rankedOf(es []store.Entry) []ranked {
	out := make([]ranked, len(es))
	for i, e := range es {
		out[i] = ranked{e.Member, e.Value, e.Rank}
	}
	return out
}

func TestParseRankMode(t *testing.T) {
	tests := []struct {
		in   string
		want store.RankMode
		err  bool
	}{
		{"", store.RankRow, false},
		{"row", store.RankRow, false},
		{"competition", store.RankCompetition, false},
		{"dense", store.RankDense, false},
		{"Dense", 0, true},
		{"standard", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := store.ParseRankMode(tt.in)
			if tt.err {
				if !errors.Is(err, store.ErrBadRankMode) {
					t.Fatalf("err = %v, want ErrBadRankMode", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			if got.String() != tt.in && tt.in != "" {
				t.Fatalf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestQueryErrors(t *testing.T) {
	s := queryStore(t)
	ctx := t.Context()
	row := store.RankRow
	top := func(board string, dims []string, period string, limit int, mode store.RankMode) error {
		_, err := s.Top(ctx, board, dims, period, limit, mode)
		return err
	}
	member := func(board string, dims []string, m, period string) error {
		_, err := s.Member(ctx, board, dims, m, period, row)
		return err
	}
	around := func(board string, dims []string, m, period string, n int) error {
		_, err := s.Around(ctx, board, dims, m, period, n, row)
		return err
	}
	count := func(board string, dims []string, period string) error {
		_, err := s.Count(ctx, board, dims, period)
		return err
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"top unknown board", top("nope", nil, "current", 10, row), store.ErrUnknownBoard},
		{"top bad period format", top("day", nil, "2026-11-21", 10, row), store.ErrBadPeriod},
		{"top no such day", top("day", nil, "20261131", 10, row), store.ErrBadPeriod},
		{"top period of another unit", top("day", nil, "2026W47", 10, row), store.ErrBadPeriod},
		{"top total board period id", top("zoned", []string{"z1"}, "20261121", 10, row), store.ErrBadPeriod},
		{"top extra dims", top("day", []string{"x"}, "current", 10, row), store.ErrBadDims},
		{"top missing dims", top("zoned", nil, "current", 10, row), store.ErrBadDims},
		{"top limit 0", top("day", nil, "current", 0, row), store.ErrBadLimit},
		{"top limit 1001", top("day", nil, "current", 1001, row), store.ErrBadLimit},
		{"top bad mode", top("day", nil, "current", 10, store.RankMode(9)), store.ErrBadRankMode},
		{"member unknown board", member("nope", nil, "a", "current"), store.ErrUnknownBoard},
		{"member bad period", member("day", nil, "a", "yesterday"), store.ErrBadPeriod},
		{"member bad dims", member("zoned", []string{"z1", "z2"}, "p", "current"), store.ErrBadDims},
		{"around absent member", around("day", nil, "zz", "current", 2), store.ErrMemberNotFound},
		{"around member absent in period", around("day", nil, "x", "current", 2), store.ErrMemberNotFound},
		{"around empty board", around("day", nil, "a", "20261119", 2), store.ErrMemberNotFound},
		{"around negative n", around("day", nil, "a", "current", -1), store.ErrBadLimit},
		{"around n too large", around("day", nil, "a", "current", 501), store.ErrBadLimit},
		{"around unknown board", around("nope", nil, "a", "current", 1), store.ErrUnknownBoard},
		{"count unknown board", count("nope", nil, "current"), store.ErrUnknownBoard},
		{"count bad period", count("r3", nil, "2026112"), store.ErrBadPeriod},
		{"count bad dims", count("day", []string{""}, "current"), store.ErrBadDims},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("err = %v, want %v", tt.err, tt.want)
			}
		})
	}
}

func TestTop(t *testing.T) {
	s := queryStore(t)
	row, comp, dense := store.RankRow, store.RankCompetition, store.RankDense
	dayRows := []ranked{{"a", 10, 1}, {"c", 7, 2}, {"b", 7, 3}, {"d", 7, 4}, {"e", 3, 5}}
	dayPrev := []ranked{{"x", 9, 1}, {"b", 5, 2}, {"c", 5, 3}, {"a", 1, 4}}
	tests := []struct {
		name     string
		board    string
		dims     []string
		period   string
		limit    int
		mode     store.RankMode
		want     []ranked
		periodID string
		count    int64
		complete bool
	}{
		// equal values ordered by time (tiebreak first): c 02:00, b 03:00, d 04:00
		{"row", "day", nil, "current", 10, row, dayRows, "20261121", 5, true},
		{"default period", "day", nil, "", 10, row, dayRows, "20261121", 5, true},
		{"explicit current id", "day", nil, "20261121", 10, row, dayRows, "20261121", 5, true},
		{"limit", "day", nil, "current", 3, row, dayRows[:3], "20261121", 5, true},
		{"limit 1", "day", nil, "current", 1, dense, dayRows[:1], "20261121", 5, true},
		{"competition", "day", nil, "current", 10, comp,
			[]ranked{{"a", 10, 1}, {"c", 7, 2}, {"b", 7, 2}, {"d", 7, 2}, {"e", 3, 5}}, "20261121", 5, true},
		{"dense", "day", nil, "current", 10, dense,
			[]ranked{{"a", 10, 1}, {"c", 7, 2}, {"b", 7, 2}, {"d", 7, 2}, {"e", 3, 3}}, "20261121", 5, true},
		{"competition limit inside ties", "day", nil, "current", 3, comp,
			[]ranked{{"a", 10, 1}, {"c", 7, 2}, {"b", 7, 2}}, "20261121", 5, true},
		{"previous", "day", nil, "previous", 10, row, dayPrev, "20261120", 4, true},
		{"explicit previous id", "day", nil, "20261120", 10, row, dayPrev, "20261120", 4, true},
		{"previous competition", "day", nil, "previous", 10, comp,
			[]ranked{{"x", 9, 1}, {"b", 5, 2}, {"c", 5, 2}, {"a", 1, 4}}, "20261120", 4, true},
		{"empty period", "day", nil, "20261119", 10, comp, []ranked{}, "20261119", 0, true},
		{"asc row", "lap", nil, "current", 10, row,
			[]ranked{{"m2", 20, 1}, {"m3", 20, 2}, {"m1", 30, 3}, {"m4", 50, 4}}, "20261121", 4, true},
		{"asc competition", "lap", nil, "current", 10, comp,
			[]ranked{{"m2", 20, 1}, {"m3", 20, 1}, {"m1", 30, 3}, {"m4", 50, 4}}, "20261121", 4, true},
		{"asc dense", "lap", nil, "current", 10, dense,
			[]ranked{{"m2", 20, 1}, {"m3", 20, 1}, {"m1", 30, 2}, {"m4", 50, 3}}, "20261121", 4, true},
		{"dims z1", "zoned", []string{"z1"}, "current", 10, row, []ranked{{"p", 4, 1}}, "all", 1, true},
		{"dims z2", "zoned", []string{"z2"}, "all", 10, row, []ranked{{"q", 8, 1}, {"r", 2, 2}}, "all", 2, true},
		{"dims unseen", "zoned", []string{"z3"}, "current", 10, row, []ranked{}, "all", 0, true},
		{"keep_top", "kt", nil, "current", 10, row, []ranked{{"u1", 50, 1}, {"u2", 40, 2}}, "20261121", 4, false},
		// lazy rollover: S(21) = P(19) + P(20) + P(21) with no event on the 21st;
		// no tiebreak: equal scores in reverse member order (ZREVRANGE)
		{"rolling current", "r3", nil, "current", 10, row,
			[]ranked{{"b", 3, 1}, {"d", 2, 2}, {"c", 2, 3}, {"a", 1, 4}}, "20261121", 4, true},
		{"rolling current competition", "r3", nil, "current", 10, comp,
			[]ranked{{"b", 3, 1}, {"d", 2, 2}, {"c", 2, 2}, {"a", 1, 4}}, "20261121", 4, true},
		{"rolling current dense", "r3", nil, "current", 10, dense,
			[]ranked{{"b", 3, 1}, {"d", 2, 2}, {"c", 2, 2}, {"a", 1, 3}}, "20261121", 4, true},
		{"rolling previous", "r3", nil, "previous", 10, row,
			[]ranked{{"a", 6, 1}, {"b", 3, 2}, {"d", 2, 3}, {"c", 2, 4}}, "20261120", 4, true},
		// a period that has not started is not prefilled by a read: S(22)
		// does not exist yet (TestFutureRollingRead reads it after the
		// timer's rollover: c 2)
		{"rolling next day", "r3", nil, "20261122", 10, row, []ranked{}, "20261122", 0, false},
		{"large board", "many", nil, "current", 3, dense,
			[]ranked{{"m10002", 10002, 1}, {"m10001", 10001, 2}, {"m10000", 10000, 3}}, "20261121", 10002, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg, err := s.Top(t.Context(), tt.board, tt.dims, tt.period, tt.limit, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			if got := rankedOf(pg.Entries); !slices.Equal(got, tt.want) {
				t.Errorf("entries = %v, want %v", got, tt.want)
			}
			if pg.Board != tt.board || !slices.Equal(pg.Dims, tt.dims) || pg.Period.ID != tt.periodID {
				t.Errorf("page of %s %v %s, want %s %v %s", pg.Board, pg.Dims, pg.Period.ID, tt.board, tt.dims, tt.periodID)
			}
			if pg.Count != tt.count || pg.Complete != tt.complete || pg.RankApprox {
				t.Errorf("count %d complete %v approx %v, want %d %v false", pg.Count, pg.Complete, pg.RankApprox, tt.count, tt.complete)
			}
		})
	}
}

func TestMember(t *testing.T) {
	s := queryStore(t)
	row, comp, dense := store.RankRow, store.RankCompetition, store.RankDense
	// standing is the part of MemberInfo the table compares.
	type standing struct {
		found     bool
		v         int64
		rank      int64
		approx    bool
		prev      int64
		prevFound bool
		gap       int64
		above     string
		count     int64
	}
	tests := []struct {
		name   string
		board  string
		dims   []string
		member string
		period string
		mode   store.RankMode
		want   standing
	}{
		// day: a 10, c 7, b 7, d 7, e 3; previous x 9, b 5, c 5, a 1
		{"first row", "day", nil, "a", "current", row, standing{true, 10, 1, false, 4, true, 0, "", 5}},
		{"first dense", "day", nil, "a", "current", dense, standing{true, 10, 1, false, 3, true, 0, "", 5}},
		{"tie row", "day", nil, "b", "current", row, standing{true, 7, 3, false, 2, true, 0, "c", 5}},
		{"tie competition", "day", nil, "b", "current", comp, standing{true, 7, 2, false, 2, true, 3, "a", 5}},
		{"tie head row", "day", nil, "c", "current", row, standing{true, 7, 2, false, 3, true, 3, "a", 5}},
		{"tie head competition", "day", nil, "c", "current", comp, standing{true, 7, 2, false, 2, true, 3, "a", 5}},
		{"tie tail row", "day", nil, "d", "current", row, standing{true, 7, 4, false, 0, false, 0, "b", 5}},
		{"tie tail dense", "day", nil, "d", "current", dense, standing{true, 7, 2, false, 0, false, 3, "a", 5}},
		{"last row", "day", nil, "e", "current", row, standing{true, 3, 5, false, 0, false, 4, "d", 5}},
		{"last competition", "day", nil, "e", "current", comp, standing{true, 3, 5, false, 0, false, 4, "d", 5}},
		{"last dense", "day", nil, "e", "current", dense, standing{true, 3, 3, false, 0, false, 4, "d", 5}},
		{"absent", "day", nil, "zz", "current", row, standing{count: 5}},
		{"absent now, ranked before", "day", nil, "x", "current", comp, standing{prev: 1, prevFound: true, count: 5}},
		{"previous period", "day", nil, "a", "previous", comp, standing{true, 1, 4, false, 0, false, 4, "c", 4}},
		{"explicit id", "day", nil, "b", "20261120", row, standing{true, 5, 2, false, 0, false, 4, "x", 4}},
		// lap (asc): m2 20, m3 20, m1 30, m4 50
		{"asc row", "lap", nil, "m1", "current", row, standing{true, 30, 3, false, 0, false, 10, "m3", 4}},
		{"asc competition", "lap", nil, "m1", "current", comp, standing{true, 30, 3, false, 0, false, 10, "m3", 4}},
		{"asc tie row", "lap", nil, "m3", "current", row, standing{true, 20, 2, false, 0, false, 0, "m2", 4}},
		{"asc tie competition", "lap", nil, "m3", "current", comp, standing{true, 20, 1, false, 0, false, 0, "", 4}},
		{"asc dense", "lap", nil, "m4", "current", dense, standing{true, 50, 3, false, 0, false, 20, "m1", 4}},
		// total board: no previous period
		{"total", "zoned", []string{"z2"}, "r", "current", row, standing{true, 2, 2, false, 0, false, 6, "q", 2}},
		// keep_top 2: u3 and u4 are only in the hash; the row above them is the
		// set's last
		{"keep_top in set", "kt", nil, "u1", "current", row, standing{true, 50, 1, false, 0, false, 0, "", 4}},
		{"keep_top outside", "kt", nil, "u3", "current", row, standing{true, 30, 3, true, 0, false, 10, "u2", 4}},
		{"keep_top outside competition", "kt", nil, "u4", "current", comp, standing{true, 20, 3, true, 0, false, 20, "u2", 4}},
		// rolling, read with no event in the current period: S(21) b 3, d 2,
		// c 2, a 1; S(20) a 6, b 3, d 2, c 2
		{"rolling row", "r3", nil, "a", "current", row, standing{true, 1, 4, false, 1, true, 1, "c", 4}},
		{"rolling competition", "r3", nil, "c", "current", comp, standing{true, 2, 2, false, 3, true, 1, "b", 4}},
		{"rolling dense", "r3", nil, "a", "current", dense, standing{true, 1, 3, false, 1, true, 1, "c", 4}},
		// dense walk capped at 10000 distinct values: 10001 is a lower bound
		{"dense cap", "many", nil, "m00001", "current", dense, standing{true, 1, 10001, true, 0, false, 1, "m00002", 10002}},
		{"dense below cap", "many", nil, "m00002", "current", dense, standing{true, 2, 10001, false, 0, false, 1, "m00003", 10002}},
		{"competition large", "many", nil, "m00001", "current", comp, standing{true, 1, 10002, false, 0, false, 1, "m00002", 10002}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mi, err := s.Member(t.Context(), tt.board, tt.dims, tt.member, tt.period, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			got := standing{mi.Found, mi.Value, mi.Rank, mi.RankApprox, mi.PrevRank, mi.PrevFound, mi.Gap, mi.Above, mi.Count}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if mi.Member != tt.member {
				t.Errorf("member %q, want %q", mi.Member, tt.member)
			}
		})
	}

	t.Run("fields", func(t *testing.T) {
		mi, err := s.Member(t.Context(), "day", nil, "c", "current", row)
		if err != nil {
			t.Fatal(err)
		}
		codec, _ := s.Codec("day")
		score, _ := codec.Encode(7, 2*3600) // 02:00, in seconds from the day's start
		if mi.Tie != 2*3600 || mi.Score != score || mi.Period.ID != "20261121" {
			t.Fatalf("tie %d score %v period %s, want %d %v 20261121", mi.Tie, mi.Score, mi.Period.ID, 2*3600, score)
		}
	})
}

func TestAround(t *testing.T) {
	s := queryStore(t)
	row, comp, dense := store.RankRow, store.RankCompetition, store.RankDense
	all := []ranked{{"a", 10, 1}, {"c", 7, 2}, {"b", 7, 3}, {"d", 7, 4}, {"e", 3, 5}}
	tests := []struct {
		name     string
		board    string
		dims     []string
		member   string
		period   string
		n        int
		mode     store.RankMode
		want     []ranked
		approx   bool
		complete bool
	}{
		{"middle", "day", nil, "b", "current", 1, row, all[1:4], false, true},
		{"middle competition", "day", nil, "b", "current", 1, comp, []ranked{{"c", 7, 2}, {"b", 7, 2}, {"d", 7, 2}}, false, true},
		{"middle dense", "day", nil, "b", "current", 1, dense, []ranked{{"c", 7, 2}, {"b", 7, 2}, {"d", 7, 2}}, false, true},
		{"first", "day", nil, "a", "current", 1, row, all[:3], false, true},
		{"first competition", "day", nil, "a", "current", 2, comp,
			[]ranked{{"a", 10, 1}, {"c", 7, 2}, {"b", 7, 2}, {"d", 7, 2}, {"e", 3, 5}}, false, true},
		{"second fills below", "day", nil, "c", "current", 2, row, all, false, true},
		{"last", "day", nil, "e", "current", 1, row, all[2:], false, true},
		{"last competition", "day", nil, "e", "current", 1, comp, []ranked{{"b", 7, 2}, {"d", 7, 2}, {"e", 3, 5}}, false, true},
		{"last dense", "day", nil, "e", "current", 1, dense, []ranked{{"b", 7, 2}, {"d", 7, 2}, {"e", 3, 3}}, false, true},
		{"last n=2 dense", "day", nil, "e", "current", 2, dense,
			[]ranked{{"a", 10, 1}, {"c", 7, 2}, {"b", 7, 2}, {"d", 7, 2}, {"e", 3, 3}}, false, true},
		{"n=0", "day", nil, "d", "current", 0, comp, []ranked{{"d", 7, 2}}, false, true},
		{"n larger than board", "day", nil, "d", "current", 10, row, all, false, true},
		{"previous period", "day", nil, "a", "previous", 1, comp, []ranked{{"b", 5, 2}, {"c", 5, 2}, {"a", 1, 4}}, false, true},
		{"single member", "zoned", []string{"z1"}, "p", "current", 2, dense, []ranked{{"p", 4, 1}}, false, true},
		{"asc competition", "lap", nil, "m3", "current", 1, comp, []ranked{{"m2", 20, 1}, {"m3", 20, 1}, {"m1", 30, 3}}, false, true},
		{"asc dense", "lap", nil, "m4", "current", 1, dense, []ranked{{"m3", 20, 1}, {"m1", 30, 2}, {"m4", 50, 3}}, false, true},
		{"keep_top in set", "kt", nil, "u1", "current", 1, row, []ranked{{"u1", 50, 1}, {"u2", 40, 2}}, false, false},
		{"keep_top outside", "kt", nil, "u4", "current", 1, row, []ranked{{"u1", 50, 1}, {"u2", 40, 2}, {"u4", 20, 3}}, true, false},
		{"keep_top outside n=0", "kt", nil, "u3", "current", 0, comp, []ranked{{"u3", 30, 3}}, true, false},
		{"rolling current", "r3", nil, "c", "current", 1, comp, []ranked{{"d", 2, 2}, {"c", 2, 2}, {"a", 1, 4}}, false, true},
		{"rolling current dense", "r3", nil, "c", "current", 1, dense, []ranked{{"d", 2, 2}, {"c", 2, 2}, {"a", 1, 3}}, false, true},
		{"dense deep", "many", nil, "m00002", "current", 1, dense,
			[]ranked{{"m00003", 3, 10000}, {"m00002", 2, 10001}, {"m00001", 1, 10002}}, false, true},
		{"dense deep capped", "many", nil, "m00001", "current", 0, dense, []ranked{{"m00001", 1, 10001}}, true, true},
		{"competition deep", "many", nil, "m00001", "current", 1, comp,
			[]ranked{{"m00003", 3, 10000}, {"m00002", 2, 10001}, {"m00001", 1, 10002}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg, err := s.Around(t.Context(), tt.board, tt.dims, tt.member, tt.period, tt.n, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			if got := rankedOf(pg.Entries); !slices.Equal(got, tt.want) {
				t.Errorf("entries = %v, want %v", got, tt.want)
			}
			if pg.RankApprox != tt.approx || pg.Complete != tt.complete {
				t.Errorf("approx %v complete %v, want %v %v", pg.RankApprox, pg.Complete, tt.approx, tt.complete)
			}
		})
	}
}

func TestCount(t *testing.T) {
	s := queryStore(t)
	tests := []struct {
		name   string
		board  string
		dims   []string
		period string
		want   int64
	}{
		{"current", "day", nil, "current", 5},
		{"previous", "day", nil, "previous", 4},
		{"empty period", "day", nil, "20261119", 0},
		{"dims", "zoned", []string{"z2"}, "current", 2},
		{"dims unseen", "zoned", []string{"z3"}, "current", 0},
		{"keep_top counts trimmed members", "kt", nil, "current", 4},
		{"rolling carried over", "r3", nil, "current", 4},
		{"large", "many", nil, "current", 10002},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := s.Count(t.Context(), tt.board, tt.dims, tt.period)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.want {
				t.Fatalf("count = %d, want %d", n, tt.want)
			}
		})
	}
}
