package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestCalibrateCostModel measures the Redis CPU time of the reads the API
// makes (INFO cpu of a Redis that serves nothing else, per read) on day
// boards of 10k, 200k and 1M members, counts their work as the API's
// budget does (store.WithCost), and fits the cost model's six constants
// to the measurements by least squares on the relative error. It prints
// the fit and, per read, what store.DefaultCostModel and the fit say
// against what Redis spent; it asserts nothing (a measurement, run by
// hand):
//
//	RANKD_CALIBRATE=1 go test -run TestCalibrateCostModel -v ./ranking/store/
//
// The boards: every member in the current and the previous period, with
// values drawn from 4× as many as there are members (mostly distinct), the
// previous period's a member's current value ± 4, so that a top page's
// members are near the top of the previous period too (a stable board:
// previous ranks within a dense budget).
func TestCalibrateCostModel(t *testing.T) {
	testenv.OptIn(t, "RANKD_CALIBRATE", "1", "Redis time of the API's reads, minutes")
	srv := testenv.NewRedis(t, testenv.RedisOptions{})
	rdb := srv.Client(t)
	ctx := t.Context()
	day, _ := ranking.ParseUnit("1d")
	clock := func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }
	sizes := []int{10_000, 200_000, 1_000_000}
	var boards []*ranking.Board
	for _, n := range sizes {
		boards = append(boards, &ranking.Board{Name: "cal" + strconv.Itoa(n), Window: ranking.WindowPeriodic, Every: day, Grace: time.Hour})
	}
	prefix := testenv.Prefix(t)
	st, err := store.New(rdb, boards, store.WithPrefix(prefix), store.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	var obs []observation
	for _, n := range sizes {
		board := "cal" + strconv.Itoa(n)
		members := fillCalibration(t, rdb, st, prefix, board, n)
		idle, err := idleCPU(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		top, err := st.Top(ctx, board, nil, "", 1000, store.RankRow)
		if err != nil {
			t.Fatal(err)
		}
		page := make([]string, 0, 1000)
		for _, e := range top.Entries {
			page = append(page, e.Member)
		}
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		member := func() string { return members[rng.IntN(len(members))] }
		for _, op := range []struct {
			name string
			read func(ctx context.Context) error
		}{
			{"top 1 row", func(ctx context.Context) error { _, err := st.Top(ctx, board, nil, "", 1, store.RankRow); return err }},
			{"top 20 row", func(ctx context.Context) error { _, err := st.Top(ctx, board, nil, "", 20, store.RankRow); return err }},
			{"top 1000 row", func(ctx context.Context) error {
				_, err := st.Top(ctx, board, nil, "", 1000, store.RankRow)
				return err
			}},
			{"prev ranks of 20, row", func(ctx context.Context) error {
				_, err := st.Ranks(ctx, board, nil, "previous", page[:20], store.RankRow)
				return err
			}},
			{"prev ranks of 1000, row", func(ctx context.Context) error {
				_, err := st.Ranks(ctx, board, nil, "previous", page, store.RankRow)
				return err
			}},
			{"prev ranks of 1000, competition", func(ctx context.Context) error {
				_, err := st.Ranks(ctx, board, nil, "previous", page, store.RankCompetition)
				return err
			}},
			{"prev ranks of 20, dense", func(ctx context.Context) error {
				_, err := st.Ranks(store.WithDenseBudget(ctx, 5000), board, nil, "previous", page[:20], store.RankDense)
				return err
			}},
			{"prev ranks of 1000, dense", func(ctx context.Context) error {
				_, err := st.Ranks(store.WithDenseBudget(ctx, 5000), board, nil, "previous", page, store.RankDense)
				return err
			}},
			{"member row", func(ctx context.Context) error {
				_, err := st.Member(ctx, board, nil, member(), "", store.RankRow)
				return err
			}},
			{"member competition", func(ctx context.Context) error {
				_, err := st.Member(ctx, board, nil, member(), "", store.RankCompetition)
				return err
			}},
			{"member dense (top 1000)", func(ctx context.Context) error {
				_, err := st.Member(store.WithDenseBudget(ctx, 5000), board, nil, page[rng.IntN(len(page))], "", store.RankDense)
				return err
			}},
			{"around 5 row", func(ctx context.Context) error {
				_, err := st.Around(ctx, board, nil, member(), "", 5, store.RankRow)
				return err
			}},
			{"around 5 dense (top 1000)", func(ctx context.Context) error {
				_, err := st.Around(store.WithDenseBudget(ctx, 5000), board, nil, page[rng.IntN(len(page))], "", 5, store.RankDense)
				return err
			}},
		} {
			o, err := measure(ctx, rdb, idle, op.read)
			if err != nil {
				t.Fatalf("%s on %d: %v", op.name, n, err)
			}
			o.name, o.n = op.name, int64(n)
			obs = append(obs, o)
		}
	}
	fit := fitModel(obs)
	t.Logf("fitted: store.CostModel{RoundTrip: %.2f, Command: %.3f, CommandLog: %.4f, Element: %.4f, Step: %.3f, StepLog: %.4f}",
		fit.RoundTrip, fit.Command, fit.CommandLog, fit.Element, fit.Step, fit.StepLog)
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %9s %6s %8s %8s %8s %10s %10s %10s\n", "read", "members", "trips", "cmds", "elems", "steps", "redis µs", "default", "fitted")
	for _, o := range obs {
		fmt.Fprintf(&b, "%-34s %9d %6.1f %8.1f %8.1f %8.1f %10.1f %10.1f %10.1f\n", o.name, o.n, o.c.trips, o.c.cmds, o.c.elems, o.c.steps, o.us,
			store.DefaultCostModel.Micros(o.counts(), o.n), fit.Micros(o.counts(), o.n))
	}
	t.Logf("per read, averaged:\n%s", b.String())
}

// fillCalibration writes n members into the current (20261121) and the
// previous period of board, and returns the members.
func fillCalibration(t *testing.T, rdb *redis.Client, st *store.Store, prefix, board string, n int) []string {
	t.Helper()
	codec, _ := st.Codec(board)
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	members := make([]string, n)
	cur, prev := make([]redis.Z, 0, n), make([]redis.Z, 0, n)
	for i := range members {
		members[i] = "c" + strconv.Itoa(i)
		v := 1 + rng.Int64N(4*int64(n))
		p := max(v+rng.Int64N(9)-4, 1)
		sv, err := codec.Encode(v, 0)
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := codec.Encode(p, 0)
		cur = append(cur, redis.Z{Score: sv, Member: members[i]})
		prev = append(prev, redis.Z{Score: sp, Member: members[i]})
	}
	tag := store.Tag(board, nil)
	for _, k := range []struct {
		key string
		zs  []redis.Z
	}{{store.Key(prefix, tag, store.KindPeriod, "20261121"), cur}, {store.Key(prefix, tag, store.KindPeriod, "20261120"), prev}} {
		for lo := 0; lo < len(k.zs); lo += 10_000 {
			if err := rdb.ZAdd(t.Context(), k.key, k.zs[lo:min(lo+10_000, len(k.zs))]...).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return members
}

// observation is one read's average Redis time (µs) and counted work.
type observation struct {
	name string
	n    int64
	us   float64
	c    struct{ trips, cmds, elems, steps float64 }
}

func (o observation) counts() store.Counts {
	return store.Counts{RoundTrips: int64(math.Round(o.c.trips)), Commands: int64(math.Round(o.c.cmds)),
		Elements: int64(math.Round(o.c.elems)), DenseSteps: int64(math.Round(o.c.steps))}
}

// idleCPU returns the CPU time Redis spends per second of wall time doing
// nothing (its timers), in seconds, over a second.
func idleCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	time.Sleep(time.Second)
	cpu1, err := redisCPU(ctx, rdb)
	return (cpu1 - cpu0) / time.Since(start).Seconds(), err
}

// measure runs read until it has taken a second of wall time (at least 10
// and at most 5000 times), and returns Redis' CPU time per read (INFO cpu
// before and after, less idle per second of the wall time) and the
// average counts.
func measure(ctx context.Context, rdb *redis.Client, idle float64, read func(context.Context) error) (observation, error) {
	var o observation
	if err := read(ctx); err != nil { // warm: scripts loaded, generations read
		return o, err
	}
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return o, err
	}
	var total store.Counts
	k := 0
	start := time.Now()
	for ; k < 10 || (k < 5000 && time.Since(start) < time.Second); k++ {
		cctx, cost := store.WithCost(ctx)
		if err := read(cctx); err != nil {
			return o, err
		}
		c := cost.Counts()
		total.RoundTrips += c.RoundTrips
		total.Commands += c.Commands
		total.Elements += c.Elements
		total.DenseSteps += c.DenseSteps
	}
	cpu1, err := redisCPU(ctx, rdb)
	if err != nil {
		return o, err
	}
	o.us = (cpu1 - cpu0 - idle*time.Since(start).Seconds()) * 1e6 / float64(k)
	per := func(n int64) float64 { return float64(n) / float64(k) }
	o.c.trips, o.c.cmds, o.c.elems, o.c.steps = per(total.RoundTrips), per(total.Commands), per(total.Elements), per(total.DenseSteps)
	return o, nil
}

// redisCPU returns used_cpu_user + used_cpu_sys, in seconds.
func redisCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			sum += f
		}
	}
	return sum, nil
}

// fitModel fits the six constants of the cost model to the observations,
// minimising the sum of squared relative errors (normal equations).
func fitModel(obs []observation) store.CostModel {
	const p = 6
	var a [p][p + 1]float64
	for _, o := range obs {
		lg := math.Log2(float64(o.n) + 1)
		x := [p]float64{o.c.trips, o.c.cmds, o.c.cmds * lg, o.c.elems, o.c.steps, o.c.steps * lg}
		w := 1 / (o.us * o.us) // relative error
		for i := range p {
			for j := range p {
				a[i][j] += w * x[i] * x[j]
			}
			a[i][p] += w * x[i] * o.us
		}
	}
	// Gauss-Jordan with partial pivoting
	for c := range p {
		piv := c
		for r := c + 1; r < p; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		a[c], a[piv] = a[piv], a[c]
		if a[c][c] == 0 {
			continue
		}
		for r := range p {
			if r == c {
				continue
			}
			f := a[r][c] / a[c][c]
			for k := c; k <= p; k++ {
				a[r][k] -= f * a[c][k]
			}
		}
	}
	var x [p]float64
	for i := range p {
		if a[i][i] != 0 {
			x[i] = a[i][p] / a[i][i]
		}
	}
	return store.CostModel{RoundTrip: x[0], Command: x[1], CommandLog: x[2], Element: x[3], Step: x[4], StepLog: x[5]}
}
