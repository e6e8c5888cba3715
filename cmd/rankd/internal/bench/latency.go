package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking/store"
)

const (
	// The marker events: gifts of 1 coin to one anchor, read back from
	// the all-time board.
	markerBoard  = "anchor_total"
	markerAnchor = "abench-marker"
	// latencyTick is how often the producer looks whether events are due.
	latencyTick = 10 * time.Millisecond
	// latencyWait bounds the wait for the last markers to show.
	latencyWait = 30 * time.Second
)

// latency measures event-to-visible latency at a fixed produce rate. A
// rankd stack consumes the topics on the group of the rankd drain (from
// where it stopped); once it is ready and a first marker went through (so
// the group's join is not measured), a producer writes rate events/s of
// the standard workload with wall-clock event times, what is due every
// 10 ms in one synchronous Produce request for all its partitions
// (batchProducer), and the first event of every request is a marker: a gift of 1 coin
// to a dedicated anchor, so that marker k makes that anchor's value on the
// all-time board k. The markers of one anchor share a partition and are
// applied in order, so the value is monotonic.
//
// Two pollers read the value, each every PollInterval after its previous
// read returned: one with a single ZSCORE of the board's sorted set
// (visible in Redis), one through the HTTP API (GET
// /v1/boards/anchor_total/members/...: visible to a client). Marker k is
// visible at the end of the first read that returns k or more; its latency
// is that instant minus the instant its request was handed to the
// producer (acks=all): produce,
// fetch, batching (linger), decode, route, apply, and the read itself. A
// read returns at most a poll period plus one read's duration after the
// effect became visible (both reported).
func (e *env) latency(ctx context.Context, rate float64) (*Latency, error) {
	rs, err := e.caughtUp(ctx, "latency", rankdGroup, int64(e.o.Events), func(cfg *config.Config) {
		if t := e.o.LatencyCacheTTL; t != 0 {
			cfg.API.CacheTTL = max(t, 0)
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = rs.stop() }()
	lag := newLagWatch(e.brokers, rankdGroup) // what is left at the end
	defer lag.close()

	url := "http://" + rs.HTTPAddr() + "/v1/boards/" + markerBoard + "/members/" + markerAnchor
	hc := &http.Client{Timeout: 5 * time.Second}
	readAPI := func(ctx context.Context) (int64, error) { return pollMember(ctx, hc, url) }
	e.prog.set("latency: rankd joining the group", nil)
	base, err := e.warmUp(ctx, rs, e.o.Seed, readAPI)
	if err != nil {
		return nil, err
	}
	key, _, err := e.markerReader(ctx, rs.cfg, base)
	if err != nil {
		return nil, err
	}
	if err := e.resetStats(ctx); err != nil {
		return nil, err
	}
	c0, err := consumerTotalsOf(rs.Metrics())
	if err != nil {
		return nil, err
	}
	tr, err := startTraffic(ctx, trafficSettings{Brokers: e.brokers, RedisAddr: e.redisAddr, RedisKey: key, APIURL: url,
		Base: base, Rate: rate, Duration: e.o.LatencyDuration, WorkloadSeed: e.o.Seed + 1, MarkerSeed: e.o.Seed,
		PollRedis: e.o.PollInterval, PollAPI: e.o.PollInterval})
	if err != nil {
		return nil, err
	}
	defer tr.close()
	e.prog.set(fmt.Sprintf("latency at %.0f events/s", rate), nil)
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	cpu0, _ := pidCPU(tr.PID())
	stopProfile, err := cpuProfile(e.o.LatencyCPUProfile)
	if err != nil {
		return nil, err
	}
	defer stopProfile() // when failing early
	if err := tr.start(); err != nil {
		return nil, err
	}
	pr, err := tr.produced(ctx, e.o.LatencyDuration)
	stopProfile()
	if err != nil {
		return nil, err
	}
	behind := int64(-1)
	if lags, err := consumer.GroupLag(ctx, lag.client, rankdGroup, topics); err == nil {
		behind = 0
		for _, l := range lags {
			behind += l.Lag
		}
	}
	res, err := tr.result(ctx)
	if err != nil {
		return nil, err
	}
	cpu1, _ := pidCPU(tr.PID())
	after, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	c1, err := consumerTotalsOf(rs.Metrics())
	if err != nil {
		return nil, err
	}
	if err := rs.stop(); err != nil {
		return nil, err
	}

	n := pr.Events
	l := &Latency{Rate: round(rate, 0), ProducedRate: round(float64(n)/pr.Seconds, 0),
		Seconds: round(pr.Seconds, 2), Events: n, Markers: pr.Markers, LagAtEnd: behind,
		ProduceP50Ms: pr.ProduceP50Ms, Redis: res.Redis, API: res.API, CacheTTL: rs.cfg.API.CacheTTL.String(),
		CacheRefresh: rs.cfg.API.CacheRefresh.String(),
		TrafficCPU:   round((cpu1-cpu0).Seconds()/after.at.Sub(before.at).Seconds(), 2)}
	l.CPU = cpu(before, after, n, int64(c1.updates-c0.updates), after.at.Sub(before.at))
	if b := c1.batches - c0.batches; b > 0 {
		l.Batches, l.BatchMessages, l.BatchApplyMs = int64(b), round((c1.messages-c0.messages)/b, 0), round(1000*(c1.applySecs-c0.applySecs)/b, 1)
	}
	if l.Commands, err = e.commandStats(ctx, n, after.redis-before.redis); err != nil {
		return nil, err
	}
	return l, nil
}

// consumerTotals are a rankd stack's consumer counters at one moment.
type consumerTotals struct {
	updates           float64 // board updates applied
	batches, messages float64 // batches, and their messages
	applySecs         float64 // time spent applying them (Sink.Apply)
}

func consumerTotalsOf(g prometheus.Gatherer) (consumerTotals, error) {
	var c consumerTotals
	var err [3]error
	c.updates, err[0] = counterSum(g, "rankd_sink_updates_applied_total")
	c.batches, c.messages, err[1] = histogram(g, "rankd_consumer_batch_messages")
	_, c.applySecs, err[2] = histogram(g, "rankd_consumer_apply_duration_seconds")
	return c, errors.Join(err[:]...)
}

// markers are the send times of the markers.
type markers struct {
	mu      sync.Mutex
	sent    []time.Time // of marker k at k-1
	stopped bool        // the producer stopped
}

// send records the next marker's send time, now.
func (m *markers) send() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := time.Now()
	m.sent = append(m.sent, t)
	return t
}

func (m *markers) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

func (m *markers) done() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
}

// state returns the markers sent so far and whether the producer stopped.
func (m *markers) state() (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent), m.stopped
}

// poller reads the marker's value in a loop and records when each marker
// became visible.
type poller struct {
	read  func(context.Context) (int64, error)
	base  int64 // the value before the first marker
	every time.Duration
	// retry503: a 503 answer (errUnavailable) is counted in refused and
	// read again after every, instead of failing the run.
	retry503 bool
	refused  int
	visible  []time.Time // of marker k at k-1
	reads    []time.Duration
	elapsed  time.Duration
}

// run polls until every marker is visible after the producer stopped
// (failing after latencyWait), or ctx ends.
func (p *poller) run(ctx context.Context, m *markers) error {
	start := time.Now()
	defer func() { p.elapsed = time.Since(start) }()
	var deadline time.Time
	for {
		t0 := time.Now()
		v, err := p.read(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			return nil
		}
		if p.retry503 && errors.Is(err, errUnavailable) {
			p.refused++
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(p.every):
			}
			continue
		}
		if err != nil {
			return err
		}
		p.reads = append(p.reads, now.Sub(t0))
		sent, stopped := m.state()
		for int64(len(p.visible)) < v-p.base && len(p.visible) < sent {
			p.visible = append(p.visible, now)
		}
		if stopped {
			if len(p.visible) == sent {
				return nil
			}
			if deadline.IsZero() {
				deadline = now.Add(latencyWait)
			} else if now.After(deadline) {
				return fmt.Errorf("%d of %d markers visible %v after the producer stopped", len(p.visible), sent, latencyWait)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.every):
		}
	}
}

// stats returns the latencies of the markers sent at sent.
func (p *poller) stats(sent []time.Time) Visible {
	lat := make([]time.Duration, min(len(sent), len(p.visible)))
	for i := range lat {
		lat[i] = p.visible[i].Sub(sent[i])
	}
	slices.Sort(lat)
	reads := slices.Sorted(slices.Values(p.reads))
	return Visible{P50Ms: ms(quantile(lat, 0.5)), P99Ms: ms(quantile(lat, 0.99)), MaxMs: ms(quantile(lat, 1)),
		PollMs:    round(float64(p.elapsed.Microseconds())/1e3/float64(max(len(p.reads), 1)), 2),
		ReadP50Ms: ms(quantile(reads, 0.5)), ReadP99Ms: ms(quantile(reads, 0.99))}
}

// markerReader returns a reader of the marker's value with one ZSCORE of
// the all-time board's sorted set in its active generation. The key is
// built as the store builds it (store.Key, generation prefix
// "<prefix>:g<N>"); it is checked against the API's value.
func (e *env) markerReader(ctx context.Context, cfg *config.Config, want int64) (string, func(context.Context) (int64, error), error) {
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr, PoolSize: 1})
	e.closers = append(e.closers, func() { _ = rdb.Close() })
	st, err := store.New(rdb, cfg.Boards(), store.WithPrefix(cfg.Redis.Prefix))
	if err != nil {
		return "", nil, err
	}
	gens, err := st.Generations(ctx)
	if err != nil {
		return "", nil, err
	}
	prefix := cfg.Redis.Prefix
	if g := gens[markerBoard].Active; g > 0 {
		prefix += ":g" + strconv.Itoa(g)
	}
	key := store.Key(prefix, store.Tag(markerBoard, nil), store.KindTotal, store.PeriodAll)
	read := zscoreReader(rdb, key)
	if got, err := read(ctx); err != nil || got != want {
		return "", nil, fmt.Errorf("marker key %s holds %d (%v), the API says %d: update cmd/rankd/internal/bench to the store's key layout", key, got, err, want)
	}
	return key, read, nil
}

// zscoreReader returns a reader of the marker's value in key (0 when the
// member is not there).
func zscoreReader(rdb *redis.Client, key string) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		v, err := rdb.ZScore(ctx, key, markerAnchor).Result()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return int64(v), err
	}
}

// warmUp waits until the stack is ready (/readyz: group joined, Redis
// answering) and a first marker is visible, so that the group's join and
// the first fetches are not measured; it returns the marker's value then.
func (e *env) warmUp(ctx context.Context, rs *runningStack, seed int64, read func(context.Context) (int64, error)) (int64, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	ready := "http://" + rs.HTTPAddr() + "/readyz"
	last := ""
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		if err != nil {
			return 0, err
		}
		if resp, err := hc.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			last = strings.TrimSpace(string(body))
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("rankd not ready after a minute (%s: %s)", ready, last)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-rs.done:
			return 0, errors.New("rankd stopped before it was ready")
		case <-time.After(50 * time.Millisecond):
		}
	}
	base, err := read(ctx)
	if err != nil {
		return 0, err
	}
	w := newWriter(e.brokers, time.Millisecond)
	defer w.Close()
	if err := w.WriteMessages(ctx, markerMessage(seed, 0)); err != nil {
		return 0, fmt.Errorf("producing: %w", writeErr(err))
	}
	for {
		v, err := read(ctx)
		if err != nil {
			return 0, err
		}
		if v > base {
			return v, nil
		}
		if time.Now().After(deadline) {
			return 0, errors.New("the warm-up marker is not visible after a minute")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(e.o.PollInterval):
		}
	}
}

// markerMessage is marker k: a gift of 1 coin to markerAnchor, now.
func markerMessage(seed int64, k int) kafka.Message {
	v := `{"id":"marker-` + strconv.FormatInt(seed, 10) + "-" + strconv.Itoa(k) + `","ts":` + strconv.FormatInt(time.Now().UnixMilli(), 10) +
		`,"user_id":"ubench-marker","anchor_id":"` + markerAnchor + `","room_id":"rbench-marker","zone":"north","gift_id":"rose","count":1,"coins":1}`
	return kafka.Message{Topic: "gift", Key: []byte(markerAnchor), Value: []byte(v)}
}

// errUnavailable is a 503 answer of the API.
var errUnavailable = errors.New("503 Service Unavailable")

// pollMember returns the member's raw value on the board, 0 when it is not
// there (404).
func pollMember(ctx context.Context, hc *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return 0, nil
	case http.StatusServiceUnavailable:
		return 0, fmt.Errorf("GET %s: %w: %s", url, errUnavailable, body)
	default:
		return 0, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	var m struct {
		Raw int64 `json:"raw"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return m.Raw, nil
}

// quantile returns the q quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds())/1e3, 2) }
