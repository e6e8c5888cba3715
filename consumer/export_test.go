package consumer

import (
	"testing"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
)

// ExampleConfig is what the tests use of the example config
// (config/example.yaml loaded by config.LoadBytes: a *config.Config).
type ExampleConfig interface {
	Boards() []*ranking.Board
	Schemas() map[string]*ingest.Schema
	Router() (*ingest.Router, error)
}

// LoadExample loads the example config. The tests of this package cannot
// import config, which imports consumer (its kafka section's defaults are
// this package's Default* constants): example_test.go, in the external
// test package, sets it.
var LoadExample func() (ExampleConfig, error)

// loadExample returns the example config or fails the test.
func loadExample(tb testing.TB) ExampleConfig {
	tb.Helper()
	if LoadExample == nil {
		tb.Fatal("consumer.LoadExample is not set (example_test.go)")
	}
	c, err := LoadExample()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
