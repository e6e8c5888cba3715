package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
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

// govClock is a governor with the clock in the test's hands, and the
// consumer's state (behind, slow) as switches.
type govClock struct {
	g            *governor
	now          time.Time
	behind, slow atomic.Bool
	ctx          context.Context // cancelled: it stands for the waits, so that nothing sleeps
}

func newGovClock() *govClock {
	c := &govClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.g = newGovernor(c.behind.Load, func() time.Time { return c.now })
	c.g.slow = c.slow.Load
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.ctx = ctx
	return c
}

func (c *govClock) limit() float64 { return math.Float64frombits(c.g.limit.Load()) }

// tick: n requests arrive in a tick, none waiting for an earlier one's
// turn; the last one ends it.
func (c *govClock) tick(n int) {
	c.g.next = time.Time{}
	for range n - 1 {
		_ = c.g.admit(c.ctx, c.now)
	}
	c.now = c.now.Add(priorityTick)
	_ = c.g.admit(c.ctx, c.now)
}

// TestGovernorSlow: while the consumer is slow (not behind), the limit
// goes to 90% of the tick's rate, not 70%; behind wins over slow; once
// neither, it grows by a quarter per tick.
func TestGovernorSlow(t *testing.T) {
	c := newGovClock()
	behind, slow, limit, tick := &c.behind, &c.slow, c.limit, c.tick
	slow.Store(true)
	tick(2000) // 20,000/s while slow: 90% of it
	if want := 0.9 * 2000 / priorityTick.Seconds(); math.Abs(limit()-want) > 1e-6 {
		t.Fatalf("limit %v while slow, want %v", limit(), want)
	}
	behind.Store(true)
	tick(2000) // behind and slow: 70% of the limit it served at most
	if want := 0.7 * 0.9 * 2000 / priorityTick.Seconds(); math.Abs(limit()-want) > 1e-6 {
		t.Fatalf("limit %v while behind and slow, want %v", limit(), want)
	}
	behind.Store(false)
	slow.Store(false)
	before := limit()
	tick(int(before * priorityTick.Seconds())) // at the limit, neither: a quarter more
	if want := 1.25 * before; math.Abs(limit()-want) > 1e-6 {
		t.Fatalf("limit %v once neither, want %v", limit(), want)
	}
}

// TestGovernorSlowPause: while the consumer stays slow with the limit at
// the floor for slowGiveUp, the readers are not the cause: the API stops
// yielding for being slow for slowPause (a backlog still makes it yield),
// then tries again, and pauses twice as long when that fails too; a yield
// that makes the consumer fast brings the pause back to slowPause.
func TestGovernorSlowPause(t *testing.T) {
	c := newGovClock()
	g, behind, slow, limit, tick := c.g, &c.behind, &c.slow, c.limit, c.tick
	// ticks until the limit lifts (at most max), and the ticks at the floor
	untilLifted := func(n, max int) (ticks, atFloor int) {
		t.Helper()
		for ticks = 1; ticks <= max; ticks++ {
			tick(n)
			switch limit() {
			case 0:
				return ticks, atFloor
			case minRate:
				atFloor++
			}
		}
		t.Fatalf("the limit %v did not lift in %d ticks", limit(), max)
		return
	}
	slow.Store(true)
	// 20,000/s: 90% a tick down to the floor, then slowGiveUp there
	ticks, atFloor := untilLifted(2000, 200)
	floorTicks := int(slowGiveUp / priorityTick)
	if atFloor != floorTicks || g.Paused() != 1 {
		t.Fatalf("lifted after %d ticks, %d at the floor, %d pauses; want %d at the floor, 1 pause", ticks, atFloor, g.Paused(), floorTicks)
	}
	// paused: slow, no limit, for slowPause
	for range int(slowPause/priorityTick) - 1 {
		tick(2000)
		if limit() != 0 {
			t.Fatalf("limit %v during the pause, want none", limit())
		}
	}
	behind.Store(true) // a backlog still makes it yield
	tick(2000)
	if want := 0.7 * 2000 / priorityTick.Seconds(); math.Abs(limit()-want) > 1e-6 {
		t.Fatalf("limit %v while behind during the pause, want %v", limit(), want)
	}
	behind.Store(false) // the pause is over: it yields again, and fails again
	_, atFloor = untilLifted(2000, 200)
	if atFloor != floorTicks || g.Paused() != 2 || !g.pauseUntil.Equal(c.now.Add(2*slowPause)) {
		t.Fatalf("%d ticks at the floor, %d pauses, paused until %v; want %d, 2, %v", atFloor, g.Paused(), g.pauseUntil, floorTicks, c.now.Add(2*slowPause))
	}
	// after it, a yield that works: the pause is back to slowPause
	c.now = g.pauseUntil.Add(time.Second)
	tick(2000)
	if limit() == 0 {
		t.Fatal("no limit while slow after the pause")
	}
	slow.Store(false)
	tick(int(limit() * priorityTick.Seconds()))
	if g.pause != 0 {
		t.Fatalf("next pause %v after a yield that worked, want slowPause again", g.pause)
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

// fakeStore serves one total board "t" with one member; the methods the
// test does not reach are the nil interface's.
type fakeStore struct {
	Store
	tops atomic.Int64
}

func (f *fakeStore) Boards() []*ranking.Board {
	return []*ranking.Board{{Name: "t", Window: ranking.WindowTotal}}
}

func (f *fakeStore) ResolvePeriod(board, period string) (ranking.Period, error) {
	return ranking.Period{ID: "all"}, nil
}

func (f *fakeStore) KnownDims(context.Context, string, []string) error { return nil }

func (f *fakeStore) Top(context.Context, string, []string, string, int, store.RankMode) (store.Page, error) {
	f.tops.Add(1)
	return store.Page{Period: ranking.Period{ID: "all"}, Count: 1, Complete: true,
		Entries: []store.Entry{{Rank: 1, Member: "m", Value: f.tops.Load()}}}, nil
}

// TestRefreshSkipsAdmission: while the API yields so much that any
// request would wait more than 2 s (503 overloaded), the one request that
// reads an expired entry again still goes through, without waiting; hits
// and misses do not.
func TestRefreshSkipsAdmission(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fs := &fakeStore{}
	h := New(fs, WithCache(time.Second, 1<<20), WithClock(func() time.Time { return now }), WithPriority(func() bool { return true }))
	s := h.(*api).s
	get := func(u string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u, nil))
		return w.Code, w.Body.String()
	}
	if code, _ := get("/v1/boards/t/top"); code != 200 {
		t.Fatalf("first read: %d", code)
	}
	// yield: a limit whose queue is full for the next hour
	s.gov.limit.Store(math.Float64bits(minRate))
	s.gov.next = now.Add(time.Hour)
	s.gov.tickAt.Store(now.Add(time.Hour).UnixNano()) // no adjustment
	for _, u := range []string{"/v1/boards/t/top", "/v1/boards/t/top?limit=5"} {
		if code, body := get(u); code != 503 || !strings.Contains(body, `"code":"overloaded"`) {
			t.Errorf("GET %s while yielding: %d %s, want 503 overloaded", u, code, body)
		}
	}
	now = now.Add(time.Second) // the entry expires
	if code, body := get("/v1/boards/t/top"); code != 200 || !strings.Contains(body, `"raw":2`) || fs.tops.Load() != 2 {
		t.Errorf("reading the expired entry again: %d %s (%d reads), want 200 with the second read", code, body, fs.tops.Load())
	}
}

// gatedStore's Top of limit 7 waits for gate, after saying so on entered.
type gatedStore struct {
	fakeStore
	entered, gate chan struct{}
}

func (g *gatedStore) Top(ctx context.Context, board string, dims []string, period string, limit int, mode store.RankMode) (store.Page, error) {
	if limit == 7 {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.fakeStore.Top(ctx, board, dims, period, limit, mode)
}

// TestHotRefreshSkipsQueue: with the one concurrent-read slot held by a
// read that one client asked for, the refresh of an entry that other
// readers hit (hot) still goes through, on a hot slot; the refresh of an
// entry nobody else read waits for the slot, here until its timeout.
func TestHotRefreshSkipsQueue(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	gs := &gatedStore{entered: make(chan struct{}), gate: make(chan struct{})}
	h := New(gs, WithCache(time.Second, 1<<20), WithConcurrentReads(1), WithTimeout(300*time.Millisecond),
		WithClock(func() time.Time { return time.Unix(0, clock.Load()) }))
	get := func(u string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u, nil))
		return w.Code, w.Body.String()
	}
	for i, u := range []string{"/v1/boards/t/top", "/v1/boards/t/top", "/v1/boards/t/top", "/v1/boards/t/top?limit=5"} {
		if code, _ := get(u); code != 200 {
			t.Fatalf("read %d (%s): %d", i, u, code)
		}
	}
	if n := gs.tops.Load(); n != 2 {
		t.Fatalf("%d store reads for two entries", n)
	}
	held := make(chan int, 1)
	go func() {
		code, _ := get("/v1/boards/t/top?limit=7")
		held <- code
	}()
	<-gs.entered                  // the slot is taken
	clock.Add(int64(time.Second)) // both entries expire
	if code, body := get("/v1/boards/t/top"); code != 200 || !strings.Contains(body, `"raw":3`) {
		t.Errorf("refresh of the hot entry with the slot held: %d %s, want 200 with the third store read", code, body)
	}
	if code, body := get("/v1/boards/t/top?limit=5"); code != 503 || !strings.Contains(body, `"code":"timeout"`) {
		t.Errorf("refresh of an entry nobody else read, with the slot held: %d %s, want 503 timeout", code, body)
	}
	close(gs.gate)
	<-held // held past its own timeout: 503 timeout, or 200 if it ended first
}
