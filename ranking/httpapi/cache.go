package httpapi

import (
	"container/list"
	"context"
	"hash/fnv"
	"hash/maphash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// The response cache. Reads of boards (/top, /members/{m}, /around, /dims)
// are answered from pre-rendered bytes kept per request: the escaped path
// (board, route, member) and the raw query (dims, period, limit or
// percent, n, rank, trend, ...). An entry is read from Redis at most once
// per TTL: concurrent misses of one entry wait for a single read
// (singleflight). Once an entry has expired, the first request to find it
// reads it again and waits for the read; those that come while it reads
// are served the expired entry at once, as the pages their clients last
// saw ("stale"), instead of waiting all for the same read. The read of an
// expired entry that others hit since it was stored (hot) may also take
// one of hotReads slots beyond the concurrent reads, so that a page many
// readers poll is not read again behind the misses of pages one reader
// asked for. An entry
// is never served past the end of the board's period that was current when
// it was read, so that a new period never serves the last one's page
// ("current" and "previous" move on at once). So a reader sees the board
// as it was at most TTL plus one read's duration ago; through a browser or
// a CDN honouring Cache-Control, at most twice the TTL plus that.
//
// With change notices (WithChanges), an entry of a board that changed
// after its read began is fresh only until it is refresh old: a board the
// consumer writes to is read again at most once per refresh (per distinct
// request), one nobody writes to at most once per TTL. A reader then sees
// a change within refresh, plus the notice's and one read's time, of its
// being applied; a lost notice costs at most the TTL, as without them.
//
// A hit is served before any routing (api.ServeHTTP): one map look-up on
// the request's path and query as they came, and the entry's bytes and
// headers, prepared when it was stored, written as they are. The path is
// the escaped one: the routes are a function of it (ServeMux matches
// escaped segments), so equal keys are the same route with the same
// parameters.
//
// Memory is bounded: the bytes of the entries (body, key and a fixed
// overhead each) stay below the limit, split over cacheShards shards, each
// evicting its least recently used entries.

const (
	// DefaultCacheTTL is how long a rendered read is served before it is
	// read again (WithCache).
	DefaultCacheTTL = time.Second
	// DefaultCacheBytes bounds the memory of the cache (WithCache).
	DefaultCacheBytes = 64 << 20
	// cacheShards split the cache's lock.
	cacheShards = 32
	// entryOverhead is the bytes counted per entry besides its key and body:
	// the entry, its list element and map slot, the ETag.
	entryOverhead = 200
)

// WithCache serves board reads from an in-process cache of rendered
// responses, each read from Redis at most once per ttl, in at most
// maxBytes of memory (least recently used entries are evicted). ttl <= 0
// turns the cache off (the default of New: every read goes to Redis).
func WithCache(ttl time.Duration, maxBytes int) Option {
	return func(c *config) { c.cacheTTL, c.cacheBytes = ttl, maxBytes }
}

// cacheKey is what a cached response is kept under: the request's
// escaped path and raw query.
type cacheKey struct {
	path, query string
}

// cached is one rendered response, with the values of its headers.
type cached struct {
	key  cacheKey
	body []byte
	etag []string // ETag
	// etagBytes is etag[0] for fasthttp (fast.go)
	etagBytes []byte
	length    []string // Content-Length
	expires   int64    // unix ns
	// periodEnd is the end of the board's period that was current when
	// the entry was read, in unix ns of the store's clock (0: none)
	periodEnd int64
	route     *routeMetrics
	elem      *list.Element
	// refreshing is set while a request reads the entry again, once it
	// expired: meanwhile the others are served this one (stale)
	refreshing atomic.Bool
	// hits counts the fresh hits, up to hotHits: an entry with hotHits is
	// hot, read by others than the request that stored it, and its
	// refresh takes the hot slots (hotReads) if the others are all taken
	hits atomic.Int32
	// the board's change counts when its read began (WithChanges): it
	// is fresh only until refresh after readAt (unix ns) once they moved
	ver    version
	readAt int64
}

// Changes takes the change notices of boards (store.Store.WatchChanges)
// to the caches of the servers given it (WithChanges).
type Changes struct {
	all    atomic.Uint64 // notices of every board
	mu     sync.RWMutex
	boards map[string]*atomic.Uint64
}

// NewChanges returns a Changes that has had no notice.
func NewChanges() *Changes { return &Changes{boards: map[string]*atomic.Uint64{}} }

// Changed records a notice that boards changed; nil: every board. It
// never blocks on a read.
func (c *Changes) Changed(boards []string) {
	if boards == nil {
		c.all.Add(1)
		return
	}
	for _, b := range boards {
		c.board(b).Add(1)
	}
}

// board returns the change count of board b.
func (c *Changes) board(b string) *atomic.Uint64 {
	c.mu.RLock()
	n := c.boards[b]
	c.mu.RUnlock()
	if n != nil {
		return n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n = c.boards[b]; n == nil {
		n = new(atomic.Uint64)
		c.boards[b] = n
	}
	return n
}

// version is a board's change counts at one moment.
type version struct {
	board         *atomic.Uint64 // nil: no change notices
	seen, seenAll uint64
}

// version returns board b's change counts now (zero without notices).
func (c *Changes) version(b string) version {
	if c == nil {
		return version{}
	}
	n := c.board(b)
	// the board's count first: a notice of every board between the two
	// loads makes the entry older than it is, never newer
	return version{board: n, seen: n.Load(), seenAll: c.all.Load()}
}

// WithChanges makes the cache read again the pages of a board that
// changed once they are refresh old, from the notices c is given (see
// the cache's doc). Without it, a page is read again once per TTL.
func WithChanges(c *Changes, refresh time.Duration) Option {
	return func(cf *config) { cf.changes, cf.refresh = c, refresh }
}

// hotHits is the fresh hits that make an entry hot.
const hotHits = 2

// hit counts a fresh hit of e; past hotHits it only reads the counter, so
// that the hottest entry's cache line is not written by every hit.
func (e *cached) hit() {
	if e.hits.Load() < hotHits {
		e.hits.Add(1)
	}
}

// hotKey marks the context of a hot entry's refresh.
type hotKey struct{}

func withHot(ctx context.Context) context.Context { return context.WithValue(ctx, hotKey{}, true) }

func isHot(ctx context.Context) bool { return ctx.Value(hotKey{}) != nil }

func (e *cached) size() int { return len(e.key.path) + len(e.key.query) + len(e.body) + entryOverhead }

type cacheShard struct {
	mu    sync.Mutex
	m     map[cacheKey]*cached
	lru   list.List // front: most recently used
	bytes int
	_     [40]byte // keep shards on separate cache lines
}

// respCache is the response cache.
type respCache struct {
	ttl    time.Duration
	maxAge []string // Cache-Control
	// maxAgeBytes is maxAge[0] for fasthttp (fast.go)
	maxAgeBytes []byte
	// change notices (WithChanges; nil: none) and how old the entry of a
	// changed board may get (ns)
	changes  *Changes
	refresh  int64
	perShard int
	seed     maphash.Seed
	shards   [cacheShards]cacheShard
	flight   singleflight.Group

	hits, stale, misses, coalesced, evictions atomic.Int64
}

func newRespCache(ttl time.Duration, maxBytes int) *respCache {
	maxAge := "max-age=" + strconv.Itoa(int(ttl/time.Second))
	c := &respCache{ttl: ttl, perShard: max(maxBytes/cacheShards, 1), seed: maphash.MakeSeed(),
		maxAge: []string{maxAge}, maxAgeBytes: []byte(maxAge)}
	for i := range c.shards {
		c.shards[i].m = map[cacheKey]*cached{}
	}
	return c
}

func (c *respCache) shard(k cacheKey) *cacheShard {
	return &c.shards[(maphash.String(c.seed, k.path)^maphash.String(c.seed, k.query))%cacheShards]
}

// get returns the entry of k unless its period has ended at storeNow
// (unix ns of the store's clock), and whether it is fresh at now (unix
// ns); nil when there is none.
func (c *respCache) get(k cacheKey, now, storeNow int64) (e *cached, fresh bool) {
	sh := c.shard(k)
	sh.mu.Lock()
	e = sh.m[k]
	if e == nil || (e.periodEnd != 0 && e.periodEnd <= storeNow) {
		sh.mu.Unlock()
		return nil, false
	}
	if sh.lru.Front() != e.elem {
		sh.lru.MoveToFront(e.elem)
	}
	sh.mu.Unlock()
	return e, c.fresh(e, now)
}

// fresh tells whether e may be served at now (unix ns) without reading it
// again: within its TTL, and, with change notices, before refresh after
// its read if its board changed since the read began.
func (c *respCache) fresh(e *cached, now int64) bool {
	if e.expires <= now {
		return false
	}
	v := e.ver
	if v.board == nil || now < e.readAt+c.refresh {
		return true
	}
	return v.board.Load() == v.seen && c.changes.all.Load() == v.seenAll
}

// version is the change counts of board now, for an entry about to be
// read (zero without change notices).
func (c *respCache) version(board string) version {
	if c.changes == nil {
		return version{}
	}
	return c.changes.version(board)
}

// put stores a rendered body of route under k, read from readAt (unix ns)
// when its board's change counts were v, and returns its entry, fresh
// until now plus the TTL (unix ns) and the end of its period (periodEnd,
// unix ns of the store's clock; 0: none); entries larger than a shard's
// share are returned without being kept.
func (c *respCache) put(k cacheKey, body []byte, readAt, now, periodEnd int64, v version, route *routeMetrics) *cached {
	tag := etag(body)
	e := &cached{key: k, body: body, etag: []string{tag}, etagBytes: []byte(tag), length: []string{strconv.Itoa(len(body))},
		expires: now + int64(c.ttl), periodEnd: periodEnd, route: route, ver: v, readAt: readAt}
	if e.size() > c.perShard {
		return e
	}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := sh.m[k]; old != nil {
		sh.lru.Remove(old.elem)
		sh.bytes -= old.size()
	}
	e.elem = sh.lru.PushFront(e)
	sh.m[k] = e
	sh.bytes += e.size()
	for sh.bytes > c.perShard {
		last := sh.lru.Back()
		old := last.Value.(*cached)
		sh.lru.Remove(last)
		delete(sh.m, old.key)
		sh.bytes -= old.size()
		c.evictions.Add(1)
	}
	return e
}

// etag is the strong ETag of a body: its FNV-1a 64 hash.
func etag(body []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(body)
	return `"` + strconv.FormatUint(h.Sum64(), 16) + `"`
}

// serve writes a cached entry: 304 when the client holds it (If-None-Match),
// else the body; it returns the status.
func (c *respCache) serve(w http.ResponseWriter, r *http.Request, e *cached) int {
	h := w.Header()
	h["Cache-Control"] = c.maxAge
	h["X-Content-Type-Options"] = nosniff
	h["Etag"] = e.etag
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && etagMatch(inm[0], e.etag[0]) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	h["Content-Type"] = jsonType
	h["Content-Length"] = e.length
	_, _ = w.Write(e.body)
	return http.StatusOK
}

// Header values shared by every response: slices whose length is their
// capacity, so that an append makes a copy.
var (
	jsonType = []string{"application/json; charset=utf-8"}
	nosniff  = []string{"nosniff"}
)

// etagMatch reports whether an If-None-Match header names tag (weak
// comparison, as RFC 9110 asks for If-None-Match).
func etagMatch(header, tag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == tag {
			return true
		}
	}
	return false
}
