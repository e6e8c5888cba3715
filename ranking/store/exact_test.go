package store_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// The exactness tests compare a real Store with the in-memory oracle over
// seeded random workloads (duplicates, crashes, lateness, rollovers). A
// failure names its seed; replay it with
//
//	go test ./ranking -run 'TestExactness/seed=17$'
//	go test ./ranking -run TestExactness -seed 17      (or RANKD_SEED=17)
//
// RANKD_EXACT_LONG=1 runs about ten times more (more seeds, longer workloads).
var exactSeed = flag.Int64("seed", 0, "run TestExactness and TestExactnessCluster with this seed only (also env RANKD_SEED)")

const (
	exactSeeds        = 30   // seeds of TestExactness
	exactClusterSeeds = 3    // seeds of TestExactnessCluster
	exactEvents       = 2000 // fresh events per seed
	maxDiffRows       = 20   // differing rows shown per board
)

// exactPlan returns the seeds to run (first, first+1, ...) and the workload
// size.
func exactPlan(t *testing.T, first int64, n int) (seeds []int64, events int, span time.Duration) {
	t.Helper()
	events, span = exactEvents, 4*24*time.Hour
	if long, _ := strconv.ParseBool(os.Getenv("RANKD_EXACT_LONG")); long {
		n, events, span = n*10/3, events*3, span*3
	}
	seed := *exactSeed
	if env := os.Getenv("RANKD_SEED"); seed == 0 && env != "" {
		var err error
		if seed, err = strconv.ParseInt(env, 10, 64); err != nil {
			t.Fatalf("RANKD_SEED=%q: %v", env, err)
		}
	}
	if seed != 0 {
		return []int64{seed}, events, span
	}
	for i := range n {
		seeds = append(seeds, first+int64(i))
	}
	return seeds, events, span
}

func TestExactness(t *testing.T) {
	seeds, events, span := exactPlan(t, 1, exactSeeds)
	srv := testenv.Redis(t)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runExact(t, srv.Client(t), seed, events, span)
		})
	}
}

// TestExactnessCluster is TestExactness on a 3-master Redis Cluster. On a
// cluster every call is packed (its marks are written after every
// call succeeded); calls go packed again at once after one gave up, so
// that both kinds occur throughout.
func TestExactnessCluster(t *testing.T) {
	defer store.SetReplanPause(0)()
	seeds, events, span := exactPlan(t, 1001, exactClusterSeeds)
	c := testenv.Cluster(t)
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				t.Parallel()
				st := runExact(t, c.Client(t), seed, events, span)
				if held, replanned := st.PackedCalls(); held == 0 || replanned == 0 {
					t.Fatalf("seed %d: %d packed calls held and %d given up: the run proves less than it should", seed, held, replanned)
				}
			})
		}
	})
}

// rollMode is how a seed calls Store.Rollover during its run.
type rollMode int

const (
	rollNever  rollMode = iota // never: reads must roll over on their own
	rollAhead                  // before the boundary: at in the next period
	rollBehind                 // after the boundary: at in the current or a past period
	rollMixed                  // both, sometimes from two goroutines during an Apply
)

func (m rollMode) String() string { return [...]string{"never", "ahead", "behind", "mixed"}[m] }

// exactRun is the state of one seed's run.
type exactRun struct {
	t      *testing.T
	seed   int64
	rng    *rand.Rand
	store  *store.Store
	orc    *oracle.Oracle
	boards map[string]*ranking.Board
	// rolled is, per rolling stream, the latest period that a Rollover call
	// covered: S(k) up to it must exist and be exact.
	rolled map[string]ranking.Period
}

// TestExactnessChunked runs seeds on a Redis that keeps every sorted set
// as a skiplist (no listpacks), with rollover chunks of 3 members, so that
// every rollover takes several ZSCAN steps, resumes from cursors and runs
// between and beside applies.
func TestExactnessChunked(t *testing.T) {
	seeds, events, span := exactPlan(t, 501, 6)
	srv := testenv.NewRedis(t, testenv.RedisOptions{})
	rdb := srv.Client(t)
	if err := rdb.ConfigSet(t.Context(), "zset-max-listpack-entries", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runExact(t, srv.Client(t), seed, events, span, store.WithRolloverChunk(3))
		})
	}
}

func runExact(t *testing.T, rdb redis.UniversalClient, seed int64, events int, span time.Duration, opts ...store.Option) *store.Store {
	ctx := t.Context()
	boards := oracle.Boards()
	st, err := store.New(rdb, boards, append([]store.Option{store.WithPrefix(testenv.Prefix(t))}, opts...)...)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	r := &exactRun{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x726f6c6c)),
		store: st, orc: oracle.New(boards), boards: map[string]*ranking.Board{},
		rolled: map[string]ranking.Period{},
	}
	var rolling []*ranking.Board
	for _, b := range boards {
		r.boards[b.Name] = b
		if b.Window == ranking.WindowRolling {
			rolling = append(rolling, b)
		}
	}
	mode := rollMode(r.rng.IntN(4))
	calls := oracle.Workload(seed, events, boards, oracle.GenOptions{Span: span})
	nups := 0
	for i, call := range calls {
		nups += len(call)
		var g errgroup.Group
		if mode != rollNever && r.chance(0.2) {
			b := rolling[r.rng.IntN(len(rolling))]
			if at, ok := r.rollTime(b, mode); ok {
				r.noteRolled(b, at)
				if mode == rollMixed && r.chance(0.4) {
					// A timer on two instances fires during an Apply.
					for range 2 {
						g.Go(func() error { return st.Rollover(ctx, b.Name, at) })
					}
				} else if err := st.Rollover(ctx, b.Name, at); err != nil {
					t.Fatalf("seed %d call %d: rollover %s at %v: %v", seed, i, b.Name, at, err)
				}
			}
		}
		res, err := st.Apply(ctx, store.Group(call))
		if gerr := g.Wait(); gerr != nil {
			t.Fatalf("seed %d call %d: concurrent rollover: %v", seed, i, gerr)
		}
		if err != nil {
			t.Fatalf("seed %d call %d: apply: %v", seed, i, err)
		}
		r.checkStatuses(i, call, res.Status, r.orc.Apply(call))
		if r.chance(0.05) {
			r.checkSome(ctx)
		}
	}
	r.checkAll(ctx)
	held, replanned := st.PackedCalls()
	t.Logf("seed %d: rollover %v, %d calls, %d updates, %d streams; packed calls: %d held, %d sent again per update",
		seed, mode, len(calls), nups, len(r.orc.Streams()), held, replanned)
	return st
}

func (r *exactRun) chance(p float64) bool { return r.rng.Float64() < p }

// rollTime picks the at of a Rollover of rolling board b relative to the
// latest stream time of its streams, or false when b has no data yet.
func (r *exactRun) rollTime(b *ranking.Board, mode rollMode) (time.Time, bool) {
	var st time.Time
	for _, s := range r.orc.Streams() {
		if t, ok := r.orc.StreamTime(s.Board, s.Dims); s.Board == b.Name && ok && t.After(st) {
			st = t
		}
	}
	if st.IsZero() {
		return st, false
	}
	cal := b.Calendar()
	cur := cal.At(st)
	if mode == rollMixed {
		mode = rollAhead + rollMode(r.rng.IntN(2))
	}
	if mode == rollAhead {
		next := cal.Next(cur)
		return next.Start.Add(time.Duration(r.rng.Int64N(int64(next.End.Sub(next.Start))))), true
	}
	back := time.Duration(r.rng.Int64N(int64(2 * cur.End.Sub(cur.Start))))
	return st.Add(-back), true
}

// noteRolled records that S(At(at)) of every stream of b with data so far
// must exist once Rollover(b, at) has returned.
func (r *exactRun) noteRolled(b *ranking.Board, at time.Time) {
	k := b.Calendar().At(at)
	for _, s := range r.orc.Streams() {
		key := streamName(s.Board, s.Dims)
		if s.Board == b.Name && k.Start.After(r.rolled[key].Start) {
			r.rolled[key] = k
		}
	}
}

func streamName(board string, dims []string) string {
	if len(dims) == 0 {
		return board
	}
	return fmt.Sprintf("%s%q", board, dims)
}

// checkStatuses fails the test when the store's statuses of call differ from
// the oracle's.
func (r *exactRun) checkStatuses(i int, call []ranking.Update, got, want []ranking.Status) {
	r.t.Helper()
	if len(got) != len(want) {
		r.t.Fatalf("seed %d call %d: %d statuses for %d updates", r.seed, i, len(got), len(want))
	}
	var diffs []string
	for k := range want {
		if got[k] != want[k] {
			u := call[k]
			diffs = append(diffs, fmt.Sprintf("  #%d %s %q member %q value %d time %s msg %s: got %v, want %v",
				k, streamName(u.Board, u.Dims), r.boards[u.Board].Calendar().At(u.Time).ID, u.Member, u.Value,
				u.Time.UTC().Format("2006-01-02T15:04:05.000"), u.MsgID, got[k], want[k]))
		}
	}
	if len(diffs) > 0 {
		r.t.Fatalf("seed %d call %d (%d updates): %d statuses differ%s:\n%s", r.seed, i, len(call), len(diffs),
			shown(len(diffs)), strings.Join(diffs[:min(len(diffs), maxDiffRows)], "\n"))
	}
}

func shown(n int) string {
	if n > maxDiffRows {
		return fmt.Sprintf(" (first %d shown)", maxDiffRows)
	}
	return ""
}

// boardRef is one visible board to compare.
type boardRef struct {
	board  string
	dims   []string
	period string
}

// checkSome compares the latest visible board of a random stream, so that
// reads (which may roll over) interleave with writes.
func (r *exactRun) checkSome(ctx context.Context) {
	r.t.Helper()
	ss := r.orc.Streams()
	if len(ss) == 0 {
		return
	}
	s := ss[r.rng.IntN(len(ss))]
	ps := r.orc.Periods(s.Board, s.Dims)
	r.compare(ctx, []boardRef{{s.Board, s.Dims, ps[len(ps)-1]}})
}

// checkAll compares the visible boards the oracle knows of (all but most
// empty rolling ones), and for rolling boards also those up to the latest
// rolled period and the one after the last period with data.
func (r *exactRun) checkAll(ctx context.Context) {
	r.t.Helper()
	var refs []boardRef
	for _, s := range r.orc.Streams() {
		ps := r.orc.Periods(s.Board, s.Dims)
		b := r.boards[s.Board]
		if b.Window != ranking.WindowRolling {
			for _, p := range ps {
				refs = append(refs, boardRef{s.Board, s.Dims, p})
			}
			continue
		}
		// Rolling boards: every S(k) with members, the first empty one
		// after them (its members have all left the window) and a sample
		// of the other empty ones (long gaps, far-late first events).
		prev := false
		for _, p := range ps {
			has := len(r.orc.Board(s.Board, s.Dims, p)) > 0
			if has || prev || r.chance(0.05) {
				refs = append(refs, boardRef{s.Board, s.Dims, p})
			}
			prev = has
		}
		cal := b.Calendar()
		last, err := cal.Parse(ps[len(ps)-1])
		if err != nil {
			r.t.Fatal(err)
		}
		through := cal.Next(last)
		if k, ok := r.rolled[streamName(s.Board, s.Dims)]; ok && k.Start.After(through.Start) {
			through = k
		}
		for p := cal.Next(last); !p.Start.After(through.Start); p = cal.Next(p) {
			refs = append(refs, boardRef{s.Board, s.Dims, p.ID})
		}
	}
	r.compare(ctx, refs)
}

// compare reads refs from the store and fails the test with a precise diff
// when any differs from the oracle. Boards of one stream are read in order
// by one goroutine (a read may roll a rolling board over, under a lock),
// streams in parallel.
func (r *exactRun) compare(ctx context.Context, refs []boardRef) {
	r.t.Helper()
	var (
		mu      sync.Mutex
		diffs   []string
		bad     int
		streams = map[string][]boardRef{}
		order   []string
	)
	for _, ref := range refs {
		k := streamName(ref.board, ref.dims)
		if streams[k] == nil {
			order = append(order, k)
		}
		streams[k] = append(streams[k], ref)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(6)
	for _, k := range order {
		g.Go(func() error {
			for _, ref := range streams[k] {
				got, err := r.store.Entries(gctx, ref.board, ref.dims, ref.period)
				if err != nil {
					return fmt.Errorf("entries %s %s: %w", k, ref.period, err)
				}
				want := r.orc.Board(ref.board, ref.dims, ref.period)
				d := r.diff(ref, got, want)
				if d == "" && len(want) > 0 {
					n, err := r.store.EventCount(gctx, ref.board, ref.dims, ref.period)
					if err != nil {
						return fmt.Errorf("event count %s %s: %w", k, ref.period, err)
					}
					if w := r.orc.Events(ref.board, ref.dims, ref.period); n != w {
						d = fmt.Sprintf("%s %s: %d updates applied, the oracle %d", k, ref.period, n, w)
					}
				}
				if d != "" {
					mu.Lock()
					bad++
					if len(diffs) < 5 {
						diffs = append(diffs, d)
					}
					mu.Unlock()
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		r.t.Fatalf("seed %d: %v", r.seed, err)
	}
	if bad > 0 {
		r.t.Fatalf("seed %d: %d of %d boards differ from the oracle (first %d shown):\n%s",
			r.seed, bad, len(refs), len(diffs), strings.Join(diffs, "\n"))
	}
}

// diff describes how got differs from want, row by row, or returns "".
func (r *exactRun) diff(ref boardRef, got []store.Entry, want []oracle.Entry) string {
	codec, _ := r.store.Codec(ref.board)
	row := func(e oracle.Entry) string { return fmt.Sprintf("%q=%d@%d", e.Member, e.Value, e.Tie) }
	var rows []string
	n := 0
	for i := range max(len(got), len(want)) {
		g, w := "-", "-"
		ok := i < len(got) && i < len(want)
		if i < len(got) {
			e := got[i]
			g = row(oracle.Entry{Member: e.Member, Value: e.Value, Tie: e.Tie})
			if e.Rank != int64(i+1) {
				g += fmt.Sprintf(" rank %d", e.Rank)
				ok = false
			}
			if s, err := codec.Encode(e.Value, e.Tie); err != nil || s != e.Score {
				g += fmt.Sprintf(" score %v", e.Score)
				ok = false
			}
		}
		if i < len(want) {
			w = row(want[i])
		}
		if ok && g == w {
			continue
		}
		if n++; n <= maxDiffRows {
			rows = append(rows, fmt.Sprintf("    %3d got %-32s want %s", i+1, g, w))
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("  %s %s: %d rows, want %d; %d rows differ%s:\n%s",
		streamName(ref.board, ref.dims), ref.period, len(got), len(want), n, shown(n), strings.Join(rows, "\n"))
}
