package httpapi_test

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/rankd/rankd/ranking/httpapi"
)

// TestFastHit: behind a fasthttp server (rankd's), a cache hit is served
// by ServeCachedFast, before the handler: the same bytes and headers as
// the miss that stored it, 304 for its ETag, no body for HEAD, and counted
// as a hit; what is not a hit (a miss, another method) goes to the handler.
func TestFastHit(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, _ := fixture(t, httpapi.WithCache(time.Hour, 1<<20), httpapi.WithRegisterer(reg))
	h := srv.Config.Handler
	fc, ok := h.(httpapi.FastCachedServer)
	if !ok {
		t.Fatal("the handler of New is not a FastCachedServer")
	}
	var native atomic.Int64
	slow := fasthttpadaptor.NewFastHTTPHandler(h)
	s := &fasthttp.Server{NoDefaultServerHeader: true, NoDefaultContentType: true, Handler: func(ctx *fasthttp.RequestCtx) {
		if fc.ServeCachedFast(ctx) {
			native.Add(1)
			return
		}
		slow(ctx)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Shutdown() })
	u := "http://" + ln.Addr().String() + "/v1/boards/tot/top?limit=2"

	code, miss, body := rawGet(t, u)
	const want = `"entries":[{"rank":1,"member":"m1","value":7,"raw":7},{"rank":2,"member":"m2","value":3,"raw":3}]`
	if code != 200 || !strings.Contains(body, want) || native.Load() != 0 {
		t.Fatalf("miss: %d %s (served natively %d times), want 200 with %s from the handler", code, body, native.Load(), want)
	}
	code, hit, again := rawGet(t, u)
	if code != 200 || again != body || native.Load() != 1 {
		t.Fatalf("hit: %d %s (served natively %d times), want the miss's body, natively", code, again, native.Load())
	}
	for _, k := range []string{"Content-Type", "Content-Length", "Cache-Control", "Etag", "X-Content-Type-Options"} {
		if hit.Get(k) != miss.Get(k) || hit.Get(k) == "" {
			t.Errorf("hit's %s %q, miss's %q", k, hit.Get(k), miss.Get(k))
		}
	}
	if hit.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %s, body %d bytes", hit.Get("Content-Length"), len(body))
	}
	if code, hdr, b := rawGet(t, u, "If-None-Match", `W/`+miss.Get("Etag")); code != 304 || b != "" || hdr.Get("Etag") != miss.Get("Etag") || native.Load() != 2 {
		t.Errorf("If-None-Match: %d %q ETag %q (natively %d), want 304, no body, the ETag, natively", code, b, hdr.Get("Etag"), native.Load())
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(body)) || native.Load() != 3 {
		t.Errorf("HEAD: %d, Content-Length %d (natively %d), want 200, %d, natively", resp.StatusCode, resp.ContentLength, native.Load(), len(body))
	}
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, u, nil)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || native.Load() != 3 {
		t.Errorf("POST: %d (natively %d), want 405 from the handler", resp.StatusCode, native.Load())
	}
	if got := cacheResults(t, reg); got["hit"] != 3 || got["miss"] != 1 {
		t.Errorf("cache results %v, want 3 hits and 1 miss", got)
	}
}

// cacheResults returns rankd_http_cache_requests_total by result.
func cacheResults(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rankd_http_cache_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return got
}
