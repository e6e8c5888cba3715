// Package testseed gives randomized tests a generator whose seed is logged, so
// that a failure can be replayed: RANKD_TEST_SEED=<seed> go test -run ...
package testseed

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Rand returns a generator seeded from RANKD_TEST_SEED when set (to replay
// a failure), else from the clock; the seed is logged.
func Rand(t testing.TB) (int64, *rand.Rand) {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv("RANKD_TEST_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("RANKD_TEST_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with RANKD_TEST_SEED=%d)", seed, seed)
	return seed, rand.New(rand.NewPCG(uint64(seed), 0))
}
