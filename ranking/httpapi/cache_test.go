package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// rawGet returns the status, headers and body of a GET with extra headers.
func rawGet(t *testing.T, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// TestCacheFreshness: a cached read serves the same bytes until its TTL
// runs out, then the board as Redis holds it; ETag and If-None-Match give
// 304; max-age is the TTL.
func TestCacheFreshness(t *testing.T) {
	const ttl = 200 * time.Millisecond
	srv, st := fixture(t, httpapi.WithCache(ttl, 1<<20))
	u := srv.URL + "/v1/boards/tot/top?limit=2"
	code, hdr, first := rawGet(t, u)
	const before = `"entries":[{"rank":1,"member":"m1","value":7,"raw":7},{"rank":2,"member":"m2","value":3,"raw":3}]`
	if code != 200 || !strings.Contains(first, before) {
		t.Fatalf("first read: %d %s", code, first)
	}
	if hdr.Get("Cache-Control") != "max-age=0" || hdr.Get("ETag") == "" {
		t.Errorf("headers: Cache-Control %q ETag %q, want max-age=0 (a TTL under 1s) and an ETag", hdr.Get("Cache-Control"), hdr.Get("ETag"))
	}
	etag := hdr.Get("ETag")

	// m2 passes m1 in Redis; the cached page does not show it yet
	if _, err := st.Apply(t.Context(), store.Group([]ranking.Update{
		{Board: "tot", Member: "m2", Value: 10, Time: now, MsgID: "cache-1"}})); err != nil {
		t.Fatal(err)
	}
	code, hdr, cached := rawGet(t, u)
	if code != 200 || cached != first || hdr.Get("ETag") != etag {
		t.Errorf("within the TTL: %d %s (ETag %s), want the first body", code, cached, hdr.Get("ETag"))
	}
	if code, _, body := rawGet(t, u, "If-None-Match", etag); code != 304 || body != "" {
		t.Errorf("If-None-Match: %d %q, want 304 and no body", code, body)
	}

	time.Sleep(ttl + 50*time.Millisecond)
	code, hdr, fresh := rawGet(t, u)
	const after = `"entries":[{"rank":1,"member":"m2","value":13,"raw":13},{"rank":2,"member":"m1","value":7,"raw":7}]`
	if code != 200 || !strings.Contains(fresh, after) || hdr.Get("ETag") == etag {
		t.Errorf("after the TTL: %d %s ETag %s, want %s and a new ETag", code, fresh, hdr.Get("ETag"), after)
	}
	if code, _, _ := rawGet(t, u, "If-None-Match", etag); code != 200 {
		t.Errorf("If-None-Match with the old ETag: %d, want 200", code)
	}
	// a long TTL says so to browsers and CDNs
	long, _ := fixture(t, httpapi.WithCache(5*time.Second, 1<<20))
	if _, hdr, _ := rawGet(t, long.URL+"/v1/boards/tot/members/m1"); hdr.Get("Cache-Control") != "max-age=5" {
		t.Errorf("member read: Cache-Control %q, want max-age=5", hdr.Get("Cache-Control"))
	}
	// errors are not cached, and not cacheable
	if code, hdr, _ := rawGet(t, long.URL+"/v1/boards/tot/members/nobody"); code != 404 || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("absent member: %d Cache-Control %q, want 404 no-store", code, hdr.Get("Cache-Control"))
	}
}

// TestCacheMetrics: hits, misses, and the Redis time the budget charges.
func TestCacheMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, _ := fixture(t, httpapi.WithCache(time.Hour, 1<<20), httpapi.WithRegisterer(reg))
	for range 3 {
		if code, _, body := rawGet(t, srv.URL+"/v1/boards/day/top?limit=3&dims="); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	got := cacheResults(t, reg)
	if got["hit"] != 2 || got["miss"] != 1 || got["coalesced"] != 0 {
		t.Errorf("cache results %v, want 2 hits, 1 miss", got)
	}
}

// TestBudgetRefusesBeforeWork: a read whose estimate exceeds what the
// budget's bucket holds is refused 400 too_expensive, and once cheap reads
// have emptied the bucket they are refused 503 overloaded with
// Retry-After; Redis runs no command for a refused read.
func TestBudgetRefusesBeforeWork(t *testing.T) {
	// 1 µs of Redis time per second: a bucket of 1 ms, never refilled here
	rdb := testenv.NewRedis(t, testenv.RedisOptions{}).Client(t)
	srv, _ := fixtureOn(t, rdb, httpapi.WithRedisBudget(0.000001), httpapi.WithExpensiveRate(0))
	refusedFree := func(u, code string) http.Header {
		t.Helper()
		before, _ := commandStats(t, rdb)
		status, hdr, body := rawGet(t, u)
		after, _ := commandStats(t, rdb)
		if !strings.Contains(body, `"code":"`+code+`"`) {
			t.Fatalf("GET %s: %d %s, want %s", u, status, body, code)
		}
		if after != before {
			t.Errorf("GET %s: a refused read ran %d Redis commands, want 0", u, after-before)
		}
		return hdr
	}
	// a page of 1000 with dense previous ranks: about 13 ms estimated
	refusedFree(srv.URL+"/v1/boards/day/top?limit=1000&trend=1&rank=dense", "too_expensive")

	u := srv.URL + "/v1/boards/tot/top?limit=20"
	served := 0
	for ; served < 1000; served++ {
		code, _, body := rawGet(t, u)
		if code == 503 {
			if !strings.Contains(body, `"code":"overloaded"`) {
				t.Fatalf("503 %s, want overloaded", body)
			}
			break
		}
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	if served == 0 || served == 1000 {
		t.Fatalf("%d reads served before the first refusal, want some and not all", served)
	}
	hdr := refusedFree(u, "overloaded")
	if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want the whole seconds until the bucket pays", hdr.Get("Retry-After"))
	}
}

// TestConnLimit: over the cap, an idle keep-alive connection makes room;
// with none idle, the new connection is answered 503 and closed.
func TestConnLimit(t *testing.T) {
	srv, _ := fixture(t)
	h := srv.Config.Handler
	limit := httpapi.NewConnLimit(2)
	s := &fasthttp.Server{Handler: fasthttpadaptor.NewFastHTTPHandler(h)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(limit.Limit(s, ln)) }()
	t.Cleanup(func() { _ = s.Shutdown() })
	addr := ln.Addr().String()
	request := func(c net.Conn) (int, error) {
		if _, err := fmt.Fprintf(c, "GET /v1/boards/tot/top?limit=1 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// two keep-alive connections, idle after one request each
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if code, err := request(c); code != 200 || err != nil {
			t.Fatalf("request: %d %v", code, err)
		}
		idle = append(idle, c)
	}
	// fasthttp marks a connection idle after the client has its response:
	// wait for the server to see both idle
	for deadline := time.Now().Add(5 * time.Second); limit.Idle() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections after 5 s, want 2", limit.Idle())
		}
	}
	// a third takes the place of the first idle one
	c3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c3.Close() })
	if code, err := request(c3); code != 200 || err != nil {
		t.Fatalf("third connection: %d %v, want 200", code, err)
	}
	if limit.Evicted() != 1 || limit.Open() != 2 {
		t.Errorf("evicted %d open %d, want 1 and 2", limit.Evicted(), limit.Open())
	}
	// two connections that have not sent a request are not idle: a
	// fourth is refused
	for _, c := range idle {
		c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); limit.Open() > 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the server sees the closes
	}
	busy := make([]net.Conn, 0, 2)
	for len(busy) < 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		busy = append(busy, c)
	}
	// the first takes a free place (the closed ones were counted out), the
	// second c3's, which is idle (an eviction is counted before the evicted
	// connection is counted out and the new one in: wait for both)
	for deadline := time.Now().Add(5 * time.Second); (limit.Evicted() < 2 || limit.Open() != 2) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if limit.Evicted() != 2 || limit.Open() != 2 {
		t.Fatalf("evicted %d open %d, want 2 and 2", limit.Evicted(), limit.Open())
	}
	c4, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if code, err := request(c4); code != 503 || err != nil {
		t.Errorf("over the cap with none idle: %d %v, want 503", code, err)
	}
	if limit.Refused() != 1 {
		t.Errorf("refused %d, want 1", limit.Refused())
	}
}

// TestServingEdge: percent-encoded dims, clipped input in errors, no Redis
// key in a 404.
func TestServingEdge(t *testing.T) {
	srv, _ := fixture(t)
	code, _, body := rawGet(t, srv.URL+"/v1/boards/zone/top?dims=zone%3A3,room%3A7&limit=1")
	if code != 200 || !strings.Contains(body, `"dims":{"zone":"3","room":"7"}`) || !strings.Contains(body, `"member":"y"`) {
		t.Errorf("dims=zone%%3A3,room%%3A7: %d %s", code, body)
	}
	junk := strings.Repeat("x", 60000)
	for _, q := range []string{"period=" + junk, "limit=" + junk, "rank=" + junk, "trend=" + junk} {
		code, _, body := rawGet(t, srv.URL+"/v1/boards/tot/top?"+q)
		if code != 400 || len(body) > 400 || !strings.Contains(body, "(60000 bytes)") {
			t.Errorf("%.10s...: %d, %d bytes: %.300s", q, code, len(body), body)
		}
	}
	code, _, body = rawGet(t, srv.URL+"/v1/boards/day/members/nobody/around")
	if code != 404 || strings.Contains(body, testPrefixMarker) || strings.Contains(body, "{day}") {
		t.Errorf("around an absent member: %d %s", code, body)
	}
	if want := `{"error":"member \"nobody\" is not on board \"day\" (period \"current\")","code":"not_found"}` + "\n"; body != want {
		t.Errorf("around an absent member: %s, want %s", body, want)
	}
}

// testPrefixMarker is in every test's key prefix (testenv.Prefix).
const testPrefixMarker = ":p:"

// TestCacheChanges: with change notices (WithChanges, fed by
// store.WatchChanges over Redis pub/sub), a cached page whose board
// changed is read again once it is refresh old, and not before; a notice
// of another board leaves it cached (the TTL is an hour); a
// resubscription after the connection is killed counts as a change of
// every board. The server's clock is the test's.
func TestCacheChanges(t *testing.T) {
	const refresh = time.Second
	var clk atomic.Int64
	clk.Store(time.Now().UnixNano())
	advance := func(d time.Duration) { clk.Add(int64(d)) }
	ch := httpapi.NewChanges()
	srv, st := fixture(t, httpapi.WithCache(time.Hour, 1<<20), httpapi.WithChanges(ch, refresh),
		httpapi.WithClock(func() time.Time { return time.Unix(0, clk.Load()) }))

	got := make(chan []string, 16) // every notice, after ch has it
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- st.WatchChanges(ctx, func(boards []string) {
			ch.Changed(boards)
			got <- boards
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchChanges: %v", err)
		}
	})
	next := func(want []string) {
		t.Helper()
		select {
		case b := <-got:
			if !slices.Equal(b, want) {
				t.Fatalf("notice %q, want %q", b, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notice %q within 10s", want)
		}
	}
	next(nil) // subscribed: every board may have changed meanwhile

	u := srv.URL + "/v1/boards/tot/top?limit=2"
	read := func(want string) {
		t.Helper()
		if code, _, body := rawGet(t, u); code != 200 || !strings.Contains(body, want) {
			t.Fatalf("read: %d %s, want %s", code, body, want)
		}
	}
	apply := func(member string, v int64, id string) {
		t.Helper()
		if _, err := st.Apply(t.Context(), store.Group([]ranking.Update{
			{Board: "tot", Member: member, Value: v, Time: now, MsgID: id}})); err != nil {
			t.Fatal(err)
		}
	}
	const (
		v1 = `"entries":[{"rank":1,"member":"m1","value":7,"raw":7},{"rank":2,"member":"m2","value":3,"raw":3}]`
		v2 = `"entries":[{"rank":1,"member":"m2","value":13,"raw":13},{"rank":2,"member":"m1","value":7,"raw":7}]`
		v3 = `"entries":[{"rank":1,"member":"m1","value":107,"raw":107},{"rank":2,"member":"m2","value":13,"raw":13}]`
		v4 = `"entries":[{"rank":1,"member":"m2","value":1013,"raw":1013},{"rank":2,"member":"m1","value":107,"raw":107}]`
	)
	read(v1)
	apply("m2", 10, "chg-1")
	read(v1) // no notice: cached

	// another board's notice leaves the page cached, however old
	if err := st.PublishChanges(t.Context(), []string{"day"}); err != nil {
		t.Fatal(err)
	}
	next([]string{"day"})
	advance(2 * refresh)
	read(v1)

	// its own board's notice: read again, the page being over refresh old
	if err := st.PublishChanges(t.Context(), []string{"day", "tot"}); err != nil {
		t.Fatal(err)
	}
	next([]string{"day", "tot"})
	read(v2)

	// a notice within refresh of the read waits for refresh
	apply("m1", 100, "chg-2")
	if err := st.PublishChanges(t.Context(), []string{"tot"}); err != nil {
		t.Fatal(err)
	}
	next([]string{"tot"})
	advance(refresh / 2)
	read(v2)
	advance(refresh/2 + time.Millisecond)
	read(v3)

	// the subscription's connection killed: go-redis subscribes again,
	// and that counts as a notice of every board (those sent meanwhile
	// are lost)
	apply("m2", 1000, "chg-3")
	advance(2 * refresh)
	read(v3) // no notice: cached
	rdb := testenv.Redis(t).Client(t)
	if n, err := rdb.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Result(); err != nil || n < 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub: %d, %v", n, err)
	}
	next(nil)
	read(v4)
}
