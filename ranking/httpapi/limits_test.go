package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// maxCommands is the most Redis commands one request may run (counting
// those run inside scripts): a page of MaxLimit+1 look-ups or dense-walk
// steps, plus a few (see "Cost of a request" in the package documentation).
const maxCommands = store.MaxLimit + 30

// costBoards are the boards of the cost tests (clock: now, Nov 21 12:00):
//   - ties: daily sum, desc, no tiebreak, few distinct values (many ties)
//   - tasc: daily min, asc, no tiebreak, few distinct values
//   - rev: daily sum, desc, 3000 distinct values; yesterday in reverse order
//   - roll, roll2: rolling 3 days; data on Nov 20 only, so reading Nov 21
//     needs the rollover's prefill of 3000 members
func costBoards(t *testing.T) []*ranking.Board {
	d1 := unit(t, "1d")
	daily := func(name string) *ranking.Board {
		return &ranking.Board{Name: name, Window: ranking.WindowPeriodic, Every: d1, Grace: time.Hour}
	}
	tasc := daily("tasc")
	tasc.Order, tasc.Aggregate = ranking.Asc, ranking.AggMin
	roll := func(name string) *ranking.Board {
		return &ranking.Board{Name: name, Window: ranking.WindowRolling, Every: d1, Periods: 3, Grace: time.Hour}
	}
	return []*ranking.Board{daily("ties"), tasc, daily("rev"), roll("roll"), roll("roll2")}
}

// costData is the values each board holds per period, as applied.
type costData map[string]map[string]map[string]int64 // board -> period -> member -> value

// costFixture applies the cost boards' data through a store on rdb under
// prefix and returns it.
func costFixture(t *testing.T, rdb redis.UniversalClient, prefix string) costData {
	t.Helper()
	st, err := store.New(rdb, costBoards(t), store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(13, 1))
	data := costData{}
	var ups []ranking.Update
	add := func(board, period, member string, v int64, tm time.Time) {
		if data[board] == nil {
			data[board] = map[string]map[string]int64{}
		}
		if data[board][period] == nil {
			data[board][period] = map[string]int64{}
		}
		data[board][period][member] = v
		ups = append(ups, ranking.Update{Board: board, Member: member, Value: v, Time: tm, MsgID: fmt.Sprint("c", len(ups))})
	}
	for i := range 4000 {
		m := fmt.Sprintf("t%04d", i)
		add("ties", "20261121", m, 1+rng.Int64N(300), at(21, 10, 0, 0))
		if i%4 != 0 {
			add("ties", "20261120", m, 1+rng.Int64N(300), at(20, 10, 0, 0))
		}
	}
	for i := range 200 {
		add("ties", "20261120", fmt.Sprintf("p%03d", i), 1+rng.Int64N(300), at(20, 10, 0, 0))
	}
	for i := range 3000 {
		m := fmt.Sprintf("a%04d", i)
		add("tasc", "20261121", m, 1+rng.Int64N(200), at(21, 10, 0, 0))
		if i%5 != 0 {
			add("tasc", "20261120", m, 1+rng.Int64N(200), at(20, 10, 0, 0))
		}
		m = fmt.Sprintf("r%04d", i+1)
		add("rev", "20261121", m, int64(i+1), at(21, 10, 0, 0))
		add("rev", "20261120", m, int64(3000-i), at(20, 10, 0, 0))
		for _, b := range []string{"roll", "roll2"} {
			add(b, "20261120", fmt.Sprintf("w%04d", i), 1+rng.Int64N(1000), at(20, 10, 0, 0))
		}
	}
	res, err := st.Apply(t.Context(), store.Group(ups))
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Count(ranking.StatusApplied); n != len(ups) {
		t.Fatalf("applied %d of %d updates", n, len(ups))
	}
	return data
}

// naive ranks one board's period the plain way: every member sorted.
type naive struct {
	order []string // in Redis order: value, then member (reversed on desc boards)
	ranks map[string][3]int64
}

func newNaive(vals map[string]int64, desc bool) naive {
	n := naive{ranks: map[string][3]int64{}}
	for m := range vals {
		n.order = append(n.order, m)
	}
	slices.SortFunc(n.order, func(a, b string) int {
		va, vb := vals[a], vals[b]
		c := strings.Compare(a, b)
		if va != vb {
			c = int(min(max(va-vb, -1), 1))
		}
		if desc {
			return -c
		}
		return c
	})
	var comp, dense int64
	for i, m := range n.order {
		if i == 0 || vals[m] != vals[n.order[i-1]] {
			comp, dense = int64(i+1), dense+1
		}
		n.ranks[m] = [3]int64{int64(i + 1), comp, dense}
	}
	return n
}

// rank returns m's rank in mode ("row", "competition", "dense").
func (n naive) rank(m, mode string) (int64, bool) {
	r, ok := n.ranks[m]
	return r[slices.Index([]string{"row", "competition", "dense"}, mode)], ok
}

// pageBody is the part of a /top or /around response the cost tests read.
type pageBody struct {
	Count      int64 `json:"count"`
	Complete   bool  `json:"complete"`
	RankApprox bool  `json:"rank_approx"`
	Entries    []struct {
		Rank     int64  `json:"rank"`
		Member   string `json:"member"`
		Raw      int64  `json:"raw"`
		PrevRank *int64 `json:"prev_rank"`
		Trend    string `json:"trend"`
	} `json:"entries"`
	// /members
	Rank     int64  `json:"rank"`
	PrevRank *int64 `json:"prev_rank"`
	// errors
	Error string `json:"error"`
	Code  string `json:"code"`
}

func getBody(t *testing.T, ctx context.Context, u string) (int, pageBody, http.Header, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, pageBody{}, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, pageBody{}, nil, err
	}
	var body pageBody
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("GET %s: %d %q: %v", u, resp.StatusCode, b, err)
	}
	return resp.StatusCode, body, resp.Header, nil
}

// commandStats returns the commands the server ran since its stats were
// last reset (INFO commandstats, which counts commands run by scripts too)
// and their time in µs, leaving out the test's own INFO and CONFIG and the
// clients' connection handshakes.
func commandStats(t *testing.T, rdb *redis.Client) (calls, usec int64) {
	t.Helper()
	info, err := rdb.Info(context.WithoutCancel(t.Context()), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, stats, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "cmdstat_"), ":")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		switch {
		case name == "info", name == "config|resetstat", name == "hello", name == "ping", strings.HasPrefix(name, "client|"):
			continue
		}
		for kv := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls", "rejected_calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec
}

// costly fetches u and returns its status, body and the Redis commands and
// time it took; the server must serve nothing else meanwhile.
func costly(t *testing.T, rdb *redis.Client, u string) (int, pageBody, int64, int64) {
	t.Helper()
	if err := rdb.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	status, body, _, err := getBody(t, t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	calls, usec := commandStats(t, rdb)
	return status, body, calls, usec
}

// TestBoundedCostExact: ranks and previous ranks (trend) of pages in every
// rank mode equal a naive computation over the whole board, and every
// request runs at most maxCommands Redis commands, whatever the page's
// size and place.
func TestBoundedCostExact(t *testing.T) {
	rdb := testenv.NewRedis(t, testenv.RedisOptions{}).Client(t)
	prefix := testenv.Prefix(t)
	data := costFixture(t, rdb, prefix)
	st, err := store.New(rdb, costBoards(t), store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(st, httpapi.WithExpensiveRate(0)))
	t.Cleanup(srv.Close)

	var most, mostUsec int64
	var mostURL string
	check := func(u string, cur, prev naive, mode string, first int) {
		t.Helper()
		status, body, calls, usec := costly(t, rdb, srv.URL+u)
		if status != 200 {
			t.Fatalf("GET %s: %d %+v", u, status, body)
		}
		if calls > maxCommands {
			t.Errorf("GET %s ran %d Redis commands, want at most %d", u, calls, maxCommands)
		}
		if calls > most {
			most, mostUsec, mostURL = calls, usec, u
		}
		if body.RankApprox {
			t.Errorf("GET %s: rank_approx", u)
		}
		for i, e := range body.Entries {
			if want := cur.order[first+i]; e.Member != want {
				t.Fatalf("GET %s: entry %d is %q, want %q", u, i, e.Member, want)
			}
			if want, _ := cur.rank(e.Member, mode); e.Rank != want {
				t.Errorf("GET %s: %s rank %d, want %d", u, e.Member, e.Rank, want)
			}
			want, ok := prev.rank(e.Member, mode)
			if got := e.PrevRank; (got != nil) != ok || (ok && *got != want) {
				t.Errorf("GET %s: %s prev_rank %v, want %d (found %v)", u, e.Member, got, want, ok)
			}
		}
	}
	for _, b := range []struct {
		name string
		desc bool
	}{{"ties", true}, {"tasc", false}} {
		cur := newNaive(data[b.name]["20261121"], b.desc)
		prev := newNaive(data[b.name]["20261120"], b.desc)
		last := len(cur.order) - 1
		for _, mode := range []string{"row", "competition", "dense"} {
			t.Run(b.name+" "+mode, func(t *testing.T) {
				check("/v1/boards/"+b.name+"/top?limit=1000&trend=1&rank="+mode, cur, prev, mode, 0)
				check("/v1/boards/"+b.name+"/top?limit=7&trend=1&rank="+mode, cur, prev, mode, 0)
				for _, i := range []int{0, 1700, last} {
					lo := min(max(i-500, 0), last-1000)
					check("/v1/boards/"+b.name+"/members/"+cur.order[i]+"/around?n=500&trend=1&rank="+mode, cur, prev, mode, lo)
				}
				for _, i := range []int{0, 1700, last} {
					m := cur.order[i]
					u := "/v1/boards/" + b.name + "/members/" + m + "?rank=" + mode
					status, body, calls, _ := costly(t, rdb, srv.URL+u)
					want, _ := cur.rank(m, mode)
					wantPrev, ok := prev.rank(m, mode)
					if status != 200 || body.Rank != want || (body.PrevRank != nil) != ok || (ok && *body.PrevRank != wantPrev) {
						t.Errorf("GET %s: %d rank %d prev %v, want %d prev %d (found %v)", u, status, body.Rank, body.PrevRank, want, wantPrev, ok)
					}
					// row, competition: a few O(log n) look-ups; dense: walks
					if bound := int64(30); calls > bound && (mode != "dense" || calls > maxCommands) {
						t.Errorf("GET %s ran %d Redis commands", u, calls)
					}
				}
			})
		}
	}
	t.Logf("most Redis commands in one request: %d (%d µs of Redis time), %s", most, mostUsec, mostURL)
}

// TestTooExpensive: on a board whose previous period is in reverse order,
// dense previous ranks would need a walk over thousands of values: the
// request is refused with 400 too_expensive after a bounded amount of work;
// the other rank modes answer exactly within the bound, and a current dense
// rank beyond its share of the budget is a lower bound.
func TestTooExpensive(t *testing.T) {
	rdb := testenv.NewRedis(t, testenv.RedisOptions{}).Client(t)
	prefix := testenv.Prefix(t)
	data := costFixture(t, rdb, prefix)
	st, err := store.New(rdb, costBoards(t), store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(st, httpapi.WithExpensiveRate(0)))
	t.Cleanup(srv.Close)
	cur := newNaive(data["rev"]["20261121"], true)
	prev := newNaive(data["rev"]["20261120"], true)

	for _, u := range []string{
		"/v1/boards/rev/top?limit=1000&trend=1&rank=dense",
		"/v1/boards/rev/top?limit=10&trend=1&rank=dense",
		"/v1/boards/rev/members/r2000/around?n=500&trend=1&rank=dense",
		"/v1/boards/rev/members/r3000?rank=dense",
	} {
		status, body, calls, _ := costly(t, rdb, srv.URL+u)
		if status != 400 || body.Code != "too_expensive" || !strings.Contains(body.Error, "rank=competition") {
			t.Errorf("GET %s: %d %+v, want 400 too_expensive", u, status, body)
		}
		if calls > maxCommands {
			t.Errorf("GET %s ran %d Redis commands, want at most %d", u, calls, maxCommands)
		}
	}

	for _, mode := range []string{"row", "competition"} {
		u := "/v1/boards/rev/top?limit=1000&trend=1&rank=" + mode
		status, body, calls, usec := costly(t, rdb, srv.URL+u)
		if status != 200 || len(body.Entries) != 1000 {
			t.Fatalf("GET %s: %d %+v", u, status, body.Error)
		}
		for _, e := range body.Entries {
			want, _ := prev.rank(e.Member, mode)
			if e.PrevRank == nil || *e.PrevRank != want {
				t.Fatalf("GET %s: %s prev_rank %v, want %d", u, e.Member, e.PrevRank, want)
			}
		}
		if calls > maxCommands {
			t.Errorf("GET %s ran %d Redis commands, want at most %d", u, calls, maxCommands)
		}
		t.Logf("GET %s: %d Redis commands, %d µs", u, calls, usec)
	}

	// r0001 has 2999 better values: its dense rank is a lower bound from a
	// walk of half the budget
	u := "/v1/boards/rev/members/r0001/around?n=0&rank=dense"
	status, body, calls, _ := costly(t, rdb, srv.URL+u)
	exact, _ := cur.rank("r0001", "dense")
	if status != 200 || !body.RankApprox || len(body.Entries) != 1 || body.Entries[0].Rank != httpapi.DefaultDenseBudget/2+1 || body.Entries[0].Rank > exact {
		t.Errorf("GET %s: %d %+v; want a lower bound of %d (exact %d), rank_approx", u, status, body, httpapi.DefaultDenseBudget/2+1, exact)
	}
	if calls > maxCommands {
		t.Errorf("GET %s ran %d Redis commands, want at most %d", u, calls, maxCommands)
	}

	// a larger budget makes the same request exact
	big := httptest.NewServer(httpapi.New(st, httpapi.WithDenseBudget(10000), httpapi.WithExpensiveRate(0)))
	t.Cleanup(big.Close)
	_, body, _, err = getBody(t, t.Context(), big.URL+"/v1/boards/rev/top?limit=3&trend=1&rank=dense")
	if err != nil || len(body.Entries) != 3 || body.Entries[0].PrevRank == nil || *body.Entries[0].PrevRank != 3000 {
		t.Errorf("with a budget of 10000: %+v, %v", body, err)
	}
}

// slowHook delays every command and pipeline of a client, as a loaded
// Redis would.
type slowHook struct{ d time.Duration }

func (h slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(h.d)
		return next(ctx, cmd)
	}
}

func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(h.d)
		return next(ctx, cmds)
	}
}

// slowStore is a store of the cost boards on the server of addr through a
// client whose every call takes d more, with rollover chunks of 10 members.
func slowStore(t *testing.T, addr, prefix string, d time.Duration) *store.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(slowHook{d})
	st, err := store.New(rdb, costBoards(t), store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }),
		store.WithRolloverChunk(10))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// stopped fails t unless the server runs no more commands: the work of a
// request that timed out or was cancelled has stopped.
func stopped(t *testing.T, rdb *redis.Client, what string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // the command in flight, the lock's release
	before, _ := commandStats(t, rdb)
	time.Sleep(500 * time.Millisecond)
	if after, _ := commandStats(t, rdb); after != before {
		t.Errorf("%s: Redis ran %d more commands in the 500 ms after", what, after-before)
	}
}

// TestTimeoutStopsRedisWork: a request that runs out of time is answered
// 503 timeout at once and its Redis work stops (here the rollover a read of
// the current period completes when the timer is late); so does the work of
// a request whose client goes away. The rollover resumes at the next read.
func TestTimeoutStopsRedisWork(t *testing.T) {
	srv := testenv.NewRedis(t, testenv.RedisOptions{})
	rdb := srv.Client(t)
	prefix := testenv.Prefix(t)
	data := costFixture(t, rdb, prefix)
	quiet := httpapi.WithLogger(slog.New(slog.DiscardHandler))
	slow := slowStore(t, srv.Addr(), prefix, 3*time.Millisecond) // ~6 ms per chunk of 10: 3000 members take ~2 s
	partial := func(board string) int64 {
		t.Helper()
		return rdb.ZCard(t.Context(), store.Key(prefix, store.Tag(board, nil), "r", "20261121")).Val()
	}

	t.Run("timeout", func(t *testing.T) {
		api := httptest.NewServer(httpapi.New(slow, httpapi.WithTimeout(150*time.Millisecond), quiet))
		t.Cleanup(api.Close)
		start := time.Now()
		status, body, hdr, err := getBody(t, t.Context(), api.URL+"/v1/boards/roll/top")
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); status != 503 || body.Code != "timeout" || hdr.Get("Retry-After") != "1" || took > time.Second {
			t.Fatalf("status %d %+v Retry-After %q after %v; want 503 timeout at once", status, body, hdr.Get("Retry-After"), took)
		}
		stopped(t, rdb, "after the timeout")
		if n := partial("roll"); n >= 3000 {
			t.Errorf("the rollover was not cut: S(21) holds %d members", n)
		}
	})

	t.Run("client gone", func(t *testing.T) {
		api := httptest.NewServer(httpapi.New(slow, httpapi.WithTimeout(time.Minute), quiet))
		t.Cleanup(api.Close)
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		defer cancel()
		if _, _, _, err := getBody(t, ctx, api.URL+"/v1/boards/roll2/top"); err == nil {
			t.Fatal("the request finished before the client gave up")
		}
		stopped(t, rdb, "after the client went away")
		if n := partial("roll2"); n >= 3000 {
			t.Errorf("the rollover was not cut: S(21) holds %d members", n)
		}
	})

	// the next read resumes the rollover and answers exactly
	st, err := store.New(rdb, costBoards(t), store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(httpapi.New(st, httpapi.WithExpensiveRate(0)))
	t.Cleanup(api.Close)
	for _, b := range []string{"roll", "roll2"} {
		want := newNaive(data[b]["20261120"], true) // S(21) = P(19..21) = P(20)
		status, body, _, err := getBody(t, t.Context(), api.URL+"/v1/boards/"+b+"/top?limit=1000&rank=competition")
		if err != nil || status != 200 || body.Count != 3000 || !body.Complete || len(body.Entries) != 1000 {
			t.Fatalf("%s after the cut: %d count %d complete %v, %v", b, status, body.Count, body.Complete, err)
		}
		for i, e := range body.Entries {
			if r, _ := want.rank(e.Member, "competition"); e.Member != want.order[i] || e.Rank != r || e.Raw != data[b]["20261120"][e.Member] {
				t.Fatalf("%s entry %d: %+v, want %s rank %d", b, i, e, want.order[i], r)
			}
		}
	}
}

// TestExpensiveLimit: expensive reads beyond the limit wait briefly, then
// are answered 503 overloaded; cheap reads (no dense walk, previous ranks of
// at most 100 entries) are not held back.
func TestExpensiveLimit(t *testing.T) {
	srv := testenv.NewRedis(t, testenv.RedisOptions{})
	rdb := srv.Client(t)
	prefix := testenv.Prefix(t)
	costFixture(t, rdb, prefix)
	slow := slowStore(t, srv.Addr(), prefix, 100*time.Millisecond)
	api := httptest.NewServer(httpapi.New(slow, httpapi.WithExpensiveLimit(1, 20*time.Millisecond), httpapi.WithExpensiveRate(0),
		httpapi.WithLogger(slog.New(slog.DiscardHandler))))
	t.Cleanup(api.Close)

	var wg sync.WaitGroup
	var first int
	wg.Go(func() {
		first, _, _, _ = getBody(t, t.Context(), api.URL+"/v1/boards/ties/top?trend=1&limit=500")
	})
	time.Sleep(50 * time.Millisecond) // the first holds the only slot for several 100 ms calls
	status, body, hdr, err := getBody(t, t.Context(), api.URL+"/v1/boards/ties/top?trend=1&rank=dense")
	if err != nil || status != 503 || body.Code != "overloaded" || hdr.Get("Retry-After") != "1" {
		t.Errorf("second expensive read: %d %+v Retry-After %q, %v; want 503 overloaded", status, body, hdr.Get("Retry-After"), err)
	}
	for _, u := range []string{"/v1/boards/ties/top?limit=1000&rank=dense", "/v1/boards/ties/top?trend=1&limit=100",
		"/v1/boards/ties/members/t0001/around?rank=competition&trend=1", "/v1/boards/ties/members/t0001?rank=competition"} {
		if status, body, _, err := getBody(t, t.Context(), api.URL+u); err != nil || status != 200 {
			t.Errorf("cheap read %s: %d %+v, %v", u, status, body, err)
		}
	}
	wg.Wait()
	if first != 200 {
		t.Errorf("first expensive read: %d", first)
	}
	// the slot is free again
	if status, body, _, err := getBody(t, t.Context(), api.URL+"/v1/boards/ties/members/t0001?rank=dense"); err != nil || status != 200 {
		t.Errorf("expensive read after the first: %d %+v, %v", status, body, err)
	}
}

// TestFutureRollingReadWritesNothing: reading the next period of a rolling
// board, before the rollover timer has prefilled it, writes nothing to
// Redis and says the board is not complete; after the timer's prefill the
// same read is exact.
func TestFutureRollingReadWritesNothing(t *testing.T) {
	rdb := testenv.NewRedis(t, testenv.RedisOptions{}).Client(t)
	srv, st := fixtureOn(t, rdb)
	// the current and previous periods are read (and rolled over) first
	for _, p := range []string{"current", "previous"} {
		if status, body, _ := get(t, srv.URL+"/v1/boards/r3/top?trend=1&period="+p); status != 200 {
			t.Fatalf("%s: %d %v", p, status, body)
		}
	}
	before := changes(t, rdb)
	next := "20261122"
	status, body, _ := get(t, srv.URL+"/v1/boards/r3/top?trend=1&rank=dense&period="+next)
	if status != 200 {
		t.Fatalf("status %d: %v", status, body)
	}
	sameJSON(t, body, page(head("r3", "{}", `{"id":"20261122","start":"2026-11-22T00:00:00Z","end":"2026-11-23T00:00:00Z","final":false}`,
		"dense", 0, false, false, ""), `[]`))
	if status, body, _ := get(t, srv.URL+"/v1/boards/r3/members/u2?period="+next); status != 404 {
		t.Errorf("member: %d %v", status, body)
	}
	if status, body, _ := get(t, srv.URL+"/v1/boards/r3/members/u2/around?trend=1&period="+next); status != 404 {
		t.Errorf("around: %d %v", status, body)
	}
	if after := changes(t, rdb); after != before {
		t.Errorf("reading the next period made %d changes in Redis, want none", after-before)
	}
	var keys []string
	iter := rdb.Scan(t.Context(), 0, "*"+next+"*", 100).Iterator()
	for iter.Next(t.Context()) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		t.Errorf("keys of %s after reads: %v", next, keys)
	}

	// the timer prefills the next period ahead of its start: S(22) =
	// P(20..22): u2 5, u1 1; previous ranks from S(21): u1 6, u2 5
	if err := st.Rollover(t.Context(), "r3", at(22, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	_, body, _ = get(t, srv.URL+"/v1/boards/r3/top?trend=1&period="+next)
	sameJSON(t, body, page(head("r3", "{}", `{"id":"20261122","start":"2026-11-22T00:00:00Z","end":"2026-11-23T00:00:00Z","final":false}`,
		"row", 2, true, false, ""), `[
		{"rank":1,"member":"u2","value":5,"raw":5,"tie_time":"2026-11-21T07:30:15Z","prev_rank":2,"trend":"up"},
		{"rank":2,"member":"u1","value":1,"raw":1,"tie_time":"2026-11-20T01:00:00Z","prev_rank":1,"trend":"down"}]`))
}

// changes returns the server's count of writes (rdb_changes_since_last_save:
// the servers of NewRedis never save).
func changes(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(t.Context(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rdb_changes_since_last_save:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO persistence has no rdb_changes_since_last_save")
	return 0
}
