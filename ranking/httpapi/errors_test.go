package httpapi_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

func TestErrors(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	const zone = "dims=zone:3,room:7"
	tests := []struct {
		name, path string
		status     int
		code       string
	}{
		{"unknown board: top", "/v1/boards/nope/top", 404, "unknown_board"},
		{"unknown board: member", "/v1/boards/nope/members/a", 404, "unknown_board"},
		{"unknown board: around", "/v1/boards/nope/members/a/around", 404, "unknown_board"},
		{"unknown board wins over bad dims", "/v1/boards/nope/top?dims=garbage", 404, "unknown_board"},
		{"member absent", "/v1/boards/day/members/zz", 404, "not_found"},
		{"member absent from this period", "/v1/boards/day/members/b?period=previous", 404, "not_found"},
		{"member absent: around", "/v1/boards/day/members/zz/around", 404, "not_found"},
		{"member absent: around a single-member board", "/v1/boards/line/members/la/around?dims=g:one", 404, "not_found"},
		{"member absent: around a board of unknown dims", "/v1/boards/line/members/la/around?dims=g:none", 404, "unknown_dims"},
		{"member absent: around a known dims value's empty period", "/v1/boards/zone/members/x/around?dims=zone:3,room:a:b%2Cc+d%2F%C3%A9&period=previous", 404, "not_found"},
		{"member absent: a known dims value's empty period", "/v1/boards/zone/members/x?dims=zone:3,room:a:b%2Cc+d%2F%C3%A9&period=previous", 404, "not_found"},
		{"unknown dims: top", "/v1/boards/zone/top?dims=zone:3,room:8", 404, "unknown_dims"},
		{"unknown dims: top of a past period", "/v1/boards/zone/top?dims=zone:3,room:8&period=previous", 404, "unknown_dims"},
		{"unknown dims: member", "/v1/boards/zone/members/x?dims=zone:3,room:8", 404, "unknown_dims"},
		{"unknown dims: around", "/v1/boards/zone/members/x/around?dims=zone:3,room:8", 404, "unknown_dims"},
		{"unknown dims: value of another dim", "/v1/boards/zone/top?dims=zone:7,room:3", 404, "unknown_dims"},
		{"unknown dims after bad period", "/v1/boards/zone/top?dims=zone:3,room:8&period=x", 400, "bad_period"},
		{"dims listing: unknown board", "/v1/boards/nope/dims", 404, "unknown_board"},
		{"dims listing: bad period", "/v1/boards/zone/dims?period=x", 400, "bad_period"},
		{"dims listing: limit 0", "/v1/boards/zone/dims?limit=0", 400, "bad_request"},
		{"dims listing: limit 1001", "/v1/boards/zone/dims?limit=1001", 400, "bad_request"},
		{"dims listing: bad cursor", "/v1/boards/zone/dims?cursor=!!", 400, "bad_request"},
		{"dims listing: cursor not a position", "/v1/boards/zone/dims?cursor=eHl6", 400, "bad_request"},
		{"percent 0", "/v1/boards/day/top?percent=0", 400, "bad_request"},
		{"percent over 100", "/v1/boards/day/top?percent=100.01", 400, "bad_request"},
		{"percent 3 decimals", "/v1/boards/day/top?percent=1.125", 400, "bad_request"},
		{"percent not a number", "/v1/boards/day/top?percent=ten", 400, "bad_request"},
		{"percent negative", "/v1/boards/day/top?percent=-1", 400, "bad_request"},
		{"percent with limit", "/v1/boards/day/top?percent=10&limit=5", 400, "bad_request"},
		{"percent: unknown dims", "/v1/boards/zone/top?dims=zone:3,room:8&percent=10", 404, "unknown_dims"},
		{"unknown route", "/v1/nope", 404, "not_found"},
		{"unknown route under a board", "/v1/boards/day/bottom", 404, "not_found"},
		{"dims missing", "/v1/boards/zone/top", 400, "bad_dims"},
		{"dims partly missing", "/v1/boards/zone/top?dims=zone:3", 400, "bad_dims"},
		{"dims unknown name", "/v1/boards/zone/top?dims=zone:3,room:7,floor:1", 400, "bad_dims"},
		{"dims on a board without dims", "/v1/boards/day/top?dims=zone:3", 400, "bad_dims"},
		{"dims without ':'", "/v1/boards/zone/top?dims=zone3,room:7", 400, "bad_dims"},
		{"dims given twice", "/v1/boards/zone/top?dims=zone:3,room:7&dims=zone:4", 400, "bad_dims"},
		{"dims bad escape", "/v1/boards/zone/top?dims=zone:%zz,room:7", 400, "bad_dims"},
		{"dims missing: member", "/v1/boards/zone/members/x", 400, "bad_dims"},
		{"dims missing: around", "/v1/boards/zone/members/x/around?dims=room:7", 400, "bad_dims"},
		{"period unknown word", "/v1/boards/day/top?period=yesterday", 400, "bad_period"},
		{"period no such day", "/v1/boards/day/top?period=20261341", 400, "bad_period"},
		{"period of another unit", "/v1/boards/day/top?period=2026W47", 400, "bad_period"},
		{"period of a total board", "/v1/boards/tot/top?period=20261121", 400, "bad_period"},
		{"period: member", "/v1/boards/day/members/a?period=x", 400, "bad_period"},
		{"period: around", "/v1/boards/zone/members/x/around?" + zone + "&period=x", 400, "bad_period"},
		{"rolling period far in the future", "/v1/boards/r3/top?period=20301121", 400, "bad_period"},
		{"limit 0", "/v1/boards/day/top?limit=0", 400, "bad_request"},
		{"limit 1001", "/v1/boards/day/top?limit=1001", 400, "bad_request"},
		{"limit not a number", "/v1/boards/day/top?limit=ten", 400, "bad_request"},
		{"n negative", "/v1/boards/day/members/a/around?n=-1", 400, "bad_request"},
		{"n 501", "/v1/boards/day/members/a/around?n=501", 400, "bad_request"},
		{"rank mode", "/v1/boards/day/top?rank=olympic", 400, "bad_request"},
		{"rank mode: member", "/v1/boards/day/members/a?rank=olympic", 400, "bad_request"},
		{"rank mode: around", "/v1/boards/day/members/a/around?rank=olympic", 400, "bad_request"},
		{"trend", "/v1/boards/day/top?trend=maybe", 400, "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, resp := get(t, srv.URL+tt.path)
			m, _ := body.(map[string]any)
			if status != tt.status || m["code"] != tt.code {
				t.Fatalf("status %d %v, want %d code %q", status, body, tt.status, tt.code)
			}
			if msg, _ := m["error"].(string); msg == "" || len(m) != 2 {
				t.Errorf("error body %v: want exactly error and code", body)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q", cc)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}

	t.Run("messages name the problem", func(t *testing.T) {
		_, body, _ := get(t, srv.URL+"/v1/boards/zone/top?dims=zone:3")
		sameJSON(t, body, `{"error":"dims: board \"zone\" needs a value for \"room\" (dims=zone:...,room:...)","code":"bad_dims"}`)
		_, body, _ = get(t, srv.URL+"/v1/boards/zone/top?dims=zone:3,floor:1")
		sameJSON(t, body, `{"error":"dims: board \"zone\" has no dim \"floor\"; its dims are zone, room","code":"bad_dims"}`)
		_, body, _ = get(t, srv.URL+"/v1/boards/day/members/zz")
		sameJSON(t, body, `{"error":"member \"zz\" is not on board \"day\" (period 20261121)","code":"not_found"}`)
		_, body, _ = get(t, srv.URL+"/v1/boards/day/top?limit=0")
		sameJSON(t, body, `{"error":"limit \"0\": want an integer in 1..1000","code":"bad_request"}`)
	})

	t.Run("rolling: the next period is readable", func(t *testing.T) {
		status, body, _ := get(t, srv.URL+"/v1/boards/r3/top?period=20261122")
		if status != 200 {
			t.Fatalf("status %d: %v", status, body)
		}
	})

	t.Run("methods other than GET", func(t *testing.T) {
		for _, path := range []string{"/v1/boards", "/v1/boards/day/top", "/"} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 405 || !strings.Contains(string(b), `"code":"method_not_allowed"`) || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("POST %s: %d %s (Allow %q)", path, resp.StatusCode, b, resp.Header.Get("Allow"))
			}
		}
	})
}

// TestRedisFailures checks that store failures are 5xx: 503 while Redis
// cannot be reached, 500 for any other failure.
func TestRedisFailures(t *testing.T) {
	t.Parallel()
	quiet := httpapi.WithLogger(slog.New(slog.DiscardHandler))

	t.Run("unreachable: 503", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
		t.Cleanup(func() { _ = rdb.Close() })
		st, err := store.New(rdb, fixtureBoards(t), store.WithClock(func() time.Time { return now }))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.New(st, quiet, httpapi.WithExpensiveRate(0)))
		t.Cleanup(srv.Close)
		for _, path := range []string{"/v1/boards/day/top", "/v1/boards/day/members/a", "/v1/boards/day/members/a/around", "/v1/boards/r3/top"} {
			status, body, resp := get(t, srv.URL+path)
			sameJSON(t, body, `{"error":"redis is unavailable","code":"unavailable"}`)
			if status != 503 || resp.Header.Get("Retry-After") != "1" {
				t.Errorf("%s: status %d (Retry-After %q), want 503", path, status, resp.Header.Get("Retry-After"))
			}
		}
		// bad input is still 4xx: it is judged before Redis is asked
		if status, body, _ := get(t, srv.URL+"/v1/boards/day/top?period=x"); status != 400 {
			t.Errorf("bad period without Redis: %d %v", status, body)
		}
		// /v1/boards needs no Redis
		if status, body, _ := get(t, srv.URL+"/v1/boards"); status != 200 {
			t.Errorf("/v1/boards without Redis: %d %v", status, body)
		}
	})

	t.Run("other failure: 500", func(t *testing.T) {
		rdb := testenv.Redis(t).Client(t)
		prefix := testenv.Prefix(t)
		st, err := store.New(rdb, fixtureBoards(t), store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }))
		if err != nil {
			t.Fatal(err)
		}
		// a string where the board's sorted set should be: WRONGTYPE
		if err := rdb.Set(t.Context(), store.Key(prefix, store.Tag("tot", nil), "t", "all"), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.New(st, quiet, httpapi.WithExpensiveRate(0)))
		t.Cleanup(srv.Close)
		status, body, _ := get(t, srv.URL+"/v1/boards/tot/top")
		if status != 500 {
			t.Errorf("status %d, want 500", status)
		}
		sameJSON(t, body, `{"error":"internal error reading the board","code":"internal"}`)
	})
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	srv, st := fixture(t, httpapi.WithRegisterer(reg))
	// a second handler on the same registerer shares the series
	srv2 := httptest.NewServer(httpapi.New(st, httpapi.WithRegisterer(reg)))
	t.Cleanup(srv2.Close)
	for _, u := range []string{srv.URL + "/v1/boards/day/top", srv2.URL + "/v1/boards/day/top", srv.URL + "/v1/boards/nope/top", srv.URL + "/v1/boards"} {
		get(t, u)
	}
	// Every series, exactly: two handlers on one registerer share them.
	want := `# HELP rankd_http_requests_total HTTP requests served, per route and status code.
# TYPE rankd_http_requests_total counter
rankd_http_requests_total{code="200",route="boards"} 1
rankd_http_requests_total{code="200",route="top"} 2
rankd_http_requests_total{code="404",route="top"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rankd_http_requests_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "rankd_http_request_duration_seconds"); err != nil || n != 2 {
		t.Errorf("%d rankd_http_request_duration_seconds series (%v), want 2 (boards, top)", n, err)
	}
}
