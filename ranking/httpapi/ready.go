package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Pinger checks a dependency (consumer.Pinger has the same method).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Background ping defaults (rankd run's readiness of Redis).
const (
	DefaultPingEvery   = 500 * time.Millisecond
	DefaultPingTimeout = time.Second
)

// BackgroundPing is a Pinger whose Ping answers at once with the result of
// the last check, made in the background (Run) every interval with a
// timeout. A readiness probe built on it never waits for the dependency:
// a Redis that hangs shows as "no answer within 1s" within one interval
// plus the timeout.
type BackgroundPing struct {
	p              Pinger
	every, timeout time.Duration

	mu  sync.Mutex
	err error
	at  time.Time // of the last completed check
}

// NewBackgroundPing returns the background check of p; until its first
// check completes (Run), Ping reports that it has not been checked.
func NewBackgroundPing(p Pinger, every, timeout time.Duration) *BackgroundPing {
	return &BackgroundPing{p: p, every: every, timeout: timeout, err: errors.New("not checked yet")}
}

// Run checks every interval until ctx is done.
func (b *BackgroundPing) Run(ctx context.Context) {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		b.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *BackgroundPing) check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	err := b.p.Ping(cctx)
	timedOut := cctx.Err() != nil
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil && timedOut && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (no answer within %s)", err, b.timeout)
	}
	b.mu.Lock()
	b.err, b.at = err, time.Now()
	b.mu.Unlock()
}

// Ping returns the last check's result, without waiting; a result older
// than two intervals plus the timeout (Run stopped, or stuck) is an error.
func (b *BackgroundPing) Ping(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.at.IsZero() {
		if age := time.Since(b.at); age > 2*b.every+b.timeout {
			return fmt.Errorf("not checked for %s", age.Round(time.Second))
		}
	}
	return b.err
}
