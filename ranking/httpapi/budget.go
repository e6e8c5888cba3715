package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// The Redis-time budget. An instance spends at most a share of one Redis
// core on reads: a token bucket filled with share × 1 s of Redis time per
// second. Each read that goes to Redis (a cache hit does not) is charged
// before the work with its cost estimated from the parameters and the
// board's size (store.DefaultCostModel); when the bucket cannot pay, the
// read is answered 503 overloaded at once, with Retry-After the seconds
// until it could, and a read whose estimate exceeds what the bucket ever
// holds is answered 400 too_expensive. After the work the bucket is
// corrected by what the read really cost: its commands, reply elements and
// dense steps, counted as they ran (store.WithCost), through the same model.

const (
	// DefaultRedisBudget is the share of one Redis core that the reads of
	// one instance may use (WithRedisBudget), as rankd run configures it
	// (api.redis_budget). New's default is no budget.
	DefaultRedisBudget = 0.1
	// budgetBurst is how many seconds of the budget the bucket holds.
	budgetBurst = 0.25
	// minBurst is the least the bucket holds, in µs.
	minBurst = 1000
	// DefaultReads is how many reads run their Redis work at once
	// (WithConcurrentReads).
	DefaultReads = 8
	// hotReads are the slots beyond WithConcurrentReads that only the
	// refreshes of hot cache entries take (cache.go): a page many readers
	// poll is read again without waiting behind the misses of pages one
	// reader asked for.
	hotReads = 2
	// assumedMembers is the board size an estimate assumes before a read
	// of the board told it.
	assumedMembers = 1_000_000
)

// WithRedisBudget sets the share of one Redis core the API's reads may use
// (0.1: 100 ms of Redis time per second); <= 0: no budget.
func WithRedisBudget(share float64) Option { return func(c *config) { c.budget = share } }

// WithConcurrentReads bounds the reads whose Redis work runs at once
// (default DefaultReads): the others wait for their turn within their
// timeout, so that readers never hold more than n of the Redis client's
// connections and goroutines, whatever their number, and ingestion keeps
// the rest. n <= 0: no bound.
func WithConcurrentReads(n int) Option { return func(c *config) { c.reads = n } }

// budget is the token bucket of Redis time, in µs.
type budget struct {
	mu     sync.Mutex
	rate   float64 // µs per second
	burst  float64 // µs
	tokens float64
	last   time.Time
	now    func() time.Time

	refused, tooExpensive atomic.Int64
	charged               atomic.Int64 // µs, corrected
}

// newBudget returns the bucket of a share of one Redis core. It holds
// budgetBurst seconds of it (at least minBurst): at the default share that
// is more than the costliest read on a board of the assumed size
// (maxEstimate, 7.6 ms by the model), a share under about 0.03 refuses such
// reads 400 too_expensive.
func newBudget(share float64, now func() time.Time) *budget {
	rate := share * 1e6
	burst := max(rate*budgetBurst, minBurst)
	return &budget{rate: rate, burst: burst, tokens: burst, last: now(), now: now}
}

// take charges an estimate of us µs, or returns the refusal.
func (b *budget) take(us float64) error {
	if us > b.burst {
		b.tooExpensive.Add(1)
		return &apiError{status: http.StatusBadRequest, code: codeTooExpensive,
			msg: fmt.Sprintf("this read would cost about %.0f ms of Redis time, more than this instance may spend at once (%.0f ms); "+
				"ask for less (a smaller limit or n, rank=row or competition, trend=0)", us/1e3, b.burst/1e3)}
	}
	b.mu.Lock()
	now := b.now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < us {
		wait := (us - b.tokens) / b.rate
		b.mu.Unlock()
		b.refused.Add(1)
		return &apiError{status: http.StatusServiceUnavailable, code: codeOverloaded, retryAfter: int(math.Ceil(wait)),
			msg: fmt.Sprintf("the reads of this instance use their share of Redis (%.0f ms of Redis time per second); retry shortly",
				b.rate/1e3)}
	}
	b.tokens -= us
	b.mu.Unlock()
	b.charged.Add(int64(us))
	return nil
}

// correct replaces a charged estimate by the real cost.
func (b *budget) correct(estimate, real float64) {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+estimate-real)
	b.mu.Unlock()
	b.charged.Add(int64(real - estimate))
}

// estimate is the expected Redis work of a read, before it runs.
type estimate struct {
	c     store.Counts
	board string
}

// sizes remembers the largest member count read per board, for estimates.
type sizes struct {
	m map[string]*atomic.Int64
}

func newSizes(boards []string) *sizes {
	s := &sizes{m: map[string]*atomic.Int64{}}
	for _, b := range boards {
		s.m[b] = &atomic.Int64{}
	}
	return s
}

func (s *sizes) seen(board string, n int64) {
	if a := s.m[board]; a != nil && n > a.Load() {
		a.Store(n) // racing stores keep one of the larger values: good enough for an estimate
	}
}

func (s *sizes) of(board string) int64 {
	if a := s.m[board]; a != nil && a.Load() > 0 {
		return a.Load()
	}
	return assumedMembers
}

// Estimates of the routes' Redis work (see store's query code for the
// commands each sends; TestEstimates compares them with what reads send).

// boardCost is what a read of b sends besides its own commands: the dims
// check's SISMEMBER on a board with dims, the rollover state's HMGET on a
// rolling board, and on boards with periods the partitions' marks for
// finality (HGETALL; the store reads them at most once a second, an
// estimate counts them always).
func boardCost(b *ranking.Board) store.Counts {
	var c store.Counts
	if len(b.Dims) > 0 {
		c = plus(c, store.Counts{RoundTrips: 1, Commands: 1})
	}
	if b.Window == ranking.WindowRolling {
		c = plus(c, store.Counts{RoundTrips: 1, Commands: 1, Elements: 2})
	}
	if b.Window != ranking.WindowTotal {
		c = plus(c, store.Counts{RoundTrips: 1, Commands: 1, Elements: 36})
	}
	return c
}

// pageCost is a page read of rows entries: MULTI, ZRANGE, ZCARD, EXEC
// (with HLEN on keep_top boards) in one round trip.
func pageCost(rows int) store.Counts {
	return store.Counts{RoundTrips: 1, Commands: 5, Elements: 2 * int64(rows)}
}

// trendCost is the previous ranks of rows entries in mode: a pipeline of
// ZREVRANKs (row); ZMSCORE, then a pipeline of ZCOUNTs (competition);
// ZMSCORE, a ZCOUNT and a ZRANGE, then the walk's script with at most the
// dense budget of steps (dense). A ZCOUNT counts as two commands
// (store.Counts).
func (s *server) trendCost(rows int, mode store.RankMode) store.Counts {
	switch mode {
	case store.RankRow:
		return store.Counts{RoundTrips: 1, Commands: int64(rows)}
	case store.RankCompetition:
		return store.Counts{RoundTrips: 2, Commands: 1 + 2*int64(rows), Elements: int64(rows)}
	}
	return store.Counts{RoundTrips: 3, Commands: 5, Elements: 2*int64(rows) + 4, DenseSteps: int64(s.denseSteps)}
}

func plus(a, b store.Counts) store.Counts {
	return store.Counts{RoundTrips: a.RoundTrips + b.RoundTrips, Commands: a.Commands + b.Commands,
		Elements: a.Elements + b.Elements, DenseSteps: a.DenseSteps + b.DenseSteps}
}

// retryAfter is the Retry-After of a 503.
func retryAfter(e *apiError) string {
	if e != nil && e.retryAfter > 1 {
		return strconv.Itoa(e.retryAfter)
	}
	return "1"
}
