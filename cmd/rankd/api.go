package main

import (
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/ranking/httpapi"
)

// apiOptions are the read API's options of cfg's api section: the response
// cache, the Redis-time budget (which replaces the fixed rate of expensive
// reads) and the bound on concurrent reads.
func apiOptions(a config.API) []httpapi.Option {
	opts := []httpapi.Option{httpapi.WithCache(a.CacheTTL, a.CacheMaxBytes), httpapi.WithConcurrentReads(a.ConcurrentReads)}
	if a.RedisBudget > 0 {
		opts = append(opts, httpapi.WithRedisBudget(a.RedisBudget), httpapi.WithExpensiveRate(0))
	}
	return opts
}
