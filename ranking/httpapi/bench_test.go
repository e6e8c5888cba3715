package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/rankd/rankd/ranking/httpapi"
)

// headerWriter is a ResponseWriter that keeps nothing but its header map,
// cleared for every request, as net/http gives each request a new one.
type headerWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *headerWriter) Header() http.Header { return w.h }
func (w *headerWriter) WriteHeader(code int) {
	w.status = code
}

func (w *headerWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

// BenchmarkCachedRead is the handler's own cost of a cache hit (no
// network, no net/http): what a cached /top?limit=20 and a 304 cost rankd
// besides net/http and the system calls.
func BenchmarkCachedRead(b *testing.B) {
	srv, _ := fixture(b, httpapi.WithCache(time.Hour, 1<<20), httpapi.WithRegisterer(prometheus.NewRegistry()),
		httpapi.WithPriority(func() bool { return false }))
	h := srv.Config.Handler
	for _, tt := range []struct {
		name string
		inm  bool
	}{{"200", false}, {"304", true}} {
		b.Run(tt.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v1/boards/day/top?limit=20", nil)
			w := &headerWriter{h: http.Header{}}
			h.ServeHTTP(w, req) // the miss that fills the cache
			if w.status != 0 && w.status != 200 {
				b.Fatalf("status %d", w.status)
			}
			if tt.inm {
				req.Header.Set("If-None-Match", w.h.Get("ETag"))
			}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, req)
			}
			if want := map[bool]int{false: 0, true: 304}[tt.inm]; w.status != want {
				b.Fatalf("status %d, want %d", w.status, want)
			}
		})
	}
}

// BenchmarkCachedReadFast is BenchmarkCachedRead for fasthttp's hit path
// (ServeCachedFast): the request parsed, the response not written.
func BenchmarkCachedReadFast(b *testing.B) {
	srv, _ := fixture(b, httpapi.WithCache(time.Hour, 1<<20), httpapi.WithRegisterer(prometheus.NewRegistry()),
		httpapi.WithPriority(func() bool { return false }))
	h := srv.Config.Handler
	fc := h.(httpapi.FastCachedServer)
	const target = "/v1/boards/day/top?limit=20"
	w := &headerWriter{h: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil)) // the miss that fills the cache
	if w.status != 0 && w.status != 200 {
		b.Fatalf("status %d", w.status)
	}
	for _, tt := range []struct {
		name string
		inm  bool
	}{{"200", false}, {"304", true}} {
		b.Run(tt.name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			ctx.Request.SetRequestURI(target)
			if tt.inm {
				ctx.Request.Header.Set("If-None-Match", w.h.Get("ETag"))
			}
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				if !fc.ServeCachedFast(&ctx) {
					b.Fatal("not served from the cache")
				}
			}
			if want := map[bool]int{false: 200, true: 304}[tt.inm]; ctx.Response.StatusCode() != want {
				b.Fatalf("status %d, want %d", ctx.Response.StatusCode(), want)
			}
		})
	}
}
