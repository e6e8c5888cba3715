package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// PhaseCost measures the Redis time of the API's reads.
const PhaseCost = "cost"

// Cost is the result of the cost phase: per kind of read, what the budget
// estimates before the work, what the cost model says of the work the
// read did, and what Redis spent (INFO cpu), per read.
type Cost struct {
	Reads []CostRead `json:"reads"`
}

// CostRead is one kind of read on one board.
type CostRead struct {
	Read    string `json:"read"`
	Members int    `json:"members"`
	Count   int    `json:"count"` // reads measured
	// EstimatedUs is what the budget charges up front, ModelUs the model
	// of the work counted (what the charge is corrected to), RedisUs the
	// Redis CPU time measured, per read.
	EstimatedUs float64 `json:"estimated_us"`
	ModelUs     float64 `json:"model_us"`
	RedisUs     float64 `json:"redis_us"`
}

const costPrefix = "benchcost"

// cost writes two day boards of 200k and 1M members into the current and
// the previous period (values drawn from 4x as many as members, a
// member's previous value within ±4 of its current one: a stable board,
// whose top members' previous ranks lie within the dense budget), and runs
// each kind of read through the API's handler (no cache, no budget; one
// read at a time, in this process) for about a second, on a Redis that
// does nothing else. Redis' CPU time (INFO cpu, less what it spends idle
// over the same time) is divided by the reads; the estimate and the model
// come from the handler's metrics (rankd_http_redis_estimated_seconds_total,
// rankd_http_redis_seconds_total).
func (e *env) cost(ctx context.Context) (*Cost, error) {
	day, _ := ranking.ParseUnit("1d")
	sizes := []int{200_000, 1_000_000}
	var boards []*ranking.Board
	for _, n := range sizes {
		boards = append(boards, &ranking.Board{Name: "cost" + strconv.Itoa(n), Window: ranking.WindowPeriodic, Every: day, Grace: time.Hour})
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr, PoolSize: 4})
	defer rdb.Close()
	st, err := store.New(rdb, boards, store.WithPrefix(costPrefix))
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.deleteKeys(context.WithoutCancel(ctx), costPrefix+":*") }()
	reg := prometheus.NewRegistry()
	h := httpapi.New(st, httpapi.WithRegisterer(reg), httpapi.WithExpensiveRate(0))
	out := &Cost{}
	for _, n := range sizes {
		board := "cost" + strconv.Itoa(n)
		e.prog.set(fmt.Sprintf("cost: writing %d members", n), nil)
		top, err := e.fillCost(ctx, rdb, st, board, n)
		if err != nil {
			return nil, err
		}
		idle, err := e.idleRedis(ctx)
		if err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(uint64(n), 3))
		anyone := func() string { return "c" + strconv.Itoa(rng.IntN(n)) }
		best := func() string { return top[rng.IntN(len(top))] }
		// /members with rank=dense walks to its rank (at most half the
		// dense budget) and to its previous rank (the rest): the top 400
		high := func() string { return top[rng.IntN(min(400, len(top)))] }
		base := "/v1/boards/" + board
		for _, k := range []struct {
			name, route string
			path        func() string
		}{
			{"top 20", "top", func() string { return base + "/top?limit=20" }},
			{"top 1000", "top", func() string { return base + "/top?limit=1000" }},
			{"top 20, trend", "top", func() string { return base + "/top?limit=20&trend=1" }},
			{"top 1000, dense, trend", "top", func() string { return base + "/top?limit=1000&rank=dense&trend=1" }},
			{"member", "member", func() string { return base + "/members/" + anyone() }},
			{"member, dense (top 400)", "member", func() string { return base + "/members/" + high() + "?rank=dense" }},
			{"around 5", "around", func() string { return base + "/members/" + anyone() + "/around?n=5" }},
			{"around 5, dense (top 1000)", "around", func() string { return base + "/members/" + best() + "/around?n=5&rank=dense" }},
		} {
			e.prog.set(fmt.Sprintf("cost: %s on %d members", k.name, n), nil)
			r, err := e.costOf(ctx, h, reg, idle, k.route, k.path)
			if err != nil {
				return nil, fmt.Errorf("%s on %d members: %w", k.name, n, err)
			}
			r.Read, r.Members = k.name, n
			out.Reads = append(out.Reads, *r)
		}
	}
	return out, nil
}

// fillCost writes the board's two periods and returns its top 1000
// members.
func (e *env) fillCost(ctx context.Context, rdb *redis.Client, st *store.Store, board string, n int) ([]string, error) {
	codec, _ := st.Codec(board)
	b := st.Boards()
	var cal ranking.Calendar
	for _, x := range b {
		if x.Name == board {
			cal = x.Calendar()
		}
	}
	cur := cal.At(time.Now())
	prev := cal.Prev(cur)
	tag := store.Tag(board, nil)
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	pipe := rdb.Pipeline()
	for lo := 0; lo < n; lo += 10_000 {
		zc, zp := make([]redis.Z, 0, 10_000), make([]redis.Z, 0, 10_000)
		for i := lo; i < min(lo+10_000, n); i++ {
			v := 1 + rng.Int64N(4*int64(n))
			p := max(v+rng.Int64N(9)-4, 1)
			sv, err := codec.Encode(v, 0)
			if err != nil {
				return nil, err
			}
			sp, _ := codec.Encode(p, 0)
			m := "c" + strconv.Itoa(i)
			zc = append(zc, redis.Z{Score: sv, Member: m})
			zp = append(zp, redis.Z{Score: sp, Member: m})
		}
		pipe.ZAdd(ctx, store.Key(costPrefix, tag, store.KindPeriod, cur.ID), zc...)
		pipe.ZAdd(ctx, store.Key(costPrefix, tag, store.KindPeriod, prev.ID), zp...)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	pg, err := st.Top(ctx, board, nil, "", 1000, store.RankRow)
	if err != nil {
		return nil, err
	}
	top := make([]string, len(pg.Entries))
	for i, en := range pg.Entries {
		top[i] = en.Member
	}
	return top, nil
}

// idleRedis returns the CPU time Redis spends per second doing nothing
// but its timers, in seconds, measured over a second.
func (e *env) idleRedis(ctx context.Context) (float64, error) {
	m0, err := e.meter(ctx)
	if err != nil {
		return 0, err
	}
	time.Sleep(time.Second)
	m1, err := e.meter(ctx)
	if err != nil {
		return 0, err
	}
	return (m1.redis - m0.redis).Seconds() / m1.at.Sub(m0.at).Seconds(), nil
}

// costOf reads path() through h, one read at a time, for about a second
// (at least 10 reads, at most 5000) after a first read that loads the
// scripts, and returns the costs per read.
func (e *env) costOf(ctx context.Context, h http.Handler, reg *prometheus.Registry, idle float64, route string, path func() string) (*CostRead, error) {
	get := func() error {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, path(), nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", req.URL, w.Code, w.Body.String())
		}
		return nil
	}
	if err := get(); err != nil {
		return nil, err
	}
	est0, _ := counterByLabel(reg, "rankd_http_redis_estimated_seconds_total", "route")
	mod0, _ := counterByLabel(reg, "rankd_http_redis_seconds_total", "route")
	m0, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	k := 0
	for ; k < 10 || (k < 5000 && time.Since(m0.at) < time.Second); k++ {
		if err := get(); err != nil {
			return nil, err
		}
	}
	m1, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	est1, _ := counterByLabel(reg, "rankd_http_redis_estimated_seconds_total", "route")
	mod1, _ := counterByLabel(reg, "rankd_http_redis_seconds_total", "route")
	per := func(s float64) float64 { return round(s*1e6/float64(k), 1) }
	redisCPU := (m1.redis - m0.redis).Seconds() - idle*m1.at.Sub(m0.at).Seconds()
	return &CostRead{Count: k, EstimatedUs: per(est1[route] - est0[route]), ModelUs: per(mod1[route] - mod0[route]), RedisUs: per(redisCPU)}, nil
}

// deleteKeys deletes the keys matching pattern, freeing their memory
// before it returns (DEL: UNLINK would free it in the background, during
// the next phase).
func (e *env) deleteKeys(ctx context.Context, pattern string) error {
	return e.scan(ctx, pattern, func(keys []string) error { return e.admin.Del(ctx, keys...).Err() })
}

// Write prints the cost phase's table.
func (c *Cost) Write(w io.Writer) {
	fmt.Fprintln(w, "\ncost: Redis time per read (µs), on a Redis doing nothing else, reads one at a time through the API without cache or budget:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "read\tmembers\treads\testimated\tmodel of the work\tRedis CPU\tRedis/estimated\t")
	for _, r := range c.Reads {
		ratio := 0.0
		if r.EstimatedUs > 0 {
			ratio = r.RedisUs / r.EstimatedUs
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t\n", r.Read, r.Members, r.Count, r.EstimatedUs, r.ModelUs, r.RedisUs, ratio)
	}
	_ = tw.Flush()
}
