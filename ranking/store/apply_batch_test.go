package store_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestApplyLargeCall applies calls whose keys have more members than one
// Redis command of the scripts carries (they read and write a key's members
// in slices of 4,000 values): thousands of distinct members per board in
// one call, new ones and existing ones, a call of duplicates, and a rollover
// whose chunk is as large; the boards and statuses must equal the oracle's.
func TestApplyLargeCall(t *testing.T) {
	ctx := t.Context()
	names := []string{"total_sum", "roll_7d", "roll_90m", "best_day", "last_1h", "base_total", "top5_day", "hot_day"}
	var boards []*ranking.Board
	for _, b := range oracle.Boards() {
		if slices.Contains(names, b.Name) {
			boards = append(boards, b)
		}
	}
	st, err := store.New(testenv.Redis(t).Client(t), boards, store.WithPrefix(testenv.Prefix(t)),
		store.WithCallSize(1_000_000), store.WithRolloverChunk(10_000))
	if err != nil {
		t.Fatal(err)
	}
	r := &exactRun{t: t, rng: rand.New(rand.NewPCG(1, 2)), store: st, orc: oracle.New(boards),
		boards: map[string]*ranking.Board{}, rolled: map[string]ranking.Period{}}
	for _, b := range boards {
		r.boards[b.Name] = b
	}
	const events, members = 4600, 4300 // > 4,000 members per key, some twice per call
	t0 := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	call := func(round int) []ranking.Update {
		var ups []ranking.Update
		for i := range events {
			at := t0.Add(time.Duration(round*events+i) * 13 * time.Second) // crosses days and 30m periods
			for _, b := range boards {
				u := ranking.Update{Board: b.Name, Member: "m" + strconv.Itoa(i%members), Value: int64(1 + (i+round)%9),
					Time: at, MsgID: "r" + strconv.Itoa(round) + "e" + strconv.Itoa(i)}
				if len(b.Dims) > 0 {
					u.Dims = []string{"z1"}
				}
				if b.HasBase {
					u.Base, u.HasBase = int64(100+i%7), true
				}
				ups = append(ups, u)
			}
		}
		return ups
	}
	first := call(0)
	for i, ups := range [][]ranking.Update{first, call(1), first} { // new members, existing ones, duplicates
		res, err := st.Apply(ctx, store.Group(ups))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		r.checkStatuses(i, ups, res.Status, r.orc.Apply(ups))
	}
	for _, b := range boards {
		if b.Window != ranking.WindowRolling {
			continue
		}
		at := t0.Add(2 * events * 13 * time.Second).Add(24 * time.Hour)
		r.noteRolled(b, at)
		if err := st.Rollover(ctx, b.Name, at); err != nil {
			t.Fatalf("rollover %s: %v", b.Name, err)
		}
	}
	r.checkAll(ctx)
}
