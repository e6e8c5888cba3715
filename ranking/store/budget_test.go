package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestRanks: the previous ranks of a page, read at once, in every mode.
func TestRanks(t *testing.T) {
	s := queryStore(t)
	ctx := t.Context()
	row, comp, dense := store.RankRow, store.RankCompetition, store.RankDense
	type rk = store.MemberRank
	absent := rk{}
	tests := []struct {
		name    string
		board   string
		period  string
		members []string
		mode    store.RankMode
		want    []rk
	}{
		// day, 20261120: x 9, b 5 (02:00), c 5 (03:00), a 1
		{"row", "day", "previous", []string{"a", "b", "c", "d", "x", "zz"}, row,
			[]rk{{true, 4, false}, {true, 2, false}, {true, 3, false}, absent, {true, 1, false}, absent}},
		{"competition", "day", "20261120", []string{"a", "b", "c", "d", "x", "zz"}, comp,
			[]rk{{true, 4, false}, {true, 2, false}, {true, 2, false}, absent, {true, 1, false}, absent}},
		{"dense", "day", "previous", []string{"a", "b", "c", "d", "x", "zz"}, dense,
			[]rk{{true, 3, false}, {true, 2, false}, {true, 2, false}, absent, {true, 1, false}, absent}},
		{"none found", "day", "20261119", []string{"a", "b"}, dense, []rk{absent, absent}},
		{"no members", "day", "previous", nil, comp, []rk{}},
		// lap (asc): m2 20, m3 20, m1 30, m4 50
		{"asc row", "lap", "current", []string{"m4", "m3", "m1"}, row, []rk{{true, 4, false}, {true, 2, false}, {true, 3, false}}},
		{"asc competition", "lap", "current", []string{"m4", "m3", "m1", "m2"}, comp,
			[]rk{{true, 4, false}, {true, 1, false}, {true, 3, false}, {true, 1, false}}},
		{"asc dense", "lap", "current", []string{"m4", "m3", "m1", "m2"}, dense,
			[]rk{{true, 3, false}, {true, 1, false}, {true, 2, false}, {true, 1, false}}},
		// keep_top 2: u3 and u4 only in the hash: lower bounds, as Around
		{"keep_top row", "kt", "current", []string{"u1", "u3", "u4"}, row, []rk{{true, 1, false}, {true, 3, true}, {true, 3, true}}},
		{"keep_top competition", "kt", "current", []string{"u4", "u2"}, comp, []rk{{true, 3, true}, {true, 2, false}}},
		{"keep_top dense", "kt", "current", []string{"u3", "u1"}, dense, []rk{{true, 3, true}, {true, 1, false}}},
		// rolling: S(20) a 6, b 3, d 2, c 2
		{"rolling", "r3", "previous", []string{"c", "d", "a"}, dense, []rk{{true, 3, false}, {true, 3, false}, {true, 1, false}}},
		{"large", "many", "current", []string{"m00001", "m10002", "m05000"}, comp,
			[]rk{{true, 10002, false}, {true, 1, false}, {true, 5003, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Ranks(ctx, tt.board, nil, tt.period, tt.members, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}

	t.Run("too many members", func(t *testing.T) {
		_, err := s.Ranks(ctx, "day", nil, "current", make([]string, store.MaxRanks+1), row)
		if !errors.Is(err, store.ErrBadLimit) {
			t.Fatalf("err = %v, want ErrBadLimit", err)
		}
	})
}

// TestDenseBudget: dense walks share the budget of their context: a rank of
// the period read beyond its half is a lower bound, a previous-period rank
// beyond the budget is ErrTooExpensive.
func TestDenseBudget(t *testing.T) {
	s := queryStore(t) // many: m00001..m10002 with values 1..10002
	dense := store.RankDense
	budget := func(n int) context.Context { return store.WithDenseBudget(t.Context(), n) }

	// Ranks may use the whole budget: m09001 has 1001 better values
	got, err := s.Ranks(budget(1001), "many", nil, "current", []string{"m09001", "m10000"}, dense)
	if err != nil || !slices.Equal(got, []store.MemberRank{{true, 1002, false}, {true, 3, false}}) {
		t.Errorf("within the budget: %v, %v", got, err)
	}
	if _, err := s.Ranks(budget(1000), "many", nil, "current", []string{"m09001", "m10000"}, dense); !errors.Is(err, store.ErrTooExpensive) {
		t.Errorf("beyond the budget: err = %v, want ErrTooExpensive", err)
	}
	// without a budget: DenseWalkCap per walk
	if _, err := s.Ranks(t.Context(), "many", nil, "current", []string{"m00001"}, dense); !errors.Is(err, store.ErrTooExpensive) {
		t.Errorf("beyond DenseWalkCap (%d): err = %v, want ErrTooExpensive", store.DenseWalkCap, err)
	}

	// the page's own ranks get half of what is left: a lower bound beyond
	pg, err := s.Around(budget(1000), "many", nil, "m09501", "current", 1, dense)
	if err != nil || !slices.Equal(rankedOf(pg.Entries), []ranked{{"m09502", 9502, 501}, {"m09501", 9501, 502}, {"m09500", 9500, 503}}) || pg.RankApprox {
		t.Errorf("around within half the budget: %v approx %v, %v", rankedOf(pg.Entries), pg.RankApprox, err)
	}
	pg, err = s.Around(budget(1000), "many", nil, "m09000", "current", 0, dense)
	if err != nil || !slices.Equal(rankedOf(pg.Entries), []ranked{{"m09000", 9000, 501}}) || !pg.RankApprox {
		t.Errorf("around beyond half the budget: %v approx %v, %v; want a lower bound of 501", rankedOf(pg.Entries), pg.RankApprox, err)
	}
	mi, err := s.Member(budget(10), "many", nil, "m09000", "current", dense)
	if err != nil || mi.Rank != 6 || !mi.RankApprox {
		t.Errorf("member beyond half the budget: rank %d approx %v, %v; want a lower bound of 6", mi.Rank, mi.RankApprox, err)
	}

	// day: a's previous dense rank is 3 (two better values, held by three
	// members): the current walk (none: a is first) leaves it enough. A
	// previous-period walk is only started when the members better than
	// the worst value (or the span of values) fit the budget: three here.
	mi, err = s.Member(budget(3), "day", nil, "a", "current", dense)
	if err != nil || mi.PrevRank != 3 || !mi.PrevFound {
		t.Errorf("member, previous rank within the budget: %+v, %v", mi, err)
	}
	if _, err := s.Member(budget(1), "day", nil, "a", "current", dense); !errors.Is(err, store.ErrTooExpensive) {
		t.Errorf("member, previous rank beyond the budget: err = %v, want ErrTooExpensive", err)
	}
}

// TestFutureRollingRead: reading a rolling period that has not started
// writes nothing and answers from what exists; reading the current one
// completes its rollover (the timer may be late); once the timer has
// prefilled the next period, it reads exact.
func TestFutureRollingRead(t *testing.T) {
	rdb := testenv.NewRedis(t, testenv.RedisOptions{}).Client(t)
	ctx := t.Context()
	d1, err := ranking.ParseUnit("1d")
	if err != nil {
		t.Fatal(err)
	}
	r3 := &ranking.Board{Name: "r3", Window: ranking.WindowRolling, Every: d1, Periods: 3, Grace: 5 * time.Minute}
	s, err := store.New(rdb, []*ranking.Board{r3}, store.WithPrefix("fut"), store.WithClock(func() time.Time { return day(21, 12) }))
	if err != nil {
		t.Fatal(err)
	}
	// P(18) a 5; P(19) b 3, a 1, d 2; P(20) c 2; nothing on the 21st
	ups := []ranking.Update{
		{Board: "r3", Member: "a", Value: 5, Time: day(18, 1)}, {Board: "r3", Member: "b", Value: 3, Time: day(19, 1)},
		{Board: "r3", Member: "a", Value: 1, Time: day(19, 2)}, {Board: "r3", Member: "d", Value: 2, Time: day(19, 3)},
		{Board: "r3", Member: "c", Value: 2, Time: day(20, 1)},
	}
	for i := range ups {
		ups[i].MsgID = fmt.Sprint("f", i)
	}
	if _, err := s.Apply(ctx, store.Group(ups)); err != nil {
		t.Fatal(err)
	}
	top := func(period string) store.Page {
		t.Helper()
		pg, err := s.Top(ctx, "r3", nil, period, 10, store.RankRow)
		if err != nil {
			t.Fatal(err)
		}
		return pg
	}
	if pg := top("current"); !slices.Equal(rankedOf(pg.Entries), []ranked{{"b", 3, 1}, {"d", 2, 2}, {"c", 2, 3}, {"a", 1, 4}}) || !pg.Complete {
		t.Fatalf("current (rolled over by the read): %v complete %v", rankedOf(pg.Entries), pg.Complete)
	}

	before := changes(t, rdb)
	if pg := top("20261122"); len(pg.Entries) != 0 || pg.Count != 0 || pg.Complete || pg.RankApprox {
		t.Errorf("next day before its prefill: %v count %d complete %v approx %v; want empty, not complete", rankedOf(pg.Entries), pg.Count, pg.Complete, pg.RankApprox)
	}
	if n, err := s.Count(ctx, "r3", nil, "20261122"); err != nil || n != 0 {
		t.Errorf("count: %d, %v", n, err)
	}
	if mi, err := s.Member(ctx, "r3", nil, "c", "20261122", store.RankDense); err != nil || mi.Found || !mi.PrevFound || mi.PrevRank != 2 {
		t.Errorf("member: %+v, %v; want absent, previous dense rank 2", mi, err)
	}
	if _, err := s.Around(ctx, "r3", nil, "c", "20261122", 1, store.RankRow); !errors.Is(err, store.ErrMemberNotFound) {
		t.Errorf("around: err = %v, want ErrMemberNotFound", err)
	}
	if got, err := s.Ranks(ctx, "r3", nil, "20261122", []string{"c"}, store.RankCompetition); err != nil || got[0].Found {
		t.Errorf("ranks: %v, %v", got, err)
	}
	if after := changes(t, rdb); after != before {
		t.Errorf("reading the next day made %d changes in Redis, want none", after-before)
	}
	key := store.Key("fut", store.Tag("r3", nil), "r", "20261122")
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("%s exists after reads", key)
	}

	// the timer rolls over ahead of the boundary: S(22) = P(20..22) = c 2
	if err := s.Rollover(ctx, "r3", day(22, 0).Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if pg := top("20261122"); len(pg.Entries) != 0 || pg.Complete {
		t.Errorf("a rollover to the 21st does not prefill the 22nd: %v complete %v", rankedOf(pg.Entries), pg.Complete)
	}
	if err := s.Rollover(ctx, "r3", day(22, 0)); err != nil {
		t.Fatal(err)
	}
	if pg := top("20261122"); !slices.Equal(rankedOf(pg.Entries), []ranked{{"c", 2, 1}}) || pg.Count != 1 || !pg.Complete || pg.RankApprox {
		t.Errorf("next day after its prefill: %v count %d complete %v approx %v", rankedOf(pg.Entries), pg.Count, pg.Complete, pg.RankApprox)
	}
	// Entries (checks and tools) still completes a future period itself
	if es, err := s.Entries(ctx, "r3", nil, "20261123"); err != nil || len(es) != 0 {
		t.Errorf("entries of the 23rd: %v, %v", es, err)
	}
}

// changes returns the server's count of writes (rdb_changes_since_last_save:
// the servers of NewRedis never save).
func changes(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(t.Context(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "rdb_changes_since_last_save:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO persistence has no rdb_changes_since_last_save")
	return 0
}
