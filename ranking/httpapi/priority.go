package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Ingestion's priority. Readers and the consumer share the process's CPU,
// and a cached read costs the process about as much as a few events
// (net/http and the system calls, not Redis): a thousand clients polling in
// a closed loop can take all of it. With WithPriority the API yields: every
// tick (100 ms) it asks whether the consumer is behind (its batches leave
// messages waiting), and while it is, it lowers the rate of responses it
// starts to 70% of what it served in the tick (not below minRate); while
// the consumer is only slow (WithLatencyTarget: its batches took longer
// than api.yield_latency from fetch to commit), to 90%; once
// the consumer keeps up again the rate grows by a quarter per tick, and the
// limit goes once it no longer binds. A request over the rate waits,
// parked (it costs nothing), for its turn: its client, which sends its next
// request after the answer, waits with it, so the requests that arrive
// slow down too. A request that would wait more than maxAdmitWait is
// answered 503 overloaded at once. The one request that reads an expired
// cache entry again does not wait: at most one per entry and TTL, it keeps
// the page every other reader is served fresh. Probes (/healthz, /readyz) and /metrics
// are not the API's and never wait.
//
// Yielding while only slow helps when the readers are why the consumer is
// slow. When they are not (a distant or busy Redis, a slow broker), the
// limit falls to minRate and the consumer stays slow: after slowGiveUp at
// the floor, still slow, the API stops yielding for being slow (a real
// backlog still makes it yield) for slowPause, twice as long after each
// such episode up to slowPauseMax, and back to slowPause once a yield made
// the consumer fast again.

const (
	priorityTick = 100 * time.Millisecond
	// minRate is the least responses per second the API keeps starting
	// while the consumer is behind.
	minRate = 1000
	// maxAdmitWait bounds a request's wait for its turn.
	maxAdmitWait = 2 * time.Second
	// slowGiveUp, slowPause, slowPauseMax: see above.
	slowGiveUp   = 2 * time.Second
	slowPause    = 30 * time.Second
	slowPauseMax = 10 * time.Minute
)

// WithPriority makes the API yield to ingestion: behind reports whether
// the consumer is short of time (consumer.Consumer.Behind); while it is,
// the API slows the responses it starts (see above).
func WithPriority(behind func() bool) Option { return func(c *config) { c.behind = behind } }

// WithLatencyTarget makes the API also yield, gently, while the
// consumer's batches are slow: while latency (consumer.Consumer.Latency)
// is above target, the rate of responses started goes to 90% of the
// tick's every tick (not below minRate), and it grows back by a quarter per
// tick once latency is under target. It needs WithPriority. target <= 0:
// off.
func WithLatencyTarget(latency func() time.Duration, target time.Duration) Option {
	return func(c *config) { c.latency, c.latencyTarget = latency, target }
}

// governor is the rate limit of the responses started. Without a limit
// (most of the time) a request costs it two atomic operations.
type governor struct {
	behind func() bool
	slow   func() bool // nil: never
	now    func() time.Time

	served atomic.Int64  // responses started in this tick
	tickAt atomic.Int64  // unix ns
	limit  atomic.Uint64 // float64 bits: responses per second; 0: none

	mu   sync.Mutex // adjust and the reservations
	next time.Time  // when the next response may start
	// while only slow: since when the limit is at the floor (zero: it is
	// not), until when the API does not yield for being slow, and the next
	// pause's length (zero: slowPause)
	floorSince, pauseUntil time.Time
	pause                  time.Duration
	slowYield              bool // the last tick yielded for being slow
	paused                 int  // pauses so far (Paused)
}

// Paused returns how often the API stopped yielding for a slow consumer
// that its yielding did not make faster.
func (g *governor) Paused() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

func newGovernor(behind func() bool, now func() time.Time) *governor {
	g := &governor{behind: behind, now: now}
	g.tickAt.Store(now().UnixNano())
	return g
}

// admit returns when a request that arrived at now may start, or the
// refusal.
func (g *governor) admit(ctx context.Context, now time.Time) error {
	g.served.Add(1)
	if now.UnixNano()-g.tickAt.Load() >= int64(priorityTick) && g.mu.TryLock() {
		g.adjust(now)
		g.mu.Unlock()
	}
	if g.limit.Load() == 0 {
		return nil
	}
	g.mu.Lock()
	limit := math.Float64frombits(g.limit.Load())
	if limit == 0 {
		g.mu.Unlock()
		return nil
	}
	// one response every 1/limit, with a burst of a tick's 10th
	if early := now.Add(-priorityTick / 10); g.next.Before(early) {
		g.next = early
	}
	at := g.next
	wait := at.Sub(now)
	if wait > maxAdmitWait {
		g.mu.Unlock()
		return &apiError{status: http.StatusServiceUnavailable, code: codeOverloaded,
			msg: fmt.Sprintf("the API yields to ingestion, which is behind: it starts %.0f responses per second for now; retry shortly", limit)}
	}
	g.next = at.Add(time.Duration(float64(time.Second) / limit))
	g.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	// a request whose context already ended does not start, even when its
	// wait is so short that the timer fires before the select below looks
	// (select picks at random among ready cases)
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// adjust moves the limit at the end of a tick; g.mu is held.
func (g *governor) adjust(now time.Time) {
	elapsed := time.Duration(now.UnixNano() - g.tickAt.Load())
	if elapsed < priorityTick {
		return // another request adjusted it meanwhile
	}
	rate := float64(g.served.Swap(0)) / elapsed.Seconds()
	g.tickAt.Store(now.UnixNano())
	limit := math.Float64frombits(g.limit.Load())
	behind := g.behind()
	slow := g.slow != nil && now.After(g.pauseUntil) && g.slow()
	if !slow {
		g.floorSince = time.Time{}
		if g.slowYield && !behind {
			g.pause = 0 // its yield made the consumer fast again
		}
	}
	g.slowYield = slow && !behind
	switch {
	case behind:
		if limit > 0 {
			rate = min(rate, limit)
		}
		limit = max(0.7*rate, minRate)
	case slow:
		if limit > 0 {
			rate = min(rate, limit)
		}
		limit = max(0.9*rate, minRate)
		if limit > minRate {
			break
		}
		if g.floorSince.IsZero() {
			g.floorSince = now
		}
		if now.Sub(g.floorSince) >= slowGiveUp {
			// yielding all it can did not make the consumer fast: the
			// readers are not why it is slow
			g.pause = max(g.pause, slowPause)
			g.pauseUntil, g.floorSince, limit = now.Add(g.pause), time.Time{}, 0
			g.pause = min(2*g.pause, slowPauseMax)
			g.paused++
			g.slowYield = false
		}
	case limit == 0:
	case rate < limit/2:
		limit = 0 // it no longer binds
	default:
		limit *= 1.25
	}
	g.limit.Store(math.Float64bits(limit))
}

// admitted returns h after the request's admission (admit).
func (s *server) admitted(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.admit(r); err != nil {
			return err
		}
		return h(w, r)
	}
}

// admit waits for the request's turn when the API yields to ingestion.
func (s *server) admit(r *http.Request) error {
	if s.gov == nil {
		return nil
	}
	return s.gov.admit(r.Context(), s.clock())
}
