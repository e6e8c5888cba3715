package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestFolder applies seeded random workloads of the oracle's boards (every
// window, aggregate and tie mode, with late, out-of-range and duplicate
// events) twice into fresh generations: one as live consumption does (the
// script, one update at a time), one as a replay's first part does
// (duplicates decided in memory, Foldable boards folded, the others
// applied as Decided events). Every verdict, and every key the two leave
// but the dedupe's, must be the same: the same members, scores, counts,
// stream times, dims registry, and an expiry where the other has one.
func TestFolder(t *testing.T) {
	rdb := testenv.Redis(t).Client(t)
	boards := oracle.Boards()
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ctx := t.Context()
			prefix := testenv.Prefix(t)
			s, err := store.New(rdb, boards, store.WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.LockReplay(ctx, "tok", time.Minute); err != nil {
				t.Fatal(err)
			}
			gl, _ := s.ReserveBuild(ctx, "tok", nil)
			gf, _ := s.ReserveBuild(ctx, "tok", nil)
			live, folded := s.Generation(gl), s.Generation(gf)
			f := folded.NewFolder()
			foldable := 0
			for _, b := range boards {
				if f.Foldable(b.Name) {
					foldable++
				}
			}
			if foldable < 2 || foldable == len(boards) {
				t.Fatalf("%d of %d boards foldable: the test needs both kinds", foldable, len(boards))
			}
			seen := map[string]bool{}
			var folds int
			verdicts := map[ranking.Status]int{} // counted
			for i, call := range oracle.Workload(seed, 1500, boards, oracle.GenOptions{}) {
				res, err := live.Apply(ctx, store.Group(call))
				if err != nil {
					t.Fatal(err)
				}
				got := make([]ranking.Status, len(call))
				var rest []store.Event
				var restIdx [][]int
				at := 0 // the event's first update in call
				for _, ev := range store.Group(call) {
					first := !seen[ev.ID]
					seen[ev.ID] = true
					var ups []ranking.Update
					var idx, fidx []int
					for k, u := range ev.Updates {
						switch {
						case !first:
							got[at+k] = res.Status[at+k] // a duplicate: what the Decider repeats (TestDecidedEvents)
						case f.Foldable(u.Board):
							fidx = append(fidx, k) // folded where they are, as the replay's sink does
						default:
							ups, idx = append(ups, u), append(idx, at+k)
						}
					}
					if len(fidx) > 0 {
						st := make([]ranking.Status, len(fidx))
						if err := f.FoldAt(ev.Updates, fidx, st); err != nil {
							t.Fatal(err)
						}
						for j, k := range fidx {
							got[at+k] = st[j]
						}
						folds += len(fidx)
					}
					if len(ups) > 0 {
						rest, restIdx = append(rest, store.Event{ID: ev.ID, Updates: ups, Decided: true}), append(restIdx, idx)
					}
					at += len(ev.Updates)
				}
				if len(rest) > 0 {
					r, err := folded.Apply(ctx, rest)
					if err != nil {
						t.Fatal(err)
					}
					k := 0
					for _, idx := range restIdx {
						for _, j := range idx {
							got[j] = r.Status[k]
							k++
						}
					}
				}
				for k := range call {
					if got[k] != res.Status[k] {
						u := call[k]
						t.Fatalf("call %d update %d (%s %v member %q value %d at %s): folded %v, script %v", i, k, u.Board, u.Dims, u.Member, u.Value, u.Time, got[k], res.Status[k])
					}
					verdicts[res.Status[k]]++
				}
			}
			n, err := f.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			applied, oor, late := verdicts[ranking.StatusApplied], verdicts[ranking.StatusOutOfRange], verdicts[ranking.StatusLate]
			t.Logf("%d updates applied (%d folded into %d members), %d out of range, %d late", applied, folds, n, oor, late)
			if oor == 0 || late == 0 || folds == 0 {
				t.Fatalf("the workload gave %d out of range, %d late and %d folded: it proves less than it should", oor, late, folds)
			}
			compareGenerations(t, rdb, prefix+":g"+strconv.Itoa(gl), prefix+":g"+strconv.Itoa(gf))
		})
	}
}

// compareGenerations fails unless the keys under prefix a and prefix b,
// but the dedupe's, hold the same (expiries: both or neither).
func compareGenerations(t *testing.T, rdb redis.UniversalClient, a, b string, skip ...string) {
	t.Helper()
	ctx := t.Context()
	ka, kb := genKeys(t, rdb, a, skip), genKeys(t, rdb, b, skip)
	if !slices.Equal(ka, kb) {
		t.Fatalf("keys differ:\n  script only %v\n  folded only %v", minus(ka, kb), minus(kb, ka))
	}
	diffs := 0
	for _, k := range ka {
		va, ta := dumpKey(ctx, t, rdb, a+k)
		vb, tb := dumpKey(ctx, t, rdb, b+k)
		if va != vb || ta != tb {
			diffs++
			if diffs <= 5 {
				t.Errorf("%s: script %s (expiry %v), folded %s (expiry %v)", k, clip(va), ta, clip(vb), tb)
			}
		}
	}
	if diffs > 0 {
		t.Fatalf("%d of %d keys differ", diffs, len(ka))
	}
	t.Logf("%d keys equal", len(ka))
}

// genKeys returns the keys under prefix but the dedupe's and those of
// skip, without prefix.
func genKeys(t *testing.T, rdb redis.UniversalClient, prefix string, skip []string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(t.Context(), 0, prefix+":*", 1000).Iterator()
	for iter.Next(t.Context()) {
		if k := strings.TrimPrefix(iter.Val(), prefix); !strings.HasPrefix(k, ":d:") && !slices.Contains(skip, k) {
			out = append(out, k)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// dumpKey renders key's content and whether it expires.
func dumpKey(ctx context.Context, t *testing.T, rdb redis.UniversalClient, key string) (string, bool) {
	t.Helper()
	var v any
	var err error
	switch typ := rdb.Type(ctx, key).Val(); typ {
	case "zset":
		v, err = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	case "hash":
		v, err = rdb.HGetAll(ctx, key).Result()
	case "set":
		var m []string
		m, err = rdb.SMembers(ctx, key).Result()
		slices.Sort(m)
		v = m
	default:
		t.Fatalf("%s: type %s", key, typ)
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(v), rdb.PTTL(ctx, key).Val() > 0
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
