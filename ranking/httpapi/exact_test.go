package httpapi_test

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// gatedStore is a store whose Top, once armed, waits for release.
type gatedStore struct {
	*store.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedStore) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
}

func (g *gatedStore) Top(ctx context.Context, board string, dims []string, period string, limit int, mode store.RankMode) (store.Page, error) {
	g.mu.Lock()
	armed, entered, release := g.armed, g.entered, g.release
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(entered)
		<-release
	}
	return g.Store.Top(ctx, board, dims, period, limit, mode)
}

// TestCacheFreshnessExact: with the cache's clock in the test's hands, a
// top page is the same bytes (and ETag) until exactly its TTL, then the
// board as Redis holds it; while one request reads an expired page again,
// another is served the expired one at once (stale); at the end of the
// board's period (by the store's clock) a cached page of "current" is
// never served, however fresh. Every body is compared whole.
func TestCacheFreshnessExact(t *testing.T) {
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	_, st := fixtureAt(t, rdb, prefix) // the data
	clk := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	gated := &gatedStore{Store: st}
	reg := prometheus.NewRegistry()
	h := httpapi.New(gated, httpapi.WithCache(time.Second, 1<<20), httpapi.WithClock(clk.Now), httpapi.WithRegisterer(reg))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u := srv.URL + "/v1/boards/tot/top?limit=2"
	page := func(entries string) string {
		return `{"board":"tot","dims":{},"period":{"id":"all"},"rank_mode":"row","count":2,"complete":true,"rank_approx":false,"entries":[` + entries + "]}\n"
	}
	b1 := page(`{"rank":1,"member":"m1","value":7,"raw":7},{"rank":2,"member":"m2","value":3,"raw":3}`)
	b2 := page(`{"rank":1,"member":"m2","value":13,"raw":13},{"rank":2,"member":"m1","value":7,"raw":7}`)
	b3 := page(`{"rank":1,"member":"m2","value":14,"raw":14},{"rank":2,"member":"m1","value":7,"raw":7}`)
	apply := func(v int64, id string) {
		t.Helper()
		if _, err := st.Apply(t.Context(), store.Group([]ranking.Update{{Board: "tot", Member: "m2", Value: v, Time: now, MsgID: id}})); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what, want string) string {
		t.Helper()
		code, hdr, body := rawGet(t, u)
		if code != 200 || body != want || hdr.Get("Cache-Control") != "max-age=1" || hdr.Get("X-Content-Type-Options") != "nosniff" ||
			hdr.Get("Content-Type") != "application/json; charset=utf-8" || hdr.Get("Content-Length") != fmt.Sprint(len(want)) {
			t.Fatalf("%s: %d %v\n%s\nwant\n%s", what, code, hdr, body, want)
		}
		return hdr.Get("ETag")
	}
	etag := expect("first read", b1)
	apply(10, "exact-1")
	clk.Add(time.Second - time.Nanosecond)
	if got := expect("1 ns before the TTL", b1); got != etag {
		t.Errorf("ETag %s, want %s", got, etag)
	}
	code, hdr, body := rawGet(t, u, "If-None-Match", etag)
	if code != 304 || body != "" || hdr.Get("ETag") != etag || hdr.Get("Cache-Control") != "max-age=1" || hdr.Get("Content-Type") != "" {
		t.Errorf("If-None-Match: %d %v %q", code, hdr, body)
	}
	clk.Add(time.Nanosecond)
	etag2 := expect("at the TTL", b2)
	if etag2 == etag {
		t.Errorf("the new page has the old ETag %s", etag)
	}

	// expired: one request reads again (held in Top), another is served
	// the expired page meanwhile
	apply(1, "exact-2")
	clk.Add(time.Second)
	gated.arm()
	leader := make(chan string)
	go func() {
		_, _, body := rawGet(t, u)
		leader <- body
	}()
	<-gated.entered
	if got := expect("while another request reads it again", b2); got != etag2 {
		t.Errorf("stale ETag %s, want %s", got, etag2)
	}
	close(gated.release)
	if got := <-leader; got != b3 {
		t.Errorf("the request that read again: %s, want %s", got, b3)
	}
	expect("after the read", b3)
	want := `
# HELP rankd_http_cache_requests_total Board reads per cache result: hit (served from memory), stale (served from memory, expired, while another request reads it again), miss (read Redis), coalesced (waited for another request's read).
# TYPE rankd_http_cache_requests_total counter
rankd_http_cache_requests_total{result="coalesced"} 0
rankd_http_cache_requests_total{result="hit"} 3
rankd_http_cache_requests_total{result="miss"} 3
rankd_http_cache_requests_total{result="stale"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rankd_http_cache_requests_total"); err != nil {
		t.Error(err)
	}

	t.Run("period end", func(t *testing.T) {
		// the store's clock 1 ns before the day's end, then at it; the
		// cache's clock does not move
		sclk := &manualClock{t: at(22, 0, 0, 0).Add(-time.Nanosecond)}
		st2, err := store.New(rdb, fixtureBoards(t), store.WithPrefix(prefix), store.WithClock(sclk.Now))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.New(st2, httpapi.WithCache(time.Hour, 1<<20), httpapi.WithClock(clk.Now)))
		t.Cleanup(srv.Close)
		u := srv.URL + "/v1/boards/day/top?limit=1"
		const day21 = `{"board":"day","dims":{},"period":{"id":"20261121","start":"2026-11-21T00:00:00Z","end":"2026-11-22T00:00:00Z","final":false},"rank_mode":"row","count":5,"complete":true,"rank_approx":false,"entries":[{"rank":1,"member":"a","value":12.5,"raw":1250,"tie_time":"2026-11-21T10:00:00Z"}]}` + "\n"
		const day22 = `{"board":"day","dims":{},"period":{"id":"20261122","start":"2026-11-22T00:00:00Z","end":"2026-11-23T00:00:00Z","final":false},"rank_mode":"row","count":0,"complete":true,"rank_approx":false,"entries":[]}` + "\n"
		for i, want := range []string{day21, day21, day22} {
			if i == 2 {
				sclk.Add(time.Nanosecond)
			}
			if _, _, body := rawGet(t, u); body != want {
				t.Errorf("read %d: %s\nwant\n%s", i+1, body, want)
			}
		}
	})
}

// TestBudgetExact: with the budget's clock frozen, a bucket of 1 ms of
// Redis time (share 0.002: 2 ms per second) pays each top-20 read's
// estimate up front and is corrected by the read's real cost after, so it
// serves exactly as many reads as its tokens allow, then refuses with 503
// overloaded and the Retry-After that refills it; one second later it has
// refilled to its size. A read whose estimate exceeds the bucket is 400
// too_expensive. Refusals run no Redis command. The estimates and costs are
// the cost model's (store.DefaultCostModel) of the work the test sees each
// read count (SetCostObserver), and the metrics say the same. (With the
// model as fitted, the full bucket pays for 34 reads.)
func TestBudgetExact(t *testing.T) {
	rdb := testenv.NewRedis(t, testenv.RedisOptions{}).Client(t)
	_, st := fixtureOn(t, rdb)
	clk := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	h := httpapi.New(st, httpapi.WithRedisBudget(0.002), httpapi.WithExpensiveRate(0), httpapi.WithClock(clk.Now), httpapi.WithRegisterer(reg))
	var counted []store.Counts
	var estimated []store.Counts
	httpapi.SetCostObserver(h, func(_ string, e, c store.Counts) {
		estimated, counted = append(estimated, e), append(counted, c)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	m := store.DefaultCostModel
	const rate, burst = 2000.0, 1000.0 // µs per second, µs

	// refused before any work: the dense page of 1000 with trend, on a
	// board of the assumed 1M members
	before, _ := commandStats(t, rdb)
	code, _, body := rawGet(t, srv.URL+"/v1/boards/day/top?limit=1000&trend=1&rank=dense")
	after, _ := commandStats(t, rdb)
	// the page, the marks of a board with periods, the dense previous ranks
	est := m.Micros(store.Counts{RoundTrips: 5, Commands: 11, Elements: 4040, DenseSteps: 1000}, 1_000_000)
	wantBody := fmt.Sprintf(`{"error":"this read would cost about %.0f ms of Redis time, more than this instance may spend at once (1 ms); `+
		`ask for less (a smaller limit or n, rank=row or competition, trend=0)","code":"too_expensive"}`+"\n", est/1e3)
	if code != 400 || body != wantBody || after != before {
		t.Fatalf("too expensive: %d %s (%d Redis commands), want 400 %s and none", code, body, after-before, wantBody)
	}

	u := srv.URL + "/v1/boards/tot/top?limit=20"
	tokens := burst
	served := 0
	var charged, real float64
	var perRead store.Counts // the work of a top-20 read of tot
	for {
		estimated, counted = nil, nil
		before, _ := commandStats(t, rdb)
		code, hdr, body := rawGet(t, u)
		after, _ := commandStats(t, rdb)
		if code == 503 {
			// the estimate of the next read, on the board's size now known
			next := m.Micros(store.Counts{RoundTrips: 1, Commands: 5, Elements: 40}, 2)
			if tokens >= next {
				t.Fatalf("refused with %.3f µs in the bucket, the read estimated at %.3f", tokens, next)
			}
			wantRA := fmt.Sprint(max(int(math.Ceil((next-tokens)/rate)), 1))
			if !strings.Contains(body, `"code":"overloaded"`) || hdr.Get("Retry-After") != wantRA || after != before {
				t.Fatalf("503 %s Retry-After %q (%d Redis commands), want overloaded, %s, none", body, hdr.Get("Retry-After"), after-before, wantRA)
			}
			break
		}
		if code != 200 || len(counted) != 1 {
			t.Fatalf("read %d: %d %s (%d observed)", served+1, code, body, len(counted))
		}
		n := int64(2)
		if served == 0 {
			n = 1_000_000 // the size assumed before a read told it
		}
		e := m.Micros(estimated[0], n)
		if tokens < e {
			t.Fatalf("read %d served with %.3f µs in the bucket, estimated at %.3f", served+1, tokens, e)
		}
		perRead = counted[0]
		c := m.Micros(perRead, 2)
		tokens -= c
		charged, real = charged+e, real+c
		served++
	}
	if served < 10 {
		t.Fatalf("%d reads served, want the bucket to pay for more", served)
	}
	t.Logf("%d top-20 reads served by the full bucket, then one refused", served)
	// the metrics: estimates up front, real costs after, one refusal
	gathered := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			label := ""
			for _, l := range mt.GetLabel() {
				label += l.GetValue()
			}
			gathered[mf.GetName()+"/"+label] = mt.GetCounter().GetValue()
		}
	}
	for _, w := range []struct {
		name string
		want float64
	}{
		{"rankd_http_redis_estimated_seconds_total/top", charged / 1e6},
		{"rankd_http_redis_seconds_total/top", real / 1e6},
		{"rankd_http_budget_refusals_total/overloaded", 1},
		{"rankd_http_budget_refusals_total/too_expensive", 1},
	} {
		if got := gathered[w.name]; math.Abs(got-w.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", w.name, got, w.want)
		}
	}

	// a second later the bucket is full again: exactly as many reads as
	// it pays for, all on the known size
	clk.Add(time.Second)
	tokens = burst
	want := 0
	for next := m.Micros(store.Counts{RoundTrips: 1, Commands: 5, Elements: 40}, 2); tokens >= next; want++ {
		tokens -= m.Micros(perRead, 2)
	}
	got := 0
	for ; got <= want; got++ {
		if code, _, _ := rawGet(t, u); code != 200 {
			break
		}
	}
	if got != want {
		t.Errorf("after a second: %d reads served, want %d", got, want)
	}
}
