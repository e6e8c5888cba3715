package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/cmd/rankd/internal/loadgen"
	"github.com/rankd/rankd/consumer"
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
	Refresh  string     `json:"cache_refresh"`
	Budget   float64    `json:"redis_budget"`
	Yield    string     `json:"yield_latency"`
	Runs     []ReadsRun `json:"runs"`
}

// ReadsRun is one run of the reads phase.
type ReadsRun struct {
	Name    string `json:"name"`
	LoadAvg string `json:"loadavg"` // at the start of the run
	// ReadsPerSec are the answers the load generator received per
	// second (every status), P50Ms and P99Ms their latency as it saw it.
	ReadsPerSec float64 `json:"reads_per_sec"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	OK          int64   `json:"ok_200"`
	Refused     int64   `json:"refused_503"`
	// Errors are other statuses, and connections that failed.
	Errors int64 `json:"errors"`
	// HitRate is the share of board reads served from memory (hit or
	// stale, rankd_http_cache_requests_total).
	HitRate float64 `json:"cache_hit_rate"`
	// RedisUsPerRead is the Redis time per read, per route, as the cost
	// model counts it from the commands the reads sent
	// (rankd_http_redis_seconds_total / rankd_http_requests_total).
	RedisUsPerRead map[string]float64 `json:"redis_us_per_read"`
	// Produced and Ingested are the events produced and consumed per
	// second over the run; IngestShare is Ingested over the better of the
	// runs without readers.
	Produced    float64 `json:"produced_per_sec"`
	Ingested    float64 `json:"ingested_per_sec"`
	IngestShare float64 `json:"ingest_share"`
	LagAtEnd    int64   `json:"lag_at_end"`
	RedisBusy   float64 `json:"redis_busy"`
	// Event-to-visible p99: in Redis (a ZSCORE poller) and through the
	// API (a poller of /members, which the cache serves up to a TTL old).
	RedisVisP99 float64 `json:"redis_visible_p99_ms"`
	APIVisP99   float64 `json:"api_visible_p99_ms"`
	APIPoll503  int     `json:"api_poll_503"` // the API poller's reads answered 503
	// YieldPauses is how often the API stopped yielding to a slow consumer
	// during the run (rankd_http_yield_pauses_total).
	YieldPauses int `json:"yield_pauses"`
	// APIPollP99Ms is the p99 of one read of the API poller (its own wait
	// included: admission, a refresh of the cache entry).
	APIPollP99Ms float64 `json:"api_poll_read_p99_ms"`
	// CPU in cores: the bench process (rankd), the load generator child,
	// the traffic child (the producer and the pollers), the broker child.
	RankdCPU   float64 `json:"rankd_cpu_cores"`
	LoadgenCPU float64 `json:"loadgen_cpu_cores"`
	TrafficCPU float64 `json:"traffic_cpu_cores"`
	BrokerCPU  float64 `json:"broker_cpu_cores"`
}

// readsGroup is the consumer group of the reads phase.
const readsGroup = "rankd-reads"

// reads runs the reads phase on a group of its own (from the start of the
// topics): a 1M-member all-time board is written straight into Redis, then
// the same fixed-rate ingestion runs four times for o.ReadDuration: alone,
// with ReadClients clients reading /top?limit=20 in a closed loop, with
// them reading a mix (top 20 60%, member 20%, around 10%, dims 10%), and
// alone again; each run's ingestion is compared with the better of the two
// runs alone (IngestShare). The
// clients run in a child process (package loadgen), one keep-alive
// connection each; the producer and the markers' pollers in a child of
// their own (traffic.go); rankd in this one.
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
	apiURL := base + "/v1/boards/" + markerBoard + "/members/" + markerAnchor
	readAPI := func(ctx context.Context) (int64, error) { return pollMember(ctx, hc, apiURL) }
	e.prog.set("reads: rankd joining the group", nil)
	value, err := e.warmUp(ctx, rs, e.o.Seed+100, readAPI) // not the latency phase's marker: a duplicate would never show
	if err != nil {
		return nil, err
	}
	key, readRedis, err := e.markerReader(ctx, cfg, value)
	if err != nil {
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
	bkey := store.Key(prefix, store.Tag(readsBoard, nil), "t", "all")
	e.prog.set("reads: writing 1M members", nil)
	pipe := rdb.Pipeline()
	for lo := 0; lo < readsMembers; lo += 10000 {
		zs := make([]redis.Z, 0, 10000)
		for m := lo; m < lo+10000; m++ {
			zs = append(zs, redis.Z{Score: float64(m%50000 + 1), Member: "rb" + strconv.Itoa(m)})
		}
		pipe.ZAdd(ctx, bkey, zs...)
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
		CacheTTL: cfg.API.CacheTTL.String(), Refresh: cfg.API.CacheRefresh.String(), Budget: cfg.API.RedisBudget,
		Yield: cfg.API.YieldLatency.String()}
	top := []string{"/v1/boards/" + readsBoard + "/top?limit=20"}
	// the mix: 20 requests per client, members spread over the board
	var mix []string
	for i := range 20 * e.o.ReadClients {
		switch k := i % 10; {
		case k < 6:
			mix = append(mix, top[0])
		case k < 8:
			mix = append(mix, "/v1/boards/"+readsBoard+"/members/rb"+strconv.Itoa(i*7919%readsMembers))
		case k < 9:
			mix = append(mix, "/v1/boards/"+readsBoard+"/members/rb"+strconv.Itoa(i*104729%readsMembers)+"/around?n=5")
		default:
			mix = append(mix, "/v1/boards/"+readsDims+"/dims?limit=20")
		}
	}
	time.Sleep(2 * time.Second) // Redis settles after the 1M writes
	for _, run := range []struct {
		name    string
		clients int
		targets []string
		profile string
	}{
		{"ingestion alone", 0, nil, ""},
		{"top-20 readers", e.o.ReadClients, top, e.o.ReadsCPUProfile},
		{"mixed readers", e.o.ReadClients, mix, ""},
		{"alone again", 0, nil, ""},
	} {
		r, err := e.readsRun(ctx, rs, key, apiURL, readRedis, run.name, run.clients, run.targets, run.profile)
		if err != nil {
			return out, fmt.Errorf("%s: %w", run.name, err)
		}
		out.Runs = append(out.Runs, *r)
	}
	// each run's ingestion against the better of the runs without readers
	alone := max(out.Runs[0].Ingested, out.Runs[len(out.Runs)-1].Ingested)
	for i := range out.Runs {
		if alone > 0 {
			out.Runs[i].IngestShare = round(out.Runs[i].Ingested/alone, 3)
		}
	}
	return out, nil
}

// readsRun produces at the fixed rate for the run's duration, with
// clients readers asking targets (none: no load generator), and measures;
// with profile, it writes the CPU profile of this process over the run.
func (e *env) readsRun(ctx context.Context, rs *runningStack, key, apiURL string, readRedis func(context.Context) (int64, error),
	name string, clients int, targets []string, profile string) (*ReadsRun, error) {
	g := rs.Metrics()
	base, err := readRedis(ctx)
	if err != nil {
		return nil, err
	}
	var gen *loadgen.Gen
	if clients > 0 {
		e.prog.set(fmt.Sprintf("reads: %s, connecting %d clients", name, clients), nil)
		if gen, err = loadgen.Start(ctx, loadgen.Options{Addr: rs.HTTPAddr(), Clients: clients, Targets: targets}); err != nil {
			return nil, err
		}
		defer gen.Close()
	}
	tr, err := startTraffic(ctx, trafficSettings{Brokers: e.brokers, RedisAddr: e.redisAddr, RedisKey: key, APIURL: apiURL,
		Base: base, Rate: e.o.ReadRate, Duration: e.o.ReadDuration, WorkloadSeed: e.o.Seed + 7,
		MarkerSeed: e.o.Seed + int64(len(name)), MarkerFrom: int(base),
		PollRedis: e.o.PollInterval, PollAPI: 5 * time.Millisecond, Retry503: true})
	if err != nil {
		return nil, err
	}
	defer tr.close()
	r := &ReadsRun{Name: name, LoadAvg: loadAvg(), RedisUsPerRead: map[string]float64{}}
	msgs0, _ := counterSum(g, "rankd_consumer_messages_total")
	cache0, _ := counterByLabel(g, "rankd_http_cache_requests_total", "result")
	reqs0, _ := counterByLabel(g, "rankd_http_requests_total", "route")
	rtime0, _ := counterByLabel(g, "rankd_http_redis_seconds_total", "route")
	pauses0, _ := counterSum(g, "rankd_http_yield_pauses_total")
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	gen0 := time.Duration(0)
	if gen != nil {
		gen0, _ = pidCPU(gen.PID())
		if err := gen.Begin(); err != nil {
			return nil, err
		}
	}
	stopProfile, err := cpuProfile(profile)
	if err != nil {
		return nil, err
	}
	defer stopProfile() // when failing early
	lag := newLagWatch(e.brokers, readsGroup)
	defer lag.close()
	e.prog.set(fmt.Sprintf("reads: %s, %d clients, %.0f events/s", name, clients, e.o.ReadRate), nil)
	tr0, _ := pidCPU(tr.PID())
	if err := tr.start(); err != nil {
		return nil, err
	}
	pr, err := tr.produced(ctx, e.o.ReadDuration)
	if err != nil {
		return nil, err
	}
	msgs1, _ := counterSum(g, "rankd_consumer_messages_total")
	after, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	tr1, _ := pidCPU(tr.PID())
	if gen != nil {
		gen1, _ := pidCPU(gen.PID())
		res, err := gen.End(ctx)
		if err != nil {
			return nil, err
		}
		r.ReadsPerSec, r.P50Ms, r.P99Ms = round(res.PerSec(), 0), res.P50Ms, res.P99Ms
		r.OK, r.Refused = res.Status[http.StatusOK], res.Status[http.StatusServiceUnavailable]
		r.Errors = res.Errors + res.Requests - r.OK - r.Refused
		r.LoadgenCPU = round((gen1-gen0).Seconds()/after.at.Sub(before.at).Seconds(), 2)
	}
	stopProfile()
	if lags, err := consumer.GroupLag(ctx, lag.client, readsGroup, topics); err == nil {
		for _, l := range lags {
			r.LagAtEnd += l.Lag
		}
	}
	vis, err := tr.result(ctx)
	if err != nil {
		return nil, err
	}
	cache1, _ := counterByLabel(g, "rankd_http_cache_requests_total", "result")
	reqs1, _ := counterByLabel(g, "rankd_http_requests_total", "route")
	rtime1, _ := counterByLabel(g, "rankd_http_redis_seconds_total", "route")
	pauses1, _ := counterSum(g, "rankd_http_yield_pauses_total")
	r.YieldPauses = int(pauses1 - pauses0)
	r.Produced = round(float64(pr.Events)/pr.Seconds, 0)
	r.Ingested = round((msgs1-msgs0)/after.at.Sub(before.at).Seconds(), 0)
	hits, total := cache1["hit"]-cache0["hit"]+cache1["stale"]-cache0["stale"], 0.0
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
	wall := after.at.Sub(before.at).Seconds()
	c := cpu(before, after, max(pr.Events, 1), 1, after.at.Sub(before.at))
	r.RedisBusy = c.RedisBusy
	r.RankdCPU = round((after.self-before.self).Seconds()/wall, 2)
	r.BrokerCPU = round((after.broker-before.broker).Seconds()/wall, 2)
	r.TrafficCPU = round((tr1-tr0).Seconds()/wall, 2)
	r.RedisVisP99 = vis.Redis.P99Ms
	r.APIVisP99, r.APIPollP99Ms = vis.API.P99Ms, vis.API.ReadP99Ms
	r.APIPoll503 = vis.APIRefused
	return r, nil
}

// loadAvg returns the 1-, 5- and 15-minute load averages, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Write prints the reads phase's table.
func (r *Reads) Write(w io.Writer) {
	fmt.Fprintf(w, "\nreads: %d clients in a child process, a %d-member board, ingestion at %.0f events/s, %.0f s per run, cache TTL %s (refresh %s), budget %g, yield latency %s\n",
		r.Clients, r.Members, r.Rate, r.Seconds, r.CacheTTL, r.Refresh, r.Budget, r.Yield)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tload avg\treads/s\tp50 ms\tp99 ms\t503\terrors\thit\tproduced\tingested\tshare\tlag\tvis p99 redis\tvis p99 api\tpoll p99\tredis\trankd cpu\tloadgen cpu\ttraffic cpu\tbroker cpu\t")
	for _, x := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%d\t%d\t%.4f\t%.0f\t%.0f\t%.3f\t%d\t%.1f\t%.1f\t%.1f\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
			x.Name, x.LoadAvg, x.ReadsPerSec, x.P50Ms, x.P99Ms, x.Refused, x.Errors, x.HitRate, x.Produced, x.Ingested, x.IngestShare,
			x.LagAtEnd, x.RedisVisP99, x.APIVisP99, x.APIPollP99Ms, x.RedisBusy, x.RankdCPU, x.LoadgenCPU, x.TrafficCPU, x.BrokerCPU)
	}
	_ = tw.Flush()
	for _, x := range r.Runs {
		if len(x.RedisUsPerRead) > 0 {
			fmt.Fprintf(w, "  %s: Redis µs per read (cost model, hits included): %v; yield pauses: %d\n", x.Name, x.RedisUsPerRead, x.YieldPauses)
		}
	}
}
