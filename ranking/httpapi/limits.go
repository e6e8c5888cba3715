package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rankd/rankd/ranking/store"
)

// Limits of one request's Redis work (see the package documentation,
// "Cost of a request").
const (
	// DefaultTimeout bounds a request's Redis work (WithTimeout).
	DefaultTimeout = 2 * time.Second
	// DefaultExpensive is the number of expensive reads served at once
	// (WithExpensiveLimit).
	DefaultExpensive = 2
	// DefaultQueueWait is how long an expensive read waits for a slot
	// before it is answered 503 overloaded (WithExpensiveLimit).
	DefaultQueueWait = 100 * time.Millisecond
	// DefaultDenseBudget is the number of distinct values the dense-rank
	// walks of one request may visit in total (WithDenseBudget).
	DefaultDenseBudget = 1000
	// DefaultExpensiveRate is how many expensive reads an instance starts
	// per second (WithExpensiveRate): at up to about 10 ms of Redis time
	// each (measured 6-9.5 ms for the costliest), at most about 5% of
	// Redis goes to them however hard clients push.
	DefaultExpensiveRate = 5.0
)

// WithExpensiveRate sets how many expensive reads are started per second
// (default DefaultExpensiveRate, with bursts up to the expensive limit);
// beyond it they are answered 503 overloaded at once. <= 0: no rate limit.
// With the per-request bound this caps the share of Redis time that reads
// can take from ingestion.
func WithExpensiveRate(perSecond float64) Option { return func(c *config) { c.rate = perSecond } }

// tokenBucket allows rate events per second, in bursts of up to burst.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64, burst int) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(max(burst, 1)), tokens: float64(max(burst, 1)), last: time.Now()}
}

// take takes a token if there is one.
func (b *tokenBucket) take() bool {
	if b.rate <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// WithTimeout sets how long a request may spend reading Redis (default
// DefaultTimeout; <= 0: no limit). When it runs out the request is answered
// 503 timeout at once, and its Redis work stops: the store call's context is
// cancelled, so no further command is sent (one already sent finishes).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithExpensiveLimit sets how many expensive reads are served at once, and
// how long one waits for its turn before the answer 503 overloaded
// (defaults DefaultExpensive and DefaultQueueWait). Expensive reads are
// those that may walk dense ranks (rank=dense on /around and /members, and
// with trend=1 on /top) and those asking the previous ranks (trend=1) of
// more than 100 entries. A read keeps its slot until its Redis work has
// stopped, even when it has been answered 503 timeout.
func WithExpensiveLimit(n int, wait time.Duration) Option {
	return func(c *config) { c.expensive, c.queueWait = max(n, 1), max(wait, 0) }
}

// WithDenseBudget sets the number of distinct values the dense-rank walks
// of one request may visit in total (default DefaultDenseBudget; see
// store.WithDenseBudget). Each is one O(log n) look-up in Redis.
func WithDenseBudget(steps int) Option { return func(c *config) { c.denseSteps = max(steps, 0) } }

// Error codes of the request limits.
const (
	codeTooExpensive = "too_expensive" // 400
	codeTimeout      = "timeout"       // 503
	codeOverloaded   = "overloaded"    // 503
)

// read runs fn, the Redis part of a request, within the request's limits:
// the Redis-time budget is charged est before anything else (a refusal
// costs Redis nothing), then an expensive read takes one of the expensive
// slots, and every read one of the concurrent-read slots; fn's context
// carries the timeout, the dense budget and the cost meter. read returns
// when fn does or when the time is up, whichever comes first; fn then stops
// at its next Redis call, frees its slots and corrects the budget with its
// real cost when it returns.
func (s *server) read(r *http.Request, route string, expensive bool, est estimate, fn func(ctx context.Context) error) error {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if s.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
	}
	defer cancel()
	n := s.sizes.of(est.board)
	var charged float64
	if s.budget != nil {
		charged = s.model.Micros(est.c, n)
		if err := s.budget.take(charged); err != nil {
			if s.m != nil {
				s.m.refused.WithLabelValues(err.(*apiError).code).Inc()
			}
			return err
		}
	}
	var cost *store.Cost
	ctx, cost = store.WithCost(ctx)
	settle := func() {
		counted := cost.Counts()
		real := s.model.Micros(counted, s.sizes.of(est.board))
		if s.budget != nil {
			s.budget.correct(charged, real)
		}
		if s.m != nil {
			s.m.redisTime.WithLabelValues(route).Add(real / 1e6)
			s.m.redisEstimated.WithLabelValues(route).Add(s.model.Micros(est.c, n) / 1e6)
		}
		if s.observe != nil {
			s.observe(route, est.c, counted)
		}
	}
	if expensive {
		if err := s.acquire(ctx); err != nil {
			settle()
			return s.limitError(ctx, r, err)
		}
	}
	var slot chan struct{} // the concurrent-read slot taken
	if s.reads != nil {
		hot := s.hot
		if !isHot(ctx) {
			hot = nil // a nil channel's case never runs
		}
		select {
		case s.reads <- struct{}{}:
			slot = s.reads
		case hot <- struct{}{}:
			slot = hot
		case <-ctx.Done():
			if expensive {
				<-s.slots
			}
			settle()
			return s.limitError(ctx, r, ctx.Err())
		}
	}
	ctx = store.WithDenseBudget(ctx, s.denseSteps)
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			if p := recover(); p != nil { // as net/http would for the handler
				err = fmt.Errorf("panic reading the board: %v\n%s", p, debug.Stack())
			}
			if slot != nil {
				<-slot
			}
			if expensive {
				<-s.slots // before the answer: a client's next read finds the slot free
			}
			settle()
			done <- err
		}()
		err = fn(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done: // finished just in time
		default:
			err = ctx.Err()
		}
	}
	return s.limitError(ctx, r, err)
}

// acquire takes an expensive slot, waiting at most the queue wait, within
// the rate of expensive reads.
func (s *server) acquire(ctx context.Context) error {
	if !s.bucket.take() {
		return &apiError{status: http.StatusServiceUnavailable, code: codeOverloaded,
			msg: fmt.Sprintf("more than %g expensive reads (rank=dense, or trend=1 on more than %d entries) per second; retry shortly",
				s.bucket.rate, expensiveRows)}
	}
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(s.queueWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-t.C:
		return &apiError{status: http.StatusServiceUnavailable, code: codeOverloaded,
			msg: fmt.Sprintf("%d expensive reads (rank=dense, or trend=1 on more than %d entries) are in progress, the most served at once; "+
				"retry shortly", cap(s.slots), expensiveRows)}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// limitError turns a failure after the request's own deadline into 503
// timeout; other errors are returned as they are.
func (s *server) limitError(ctx context.Context, r *http.Request, err error) error {
	if err == nil || r.Context().Err() != nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return &apiError{status: http.StatusServiceUnavailable, code: codeTimeout, cause: err,
		msg: fmt.Sprintf("the request did not finish within %s; retry later, or ask for less (a smaller limit or n, rank=row, trend=0)", s.timeout)}
}

// tooExpensive is the 400 of store.ErrTooExpensive.
func (s *server) tooExpensive(err error) error {
	return &apiError{status: http.StatusBadRequest, code: codeTooExpensive, cause: err,
		msg: fmt.Sprintf("rank=dense: ranks in the previous period lie beyond the %d distinct values one request may walk; "+
			"ask with rank=competition or rank=row, without trend, or nearer the top", s.denseSteps)}
}
