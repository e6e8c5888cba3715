package httpapi

import (
	"unsafe"

	"github.com/valyala/fasthttp"
)

// FastCachedServer is implemented by the handler New returns.
// ServeCachedFast serves a GET or HEAD request of a fasthttp server whose
// response the cache holds, fresh, as ServeHTTP would, and reports whether
// it did; otherwise it writes nothing, and the request goes to the handler
// (through fasthttpadaptor). A server that routes requests to the handler
// by path may call it before its own routing: a cached response's path is
// one that was routed to the handler. rankd's HTTP server is fasthttp: a
// hit costs it about half of what net/http costs (README, "Reads at
// audience scale").
type FastCachedServer interface {
	ServeCachedFast(ctx *fasthttp.RequestCtx) bool
}

func (a *api) ServeCachedFast(ctx *fasthttp.RequestCtx) bool {
	return a.s.cache != nil && a.s.serveHitFast(ctx)
}

// serveHitFast is serveHit for fasthttp. The key is the request's path
// and query as they came: a path that net/http would escape otherwise
// (EscapedPath) is keyed otherwise by the route that stores it, and just
// misses here.
func (s *server) serveHitFast(ctx *fasthttp.RequestCtx) bool {
	if !ctx.IsGet() && !ctx.IsHead() {
		return false
	}
	uri := ctx.URI()
	start := s.clock()
	e, fresh, ok := s.hitEntry(ctx, cacheKey{path: view(uri.PathOriginal()), query: view(uri.QueryString())}, start)
	if !ok {
		return false
	}
	s.countHit(e, fresh)
	s.served(e, s.cache.serveFast(ctx, e), start)
	return true
}

// serveFast is serve for fasthttp: the entry's headers and its body,
// which the response references without a copy (a cached body never
// changes).
func (c *respCache) serveFast(ctx *fasthttp.RequestCtx, e *cached) int {
	h := &ctx.Response.Header
	h.SetCanonical(hdrCacheControl, c.maxAgeBytes)
	h.SetCanonical(hdrNosniff, nosniffBytes)
	h.SetCanonical(hdrETag, e.etagBytes)
	if inm := ctx.Request.Header.PeekBytes(hdrIfNoneMatch); len(inm) > 0 && etagMatch(view(inm), e.etag[0]) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return fasthttp.StatusNotModified
	}
	h.SetContentTypeBytes(jsonTypeBytes)
	ctx.Response.SetBodyRaw(e.body)
	return fasthttp.StatusOK
}

// Header names in fasthttp's canonical form (SetCanonical skips the
// normalization), and values as bytes.
var (
	hdrCacheControl = []byte("Cache-Control")
	hdrNosniff      = []byte("X-Content-Type-Options")
	hdrETag         = []byte("Etag")
	hdrIfNoneMatch  = []byte("If-None-Match")
	nosniffBytes    = []byte(nosniff[0])
	jsonTypeBytes   = []byte(jsonType[0])
)

// view is b as a string without a copy, for a look-up only: b must not
// change while the string is in use, and the string must not be kept.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
