package consumer

import (
	"testing"

	"github.com/rankd/rankd/config"
)

// loadExample returns the example config (config/example.yaml) or fails the
// test.
func loadExample(tb testing.TB) *config.Config {
	tb.Helper()
	c, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
