package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rankd/rankd/ranking"
)

var unlockScript = mustScript("unlock.lua")

// ErrRolloverBusy is returned when another process holds a board's rollover
// lock for longer than the store waits.
var ErrRolloverBusy = errors.New("rollover in progress elsewhere")

// Rollover prefills the rolling boards of every dims of board up to and
// including the period containing at (run it ahead of a boundary with at in
// the next period). Each member is carried by one atomic chunk script, the
// next WithRolloverChunk members of S(k-1) in its order after a cursor (see
// rollover.lua), so no call blocks Redis for long.
// It is idempotent and resumable, and safe to call from several processes:
// a Redis lock with TTL (fenced by token inside every chunk) lets one do the
// work; the others skip that board+dims. Non-rolling boards are a no-op.
//
// The store New returns rolls the board's active generation and the
// one a replay builds, if any.
func (s *Store) Rollover(ctx context.Context, board string, at time.Time) error {
	if s.root != nil {
		return s.rollover(ctx, board, at)
	}
	g, err := s.cachedGen(ctx, board)
	if err != nil {
		return err
	}
	if err := s.view(g.Active).rollover(ctx, board, at); err != nil {
		return err
	}
	if g.Building >= 0 {
		return s.view(g.Building).rollover(ctx, board, at)
	}
	return nil
}

func (s *Store) rollover(ctx context.Context, board string, at time.Time) error {
	st, err := s.board(board)
	if err != nil {
		return err
	}
	if st.b.Window != ranking.WindowRolling {
		return nil
	}
	target := st.cal.At(at)
	var cursor uint64
	for {
		tags, next, err := s.rdb.SScan(ctx, s.dimsKey(board), cursor, "", 1000).Result()
		if err != nil {
			return fmt.Errorf("listing dims of %q: %w", board, err)
		}
		for _, tag := range tags {
			if _, err := s.rollTag(ctx, st, tag, target); err != nil {
				return fmt.Errorf("rolling %s over to %s: %w", tag, target.ID, err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// rollState is a stream's rollover bookkeeping read from its meta hash.
type rollState struct {
	head, rolled, st int64
	has              bool
	rollK            string
	cursor           string // where the prefill of period rollK stopped (rollover.lua)
}

func (s *Store) readRoll(ctx context.Context, tag string) (rollState, error) {
	v, err := s.rdb.HMGet(ctx, s.metaKey(tag), metaHead, metaRolled, metaST, metaRollK, metaRollCursor).Result()
	if err != nil {
		return rollState{}, err
	}
	var r rollState
	num := func(x any) int64 {
		str, _ := x.(string)
		f, _ := strconv.ParseFloat(str, 64)
		return int64(f)
	}
	if v[0] == nil || v[1] == nil {
		return r, nil
	}
	r.has = true
	r.head, r.rolled, r.st = num(v[0]), num(v[1]), num(v[2])
	r.rollK, _ = v[3].(string)
	r.cursor, _ = v[4].(string)
	return r, nil
}

// rollTag brings S(k) of one board+dims up to target. It reports false when
// another process holds the lock.
func (s *Store) rollTag(ctx context.Context, st *boardState, tag string, target ranking.Period) (bool, error) {
	r, err := s.readRoll(ctx, tag)
	if err != nil || !r.has || r.rolled >= target.Start.UnixMilli() {
		return true, err
	}
	lock := Key(s.prefix, tag, KindLock, "roll")
	token := newToken()
	ok, err := s.rdb.SetNX(ctx, lock, token, s.lockTTL).Result()
	if err != nil || !ok {
		return false, err
	}
	u := unlockArgs{key: lock, token: token}
	defer unlockScript.Run(context.WithoutCancel(ctx), s.rdb, u.keys(), u.add(nil)...)
	r, err = s.readRoll(ctx, tag) // re-read under the lock
	if err != nil {
		return false, err
	}
	cal, n := st.cal, st.b.Periods
	for k := cal.Next(cal.At(time.UnixMilli(r.rolled))); !k.Start.After(target.Start); k = cal.Next(k) {
		cursor := ""
		if r.rollK == k.ID {
			cursor = r.cursor
		}
		if err := s.rollPeriod(ctx, st, tag, lock, token, k, n, cursor, r.st); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (s *Store) rollPeriod(ctx context.Context, st *boardState, tag, lock, token string, k ranking.Period, n int, cursor string, streamMs int64) error {
	cal := st.cal
	prev := cal.Prev(k)
	first := cal.WindowStart(k, n) // start of S(k)'s window, P(k-N+1)
	old := cal.Prev(first)         // P(k-N)
	mids := []string{}
	for p := first; p.Start.Before(k.Start); p = cal.Next(p) {
		mids = append(mids, Key(s.prefix, tag, KindPeriod, p.ID))
	}
	sPrev := Key(s.prefix, tag, KindRolling, prev.ID)
	ttl := int64(0)
	if st.retMs > 0 {
		ttl = max(endMs(k)+st.retMs-max(streamMs, k.Start.UnixMilli()), st.graceMs, 1000)
	}
	unit := st.unitMs
	ra := rolloverArgs{lockKey: lock, token: token, lockTTLMs: s.lockTTL.Milliseconds(),
		kStartMs: k.Start.UnixMilli(), kID: k.ID,
		sPrev: sPrev, sK: Key(s.prefix, tag, KindRolling, k.ID), pOld: Key(s.prefix, tag, KindPeriod, old.ID), pNew: Key(s.prefix, tag, KindPeriod, k.ID),
		sTTLMs: ttl, tie: st.tieMode, tieBits: st.codec.TieBits, wbPrevQ: ranking.FloorDiv(old.Start.UnixMilli(), unit),
		wbQ: ranking.FloorDiv(first.Start.UnixMilli(), unit), pNewQ: ranking.FloorDiv(k.Start.UnixMilli(), unit), mids: mids}
	// run runs one call: count 0 raises the head only; otherwise one
	// chunk after cursor. It returns the cursor after the chunk ("": S(k)
	// is complete).
	run := func(raise bool, count int, cur string) (string, error) {
		ra.raise, ra.count, ra.cursor = raise, count, cur
		res, err := rolloverScript.Run(ctx, s.rdb, []string{s.metaKey(tag)}, ra.add(make([]any, 0, len(rolloverFields)+len(mids)))...).Slice()
		if err != nil {
			return "", err
		}
		next, ok := "", len(res) == 2
		if ok {
			next, ok = res[1].(string)
		}
		if !ok {
			return "", fmt.Errorf("rollover: unexpected reply %v", res)
		}
		return next, nil
	}
	// Raise head first: from now on every event of period k-1 also maintains
	// S(k), so members that appear or move in S(k-1) during the walk are
	// covered.
	if _, err := run(true, 0, cursor); err != nil {
		return err
	}
	for {
		next, err := run(false, s.chunk, cursor)
		if err != nil || next == "" {
			return err
		}
		cursor = next
	}
}

// ensureRolled makes S(k) complete before it is read: it rolls over itself or
// waits for the process holding the lock.
func (s *Store) ensureRolled(ctx context.Context, st *boardState, tag string, k ranking.Period) error {
	deadline := time.Now().Add(s.rollWait)
	for {
		done, err := s.rollTag(ctx, st, tag, k)
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return ErrRolloverBusy
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// prefilled reports whether S(k) of a board+dims is complete without a
// prefill: the prefill of k has run, or the stream has no rollover state
// (no data). It writes nothing.
func (s *Store) prefilled(ctx context.Context, tag string, k ranking.Period) (bool, error) {
	r, err := s.readRoll(ctx, tag)
	if err != nil {
		return false, fmt.Errorf("reading the rollover state of %s: %w", tag, err)
	}
	return !r.has || r.rolled >= k.Start.UnixMilli(), nil
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
