package store_test

import (
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestLastExactTimes checks the `last` aggregate against the oracle and
// against hand-computed values: the latest event time wins, compared in exact
// milliseconds (the tie unit only rounds the tie time stored in the score);
// only equal milliseconds fall back to the larger message ID. Issue 12: on a
// 1s board, an event at 23:05:01.823 lost to one at 23:05:01.123 because the
// earlier one had the larger message ID.
func TestLastExactTimes(t *testing.T) {
	d1, _ := ranking.ParseUnit("1d")
	boards := []*ranking.Board{
		{Name: "last_s", Window: ranking.WindowPeriodic, Every: d1, Aggregate: ranking.AggLast,
			Tiebreak: ranking.TieFirst, TieUnit: time.Second, Grace: time.Hour},
		{Name: "last_m", Window: ranking.WindowTotal, Aggregate: ranking.AggLast,
			Tiebreak: ranking.TieLast, TieUnit: time.Minute},
	}
	early := time.Date(2026, 11, 21, 23, 5, 1, 123e6, time.UTC)
	late := time.Date(2026, 11, 21, 23, 5, 1, 823e6, time.UTC)
	later := late.Add(20 * time.Second) // the same minute, another second

	type ev struct {
		id string
		v  int64
		at time.Time
	}
	// Every scenario is one member; calls are applied in order, each a
	// separate Apply (split) or all events in one Apply.
	scenarios := []struct {
		member string
		calls  [][]ev
		want   int64
	}{
		{"later-second", [][]ev{{{"b", 1, early}}, {{"a", 2, late}}}, 2},
		{"later-first", [][]ev{{{"a", 2, late}}, {{"b", 1, early}}}, 2},
		{"one-call", [][]ev{{{"b", 1, early}, {"a", 2, late}}}, 2},
		{"one-call-rev", [][]ev{{{"a", 2, late}, {"b", 1, early}}}, 2},
		{"equal-ms", [][]ev{{{"b", 3, late}}, {{"a", 4, late}}}, 3},
		{"equal-ms-rev", [][]ev{{{"a", 4, late}}, {{"b", 3, late}}}, 3},
		{"three", [][]ev{{{"c", 5, early}}, {{"a", 6, later}}, {{"b", 7, late}}}, 6},
	}
	for _, b := range boards {
		t.Run(b.Name, func(t *testing.T) {
			s := newStore(t, b)
			orc := oracle.New([]*ranking.Board{b})
			ctx := t.Context()
			want := map[string]int64{}
			for _, sc := range scenarios {
				want[sc.member] = sc.want
				for _, c := range sc.calls {
					var ups []ranking.Update
					for _, e := range c {
						ups = append(ups, ranking.Update{Board: b.Name, Member: sc.member, Value: e.v, Time: e.at,
							MsgID: sc.member + "/" + e.id})
					}
					res, err := s.Apply(ctx, store.Group(ups))
					if err != nil {
						t.Fatal(err)
					}
					wantSt := orc.Apply(ups)
					for i := range ups {
						if res.Status[i] != ranking.StatusApplied || wantSt[i] != ranking.StatusApplied {
							t.Fatalf("%s: update %d: store %v, oracle %v; want applied", sc.member, i, res.Status[i], wantSt[i])
						}
					}
				}
			}
			period := "all"
			if b.Window != ranking.WindowTotal {
				period = b.Calendar().At(late).ID
			}
			got, err := s.Entries(ctx, b.Name, nil, period)
			if err != nil {
				t.Fatal(err)
			}
			if d := oracle.Diff(got, orc.Board(b.Name, nil, period)); d != "" {
				t.Errorf("store and oracle differ:\n%s", d)
			}
			// Ties: the winner's time in the tie unit, from the period
			// start (periodic) or the default epoch (total).
			base := ranking.DefaultTieEpoch()
			if b.Window != ranking.WindowTotal {
				base = b.Calendar().At(late).Start
			}
			if len(got) != len(scenarios) {
				t.Fatalf("%d entries, want %d: %+v", len(got), len(scenarios), got)
			}
			for _, e := range got {
				at := late
				if e.Member == "three" {
					at = later
				}
				wantTie := int64(at.Sub(base) / b.TieUnit)
				if e.Value != want[e.Member] || e.Tie != wantTie {
					t.Errorf("%s = %d@%d, want %d@%d", e.Member, e.Value, e.Tie, want[e.Member], wantTie)
				}
			}
			for m, v := range want {
				if ws := orcValue(orc, b, period, m); ws != v {
					t.Errorf("oracle: %s = %d, want %d", m, ws, v)
				}
			}
		})
	}
}

// orcValue returns the oracle's value of member m, or -1 when absent.
func orcValue(o *oracle.Oracle, b *ranking.Board, period, m string) int64 {
	for _, e := range o.Board(b.Name, nil, period) {
		if e.Member == m {
			return e.Value
		}
	}
	return -1
}
