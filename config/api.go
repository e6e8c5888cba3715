package config

import (
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// API configures the read API's response cache, its Redis-time budget and
// its concurrency (see ranking/httpapi).
type API struct {
	// CacheTTL: a board read is read from Redis at most once per TTL and
	// served from memory meanwhile; default 1s; 0 turns the cache off.
	CacheTTL time.Duration
	// CacheRefresh: once a board changed (the consumers publish the
	// boards each batch changed), its cached reads are read again when
	// they are this old instead of at the TTL; default 50ms; 0: the TTL
	// alone, without subscribing to the notices.
	CacheRefresh time.Duration
	// CacheMaxBytes bounds the cache's memory (least recently used
	// entries are evicted); default 64 MiB.
	CacheMaxBytes int
	// RedisBudget is the share of one Redis core the reads of one
	// instance may use (0.1: 100 ms of Redis time per second); default
	// 0.1; 0 turns the budget off.
	RedisBudget float64
	// ConcurrentReads bounds the reads whose Redis work runs at once;
	// default 8.
	ConcurrentReads int
	// ConcurrentWrites is accepted and ignored, with a warning (Warnings):
	// it bounded the responses net/http wrote at once, before rankd's
	// server was fasthttp.
	ConcurrentWrites int
	// YieldLatency: the API also yields to ingestion while a batch of the
	// consumer took longer than this from the fetch of its first message
	// to its commit (and stops for a while when yielding all it can does
	// not help: httpapi's priority.go); default 100ms; 0: only when the
	// consumer is behind (its batches leave messages waiting).
	YieldLatency time.Duration
}

// Defaults of the api section (the same as httpapi's).
const (
	DefaultCacheTTL        = time.Second
	DefaultCacheRefresh    = 50 * time.Millisecond
	DefaultCacheMaxBytes   = 64 << 20
	DefaultRedisBudget     = 0.1
	DefaultConcurrentReads = 8
	DefaultYieldLatency    = 100 * time.Millisecond
	// DefaultMaxConns is http.max_conns's default.
	DefaultMaxConns = 4096
)

func defaultAPI() API {
	return API{CacheTTL: DefaultCacheTTL, CacheRefresh: DefaultCacheRefresh, CacheMaxBytes: DefaultCacheMaxBytes, RedisBudget: DefaultRedisBudget,
		ConcurrentReads: DefaultConcurrentReads, YieldLatency: DefaultYieldLatency}
}

// apiFields are the keys of the api section.
func (l *loader) apiFields(a *API) map[string]field {
	return map[string]field{
		"cache_ttl":         l.duration(&a.CacheTTL),
		"cache_refresh":     l.duration(&a.CacheRefresh),
		"cache_max_bytes":   l.integer(&a.CacheMaxBytes),
		"redis_budget":      l.float(&a.RedisBudget),
		"concurrent_reads":  l.integer(&a.ConcurrentReads),
		"concurrent_writes": l.integer(&a.ConcurrentWrites),
		"yield_latency":     l.duration(&a.YieldLatency),
	}
}

func (l *loader) float(dst *float64) field {
	return func(n *yaml.Node, path string) {
		s, ok := l.scalar(n, path)
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			l.errorAt(n, path, "want a number, got %q", s)
			return
		}
		*dst = f
	}
}

func (l *loader) validateAPI(c *Config) {
	a := &c.API
	if a.CacheTTL < 0 {
		l.errorf("api.cache_ttl", "must be 0 (no cache) or positive, got %v", a.CacheTTL)
	}
	if a.CacheRefresh < 0 {
		l.errorf("api.cache_refresh", "must be 0 (the TTL alone) or positive, got %v", a.CacheRefresh)
	}
	if a.CacheMaxBytes < 1<<20 {
		l.errorf("api.cache_max_bytes", "must be at least 1 MiB (1048576), got %d", a.CacheMaxBytes)
	}
	if a.RedisBudget < 0 || a.RedisBudget > 1 {
		l.errorf("api.redis_budget", "must be a share of one Redis core in 0..1 (0: no budget), got %g", a.RedisBudget)
	}
	if a.ConcurrentReads < 1 {
		l.errorf("api.concurrent_reads", "must be at least 1, got %d", a.ConcurrentReads)
	}
	if a.ConcurrentWrites < 0 {
		l.errorf("api.concurrent_writes", "must be 0 or positive (and has no effect: remove it), got %d", a.ConcurrentWrites)
	}
	if a.YieldLatency < 0 {
		l.errorf("api.yield_latency", "must be 0 (yield only when the consumer is behind) or positive, got %v", a.YieldLatency)
	}
	if c.HTTP.MaxConns < 16 {
		l.errorf("http.max_conns", "must be at least 16, got %d", c.HTTP.MaxConns)
	}
}
