package httpapi

import (
	"container/list"
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
// are answered from pre-rendered bytes kept per request: the board, the
// raw query (dims, period, limit or percent, n, rank, trend, ...) and the
// period "current" stands for now, so that a new period never serves the
// last one's page. An entry is read from Redis at most once per TTL:
// concurrent misses of one entry wait for a single read (singleflight). So
// a reader sees the board as it was at most TTL plus one read's duration
// ago; through a browser or a CDN honouring Cache-Control, at most twice
// the TTL.
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

// cached is one rendered response.
type cached struct {
	key     string
	body    []byte
	etag    string
	expires int64 // unix ns
	elem    *list.Element
}

func (e *cached) size() int { return len(e.key) + len(e.body) + entryOverhead }

type cacheShard struct {
	mu    sync.Mutex
	m     map[string]*cached
	lru   list.List // front: most recently used
	bytes int
	_     [40]byte // keep shards on separate cache lines
}

// respCache is the response cache.
type respCache struct {
	ttl      time.Duration
	maxAge   string // Cache-Control value
	perShard int
	seed     maphash.Seed
	shards   [cacheShards]cacheShard
	flight   singleflight.Group

	hits, misses, coalesced, evictions atomic.Int64
}

func newRespCache(ttl time.Duration, maxBytes int) *respCache {
	c := &respCache{ttl: ttl, perShard: max(maxBytes/cacheShards, 1), seed: maphash.MakeSeed(),
		maxAge: "max-age=" + strconv.Itoa(int(ttl/time.Second))}
	for i := range c.shards {
		c.shards[i].m = map[string]*cached{}
	}
	return c
}

func (c *respCache) shard(key string) *cacheShard {
	return &c.shards[maphash.String(c.seed, key)%cacheShards]
}

// get returns the fresh entry of key, or nil.
func (c *respCache) get(key string, now int64) *cached {
	sh := c.shard(key)
	sh.mu.Lock()
	e := sh.m[key]
	if e != nil && e.expires > now {
		sh.lru.MoveToFront(e.elem)
		sh.mu.Unlock()
		return e
	}
	sh.mu.Unlock()
	return nil
}

// put stores a rendered body under key and returns its entry; entries
// larger than a shard's share are returned without being kept.
func (c *respCache) put(key string, body []byte, now int64) *cached {
	e := &cached{key: key, body: body, etag: etag(body), expires: now + int64(c.ttl)}
	if e.size() > c.perShard {
		return e
	}
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := sh.m[key]; old != nil {
		sh.lru.Remove(old.elem)
		sh.bytes -= old.size()
	}
	e.elem = sh.lru.PushFront(e)
	sh.m[key] = e
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

// stats returns the entries and bytes held.
func (c *respCache) stats() (entries, bytes int) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		entries += len(sh.m)
		bytes += sh.bytes
		sh.mu.Unlock()
	}
	return entries, bytes
}

// etag is the strong ETag of a body: its FNV-1a 64 hash.
func etag(body []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(body)
	return `"` + strconv.FormatUint(h.Sum64(), 16) + `"`
}

// serve writes a cached entry: 304 when the client holds it (If-None-Match),
// else the body.
func (c *respCache) serve(w http.ResponseWriter, r *http.Request, e *cached) {
	h := w.Header()
	h["Cache-Control"] = []string{c.maxAge}
	h["Etag"] = []string{e.etag}
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, e.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h["Content-Type"] = jsonType
	h["Content-Length"] = []string{strconv.Itoa(len(e.body))}
	_, _ = w.Write(e.body)
}

var jsonType = []string{"application/json; charset=utf-8"}

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
