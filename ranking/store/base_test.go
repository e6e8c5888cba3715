package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestBaseOrderFree: hot news with one item carrying different publish
// times (bases) in different events: the greatest base wins, so every
// arrival order gives the board the oracle computes, on a plain and on a
// keep_top board.
func TestBaseOrderFree(t *testing.T) {
	unit, _ := ranking.ParseUnit("1d")
	boards := []*ranking.Board{
		{Name: "news", Window: ranking.WindowTotal, HasBase: true},
		{Name: "news_day", Window: ranking.WindowPeriodic, Every: unit, HasBase: true, KeepTop: 2, Grace: time.Hour},
	}
	ev := func(id, member string, base int64, hasBase bool) []ranking.Update {
		var out []ranking.Update
		for _, b := range boards {
			out = append(out, ranking.Update{Board: b.Name, Member: member, Value: 432, Time: day(21, 9), MsgID: id, Base: base, HasBase: hasBase})
		}
		return out
	}
	events := [][]ranking.Update{
		ev("1", "n1", 1_763_700_000, true),
		ev("2", "n1", 1_763_703_600, true), // the same item, published an hour later per this event
		ev("3", "n2", 1_763_701_000, true),
		ev("4", "n1", 0, false), // no publish time
		ev("5", "n3", 1_763_690_000, true),
	}
	orders := [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {1, 3, 0, 4, 2}}
	var first string
	for i, order := range orders {
		rdb := testenv.Redis(t).Client(t)
		s, err := store.New(rdb, boards, store.WithPrefix(testenv.Prefix(t)))
		if err != nil {
			t.Fatal(err)
		}
		o := oracle.New(boards)
		for _, k := range order {
			if _, err := s.Apply(t.Context(), store.Group(events[k])); err != nil {
				t.Fatal(err)
			}
			o.Apply(events[k])
		}
		var got string
		for _, p := range []struct{ board, period string }{{"news", "all"}, {"news_day", "20261121"}} {
			es, err := s.Entries(t.Context(), p.board, nil, p.period)
			if err != nil {
				t.Fatal(err)
			}
			if d := oracle.Diff(es, o.Board(p.board, nil, p.period)); d != "" {
				t.Fatalf("order %v, %s: differs from the oracle:\n%s", order, p.board, d)
			}
			got += fmt.Sprint(rows(es))
		}
		if i == 0 {
			first = got
			if want := "[{n1 1763704896} {n2 1763701432} {n3 1763690432}][{n1 1763704896} {n2 1763701432}]"; got != want {
				t.Fatalf("boards = %s, want %s", got, want)
			}
		} else if got != first {
			t.Fatalf("order %v gives %s, order %v gave %s", order, got, orders[0], first)
		}
	}
}
