package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/workload"
	"github.com/rankd/rankd/ranking/store"
)

// PhaseReads measures the read API under audience load.
const PhaseReads = "reads"

const (
	readsBoard   = "anchor_total"
	readsMembers = 1_000_000
	readsDims    = "anchor_hot_zone_30m"
)

// Reads is the result of the reads phase: the same ingestion rate alone,
// then with ReadClients clients reading top-20 only, then a mix.
type Reads struct {
	Clients  int        `json:"clients"`
	Members  int        `json:"members"`
	Rate     float64    `json:"ingest_rate"`
	Seconds  float64    `json:"seconds_each"`
	CacheTTL string     `json:"cache_ttl"`
	Runs     []ReadsRun `json:"runs"`
}

// ReadsRun is one run of the reads phase.
type ReadsRun struct {
	Name        string  `json:"name"`
	ReadsPerSec float64 `json:"reads_per_sec"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Errors      int64   `json:"errors"`
	Refused     int64   `json:"refused_503"`
	HitRate     float64 `json:"cache_hit_rate"`
	// RedisUsPerRead is the modelled Redis time per read, per route
	// (rankd_http_redis_seconds_total / rankd_http_requests_total).
	RedisUsPerRead map[string]float64 `json:"redis_us_per_read"`
	// Ingested is the events consumed per second over the run, Produced
	// those produced.
	Produced   float64 `json:"produced_per_sec"`
	Ingested   float64 `json:"ingested_per_sec"`
	RedisBusy  float64 `json:"redis_busy"`
	VisibleP99 float64 `json:"visible_p99_ms"`
	APIVisP99  float64 `json:"api_visible_p99_ms"`
	RankdCPU   float64 `json:"rankd_cpu_cores"`
}

// readsGroup is the consumer group of the reads phase.
const readsGroup = "rankd-reads"

// reads runs the reads phase on a group of its own (from the start of the
// topics): a
// 1M-member all-time board is written straight into Redis, then the same
// fixed-rate ingestion runs three times for o.ReadDuration: alone, with
// ReadClients clients reading /top?limit=20 in a closed loop, and with
// them reading a mix (top 20 60%, member 20%, around 10%, dims 10%). The
// clients run in this process (so do rankd and the producer).
func (e *env) reads(ctx context.Context) (*Reads, error) {
	// A group of its own: the phases before flush Redis (rollover), and
	// rankd halts a group whose committed offsets Redis no longer knows.
	rs, err := e.caughtUp(ctx, "reads", readsGroup, 0) // 0: the latency phase produced more
	if err != nil {
		return nil, err
	}
	defer func() { _ = rs.stop() }()
	cfg := rs.cfg
	base := "http://" + rs.HTTPAddr()
	hc := &http.Client{Timeout: 5 * time.Second}
	readAPI := func(ctx context.Context) (int64, error) {
		return pollMember(ctx, hc, base+"/v1/boards/"+markerBoard+"/members/"+markerAnchor)
	}
	e.prog.set("reads: rankd joining the group", nil)
	if _, err := e.warmUp(ctx, rs, e.o.Seed+100, readAPI); err != nil { // not the latency phase's marker: a duplicate would never show
		return nil, err
	}
	// the 1M members, in the board's active generation
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr})
	defer rdb.Close()
	st, err := store.New(rdb, cfg.Boards(), store.WithPrefix(cfg.Redis.Prefix))
	if err != nil {
		return nil, err
	}
	gens, err := st.Generations(ctx)
	if err != nil {
		return nil, err
	}
	prefix := cfg.Redis.Prefix
	if g := gens[readsBoard].Active; g > 0 {
		prefix += ":g" + strconv.Itoa(g)
	}
	key := store.Key(prefix, store.Tag(readsBoard, nil), "t", "all")
	e.prog.set("reads: writing 1M members", nil)
	pipe := rdb.Pipeline()
	for lo := 0; lo < readsMembers; lo += 10000 {
		zs := make([]redis.Z, 0, 10000)
		for m := lo; m < lo+10000; m++ {
			zs = append(zs, redis.Z{Score: float64(m%50000 + 1), Member: "rb" + strconv.Itoa(m)})
		}
		pipe.ZAdd(ctx, key, zs...)
		if pipe.Len() >= 10 {
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, err
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}

	out := &Reads{Clients: e.o.ReadClients, Members: readsMembers, Rate: e.o.ReadRate, Seconds: e.o.ReadDuration.Seconds(),
		CacheTTL: cfg.API.CacheTTL.String()}
	top := base + "/v1/boards/" + readsBoard + "/top?limit=20"
	mix := func(i int) string {
		switch k := i % 10; {
		case k < 6:
			return top
		case k < 8:
			return base + "/v1/boards/" + readsBoard + "/members/rb" + strconv.Itoa(i*7919%readsMembers)
		case k < 9:
			return base + "/v1/boards/" + readsBoard + "/members/rb" + strconv.Itoa(i*104729%readsMembers) + "/around?n=5"
		}
		return base + "/v1/boards/" + readsDims + "/dims?limit=20"
	}
	for _, run := range []struct {
		name    string
		clients int
		url     func(int) string
	}{
		{"ingestion alone", 0, nil},
		{"top-20 readers", e.o.ReadClients, func(int) string { return top }},
		{"mixed readers", e.o.ReadClients, mix},
	} {
		r, err := e.readsRun(ctx, rs, cfg.Redis.Prefix, readAPI, run.name, run.clients, run.url)
		if err != nil {
			return out, fmt.Errorf("%s: %w", run.name, err)
		}
		out.Runs = append(out.Runs, *r)
	}
	return out, nil
}

// readsRun produces at the fixed rate for the run's duration, with
// clients readers, and measures.
func (e *env) readsRun(ctx context.Context, rs *runningStack, _ string, readAPI func(context.Context) (int64, error),
	name string, clients int, url func(int) string) (*ReadsRun, error) {
	g := rs.Metrics()
	base, err := readAPI(ctx)
	if err != nil {
		return nil, err
	}
	readRedis := func(ctx context.Context) (int64, error) { return readAPI(ctx) }
	_ = readRedis
	msgs0, _ := counterSum(g, "rankd_consumer_messages_total")
	cache0, _ := counterByLabel(g, "rankd_http_cache_requests_total", "result")
	reqs0, _ := counterByLabel(g, "rankd_http_requests_total", "route")
	rtime0, _ := counterByLabel(g, "rankd_http_redis_seconds_total", "route")
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	// the readers
	var wg sync.WaitGroup
	lats := make([][]time.Duration, clients)
	var errs, refused atomic.Int64
	tr := &http.Transport{MaxIdleConns: clients + 10, MaxIdleConnsPerHost: clients + 10}
	defer tr.CloseIdleConnections()
	rc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for c := range clients {
		wg.Go(func() {
			for i := c; rctx.Err() == nil; i += clients {
				req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url(i), nil)
				t0 := time.Now()
				resp, err := rc.Do(req)
				if err != nil {
					if rctx.Err() == nil {
						errs.Add(1)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 503:
					refused.Add(1)
				case resp.StatusCode != 200:
					errs.Add(1)
				}
				lats[c] = append(lats[c], time.Since(t0))
			}
		})
	}
	// the markers' pollers and the producer
	st := &markers{}
	pollers := []*poller{{read: readAPI, base: base, every: 5 * time.Millisecond}}
	perrs := make([]error, len(pollers))
	var pwg sync.WaitGroup
	for i, p := range pollers {
		pwg.Go(func() { perrs[i] = p.run(ctx, st) })
	}
	wl, err := workload.New(workload.Config{Seed: e.o.Seed + 7})
	if err != nil {
		return nil, err
	}
	w := newWriter(e.brokers, time.Millisecond)
	defer w.Close()
	rate := e.o.ReadRate
	var produced int64
	e.prog.set(fmt.Sprintf("reads: %s, %d clients, %.0f events/s", name, clients, rate), nil)
	start := time.Now()
	var werr error
	for werr == nil && time.Since(start) < e.o.ReadDuration {
		due := min(int64(rate*time.Since(start).Seconds())-produced, 4096)
		if due <= 0 {
			time.Sleep(latencyTick)
			continue
		}
		ms := make([]kafka.Message, 0, due)
		ms = append(ms, markerMessage(e.o.Seed+int64(len(name)), st.count()+1+int(base)))
		for range due - 1 {
			ev := wl.Next()
			ms = append(ms, kafka.Message{Topic: ev.Topic, Key: ev.Key, Value: ev.Value})
		}
		st.send()
		if werr = w.WriteMessages(ctx, ms...); werr != nil {
			werr = fmt.Errorf("producing: %w", writeErr(werr))
		}
		produced += int64(len(ms))
	}
	elapsed := time.Since(start)
	msgs1, _ := counterSum(g, "rankd_consumer_messages_total")
	after, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	stop()
	wg.Wait()
	st.done()
	pwg.Wait()
	if err := errors.Join(append(perrs, werr)...); err != nil {
		return nil, err
	}
	cache1, _ := counterByLabel(g, "rankd_http_cache_requests_total", "result")
	reqs1, _ := counterByLabel(g, "rankd_http_requests_total", "route")
	rtime1, _ := counterByLabel(g, "rankd_http_redis_seconds_total", "route")
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := &ReadsRun{Name: name, ReadsPerSec: round(float64(len(all))/elapsed.Seconds(), 0),
		P50Ms: ms(quantile(all, 0.5)), P99Ms: ms(quantile(all, 0.99)), Errors: errs.Load(), Refused: refused.Load(),
		Produced: round(float64(produced)/elapsed.Seconds(), 0), Ingested: round((msgs1-msgs0)/elapsed.Seconds(), 0),
		RedisUsPerRead: map[string]float64{}}
	hits, total := cache1["hit"]-cache0["hit"], 0.0
	for k, v := range cache1 {
		total += v - cache0[k]
	}
	if total > 0 {
		r.HitRate = round(hits/total, 4)
	}
	for route, v := range rtime1 {
		if n := reqs1[route] - reqs0[route]; n > 0 {
			r.RedisUsPerRead[route] = round((v-rtime0[route])*1e6/n, 2)
		}
	}
	c := cpu(before, after, max(produced, 1), 1, after.at.Sub(before.at))
	r.RedisBusy, r.RankdCPU = c.RedisBusy, round(after.self.Seconds()-before.self.Seconds(), 2)/after.at.Sub(before.at).Seconds()
	r.RankdCPU = round(r.RankdCPU, 2)
	r.APIVisP99 = pollers[0].stats(st.sent).P99Ms
	r.VisibleP99 = r.APIVisP99
	return r, nil
}

// WriteReads prints the reads phase's table.
func (r *Reads) Write(w io.Writer) {
	fmt.Fprintf(w, "\nreads: %d clients, a %d-member board, ingestion at %.0f events/s, %.0f s per run, cache TTL %s\n",
		r.Clients, r.Members, r.Rate, r.Seconds, r.CacheTTL)
	fmt.Fprintf(w, "%-16s %9s %8s %8s %7s %7s %9s %9s %9s %7s %9s %s\n", "run", "reads/s", "p50 ms", "p99 ms", "503", "hit", "produced", "ingested", "vis p99", "redis", "rankd cpu", "redis µs/read (model)")
	for _, x := range r.Runs {
		fmt.Fprintf(w, "%-16s %9.0f %8.2f %8.2f %7d %7.4f %9.0f %9.0f %9.1f %7.3f %9.2f %v\n", x.Name, x.ReadsPerSec, x.P50Ms, x.P99Ms,
			x.Refused, x.HitRate, x.Produced, x.Ingested, x.APIVisP99, x.RedisBusy, x.RankdCPU, x.RedisUsPerRead)
	}
}
