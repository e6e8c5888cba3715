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

// TestPackedCalls applies seeded random workloads of the oracle's boards
// (every window, aggregate and tie mode, with late, out-of-range and
// duplicate events) as live consumption does (ApplyFrom, batches split
// into several calls) twice: once with packed calls (fast boards folded
// per member by the caller, sent again per update when a call meets a
// duplicate or a member near its range) and once per update, the first
// with its arguments as one msgpack array and the second as plain ARGV
// strings (args.go). Every
// verdict, and every key but the dedupe's and the positions', must be the same; both kinds
// of packed call, those that held and those that gave up, must occur.
func TestPackedCalls(t *testing.T) {
	defer store.SetReplanPause(0)()
	rdb := testenv.Redis(t).Client(t)
	boards := oracle.Boards()
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ctx := t.Context()
			pp, pc := testenv.Prefix(t)+"p", testenv.Prefix(t)+"c"
			packed, err := store.New(rdb, boards, store.WithPrefix(pp), store.WithCallSize(40))
			if err != nil {
				t.Fatal(err)
			}
			perUpdate, err := store.New(rdb, boards, store.WithPrefix(pc), store.WithCallSize(40), store.WithPacking(false), store.WithPlainArgs())
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
			var off int64
			expect := map[*store.Store]string{}
			apply := func(s *store.Store, evs []store.Event) ranking.Result {
				t.Helper()
				sp := []store.Span{{Topic: "t", Partition: 0, From: off, To: off + int64(len(evs)),
					FromTime: t0, ToTime: t0, Expect: expect[s]}}
				res, err := s.ApplyFrom(ctx, evs, sp)
				if err != nil {
					t.Fatal(err)
				}
				expect[s] = sp[0].Left
				return res
			}
			verdicts := map[ranking.Status]int{} // counted
			for i, call := range oracle.Workload(seed, 1500, boards, oracle.GenOptions{}) {
				want := apply(perUpdate, store.Group(call))
				got := apply(packed, store.Group(call))
				off += int64(len(store.Group(call)))
				for k := range call {
					if got.Status[k] != want.Status[k] || got.Repeated[k] != want.Repeated[k] {
						u := call[k]
						t.Fatalf("call %d update %d (%s %v member %q value %d at %s): packed %v (repeated %v), per update %v (repeated %v)",
							i, k, u.Board, u.Dims, u.Member, u.Value, u.Time, got.Status[k], got.Repeated[k], want.Status[k], want.Repeated[k])
					}
					verdicts[want.Status[k]]++
				}
			}
			held, replanned := packed.PackedCalls()
			applied, oor, late, dup := verdicts[ranking.StatusApplied], verdicts[ranking.StatusOutOfRange], verdicts[ranking.StatusLate], verdicts[ranking.StatusDuplicate]
			t.Logf("%d updates applied, %d out of range, %d late, %d duplicates; packed calls: %d held, %d sent again per update",
				applied, oor, late, dup, held, replanned)
			if oor == 0 || late == 0 || dup == 0 || held == 0 || replanned == 0 {
				t.Fatalf("the workload gave %d out of range, %d late, %d duplicates, %d packed calls held and %d given up: it proves less than it should",
					oor, late, dup, held, replanned)
			}
			if a, b := packed.Args(), perUpdate.Args(); a != "msgpack" || b != "plain" {
				t.Fatalf("arguments sent as %q and %q, want msgpack and plain", a, b)
			}
			if h, r := perUpdate.PackedCalls(); h != 0 || r != 0 {
				t.Fatalf("WithPacking(false) store sent %d packed calls (%d given up)", h, r)
			}
			// the position records (their nonces) and the latest marks
			// (their wall clock) differ by construction
			compareGenerations(t, rdb, pc, pp, ":pos", ":wm:last")
		})
	}
}
