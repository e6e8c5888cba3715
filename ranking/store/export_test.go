package store

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/ranking/ingest"
)

// SetNonce makes the Applies that follow use nonce n (so call IDs repeat,
// as when a client resends a pipeline); it returns what undoes it.
func SetNonce(n string) (undo func()) {
	orig := newNonce
	newNonce = func() string { return n }
	return func() { newNonce = orig }
}

// SetReplanPause sets how long apply calls go per update after a packed
// call gave up; it returns what undoes it.
func SetReplanPause(d time.Duration) (undo func()) {
	orig := replanPause
	replanPause = d
	return func() { replanPause = orig }
}

// ProbeArgs runs a new store's argument-encoding probe (args.go) on rdb
// and returns what it decided ("m", "a"; "" when it decided nothing) and
// its error.
func ProbeArgs(ctx context.Context, rdb redis.Scripter) (string, error) {
	var e argEncoding
	_, err := e.get(ctx, rdb)
	m, _ := e.mode.Load().(string)
	return m, err
}

// LoadExample returns the example config and its router, for the tests
// and benchmarks that route the standard workload.
func LoadExample(tb testing.TB) (*config.Config, *ingest.Router) {
	tb.Helper()
	cfg, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		tb.Fatal(err)
	}
	router, err := cfg.Router()
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, router
}
