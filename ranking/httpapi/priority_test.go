package httpapi

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// TestGovernor: the limit of responses started, tick by tick, with the
// clock in the test's hands: none while the consumer keeps up; 70% of the
// tick's rate while it is behind, never below minRate; a quarter more per
// tick once it keeps up, and none once it no longer binds. Admission
// within the limit: one response per 1/limit, a burst of 10 ms, refusal
// beyond 2 s of wait. A cancelled context stands for the waits, so that
// nothing sleeps.
func TestGovernor(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	var behind atomic.Bool
	g := newGovernor(behind.Load, func() time.Time { return now })
	limit := func() float64 { return math.Float64frombits(g.limit.Load()) }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// n requests arrive in a tick; the last one ends it
	tick := func(n int) {
		t.Helper()
		for range n - 1 {
			_ = g.admit(ctx, now)
		}
		now = now.Add(priorityTick)
		_ = g.admit(ctx, now)
	}
	tick(3000) // 30,000/s, keeping up: no limit
	if limit() != 0 {
		t.Fatalf("limit %v while keeping up, want none", limit())
	}
	behind.Store(true)
	tick(2000) // 20,000/s while behind: 70% of it
	if want := 0.7 * 2000 / priorityTick.Seconds(); math.Abs(limit()-want) > 1e-9 {
		t.Fatalf("limit %v, want %v", limit(), want)
	}
	behind.Store(false)
	before := limit()
	now = now.Add(time.Hour) // the reservations of the last tick are past
	tick(1)                  // a rate far below the limit: it goes
	if limit() != 0 {
		t.Fatalf("limit %v after a tick far below %v, want none", limit(), before)
	}

	// behind with a trickle: the floor
	behind.Store(true)
	tick(1)
	if limit() != minRate {
		t.Fatalf("limit %v, want the floor %v", limit(), float64(minRate))
	}
	// admission at 1000/s: the burst of 10 ms starts at once (11
	// responses), then one per ms; beyond 2 s of wait, 503
	g.next = time.Time{}
	g.tickAt.Store(now.UnixNano()) // no adjustment during the count
	at := now
	immediate, waited := 0, 0
	var refused error
	for refused == nil {
		switch err := g.admit(ctx, at); {
		case err == nil:
			immediate++
		case errors.Is(err, context.Canceled):
			waited++
		default:
			refused = err
		}
	}
	if immediate != 11 || waited != 2000 {
		t.Errorf("%d started at once, %d waited, want 11 and 2000", immediate, waited)
	}
	var ae *apiError
	if !errors.As(refused, &ae) || ae.status != 503 || ae.code != codeOverloaded {
		t.Errorf("refusal %v, want 503 overloaded", refused)
	}
	// keeping up again while the limit binds: a quarter more per tick
	behind.Store(false)
	g.next = time.Time{}
	now = now.Add(priorityTick)
	g.tickAt.Store(now.UnixNano())
	tick(100) // 1000/s: at the limit
	if limit() != 1.25*minRate {
		t.Errorf("limit %v, want %v", limit(), 1.25*minRate)
	}
}

// TestDefaultBudgetHoldsCostliestRead: at the default share the bucket
// holds the estimate of the costliest read on a board of the assumed size,
// so that no read is refused too_expensive by default.
func TestDefaultBudgetHoldsCostliestRead(t *testing.T) {
	s := &server{denseSteps: DefaultDenseBudget}
	b := newBudget(DefaultRedisBudget, time.Now)
	if est := s.maxEstimate(); est > b.burst || est < 1000 {
		t.Errorf("costliest read estimated at %.0f µs, the default bucket holds %.0f", est, b.burst)
	}
}
