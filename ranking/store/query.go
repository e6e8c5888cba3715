package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

// ErrBadPeriod is returned for a period that is not "current", "previous" or
// a valid period id of the board.
var ErrBadPeriod = errors.New("bad period")

// ResolvePeriod turns "current", "previous" (or "") or a period id into a
// Period of the board, using the store's clock for current.
func (s *Store) ResolvePeriod(board, period string) (ranking.Period, error) {
	st, err := s.board(board)
	if err != nil {
		return ranking.Period{}, err
	}
	return s.resolve(st, period)
}

// Now returns the time of the store's clock (WithClock): the instant
// "current" periods are resolved at.
func (s *Store) Now() time.Time { return s.now() }

func (s *Store) resolve(st *boardState, period string) (ranking.Period, error) {
	cur := st.cal.At(s.now())
	switch period {
	case "", "current":
		return cur, nil
	case "previous":
		return st.cal.Prev(cur), nil
	}
	p, err := st.cal.Parse(period)
	if err != nil {
		return ranking.Period{}, fmt.Errorf("%w %q for board %q: %v", ErrBadPeriod, period, st.b.Name, err)
	}
	return p, nil
}

// zkey returns the visible sorted set of a board+dims and period. For a
// rolling board whose period p has started it first completes S(p) (rolls
// over itself or waits for the process that does), so that reading the
// current period is exact even if the rollover timer is late. A period that
// has not started is only read, never prefilled (unless prefill is set):
// partial then reports that the timer's prefill of S(p) has not run, so
// members carried from S(p-1) may be missing.
func (s *Store) zkey(ctx context.Context, st *boardState, tag string, p ranking.Period, prefill bool) (key string, partial bool, err error) {
	switch st.b.Window {
	case ranking.WindowTotal:
		return Key(s.prefix, tag, KindTotal, PeriodAll), false, nil
	case ranking.WindowPeriodic:
		return Key(s.prefix, tag, KindPeriod, p.ID), false, nil
	}
	key = Key(s.prefix, tag, KindRolling, p.ID)
	if !prefill && p.Start.After(s.now()) {
		done, err := s.prefilled(ctx, tag, p)
		return key, !done, err
	}
	if err := s.ensureRolled(ctx, st, tag, p); err != nil {
		return "", false, err
	}
	return key, false, nil
}

func (s *Store) checkDims(st *boardState, dims []string) error {
	if len(dims) != len(st.b.Dims) {
		return fmt.Errorf("%w: board %q needs %d dims values %v, got %d", ErrBadDims, st.b.Name, len(st.b.Dims), st.b.Dims, len(dims))
	}
	return nil
}

// ErrBadDims is returned when dims values do not match the board's dims.
var ErrBadDims = errors.New("bad dims")

// Entries returns the whole visible board (for rolling boards S(k)) of one
// dims and period ("current", "previous" or an id), in rank order. It reads
// every member, for checks and tools rather than the API, and it completes
// the prefill of a rolling period even before the period starts.
func (s *Store) Entries(ctx context.Context, board string, dims []string, period string) ([]Entry, error) {
	v, err := s.openFull(ctx, board, dims, period, true)
	if err != nil {
		return nil, err
	}
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: v.key, Start: 0, Stop: -1, Rev: v.desc()}).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", v.key, err)
	}
	return v.entries(zs, 1), nil
}

func (v *view) entries(zs []redis.Z, firstRank int64) []Entry {
	out := make([]Entry, len(zs))
	for i, z := range zs {
		val, t := v.st.codec.Decode(z.Score)
		out[i] = Entry{Member: z.Member.(string), Value: val, Tie: t, Score: z.Score, Rank: firstRank + int64(i),
			TieTime: v.st.tieTime(v.p, t)}
	}
	return out
}

// window returns the span of event times that period p of the board
// covers: p itself, or on a rolling board the N periods ending with p.
func (st *boardState) window(p ranking.Period) (start, end time.Time) {
	if st.b.Window == ranking.WindowRolling {
		return st.cal.WindowStart(p, st.b.Periods).Start, p.End
	}
	return p.Start, p.End
}

// tieTime returns the time tie offset t stands for in period p (zero on
// boards without tiebreak): t tie units after the period's (rolling:
// window's; total: the tie epoch's) start, quantized to the unit.
func (st *boardState) tieTime(p ranking.Period, t int64) time.Time {
	if st.tieMode == luaTieNone {
		return time.Time{}
	}
	base := st.epochMs
	if st.b.Window != ranking.WindowTotal {
		start, _ := st.window(p)
		base = start.UnixMilli()
	}
	return time.UnixMilli(ranking.FloorDiv(base, st.unitMs)*st.unitMs + t*st.unitMs).UTC()
}

func parseScore(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// Entry is one member of a board as stored.
type Entry struct {
	Member string
	Value  int64   // decoded fixed-point value
	Tie    int64   // tie offset in TieUnit from the period/window base (0 without tiebreak)
	Score  float64 // raw encoded score
	Rank   int64   // 1-based row rank
	// TieTime is the time Tie stands for (the tie unit's start), zero on
	// boards without tiebreak.
	TieTime time.Time
}

// Queries for the HTTP API: Top, Member, Around and Count. Each reads one
// board+dims and period; the first round trip of each is a MULTI/EXEC, so the
// listing, the member's position and the counts come from one snapshot.

// MaxLimit is the largest page Top returns; Around takes n <= MaxLimit/2.
const MaxLimit = 1000

// denseWalkCap bounds the distinct values the dense rank walk visits.
const denseWalkCap = 10000

var denseScript = mustScript("dense.lua")

var (
	// ErrMemberNotFound is returned by Around for a member absent from the
	// board.
	ErrMemberNotFound = errors.New("member not found")
	// ErrBadLimit is returned for a Top limit outside [1, MaxLimit] or an
	// Around n outside [0, MaxLimit/2].
	ErrBadLimit = errors.New("bad limit")
	// ErrBadRankMode is returned for an unknown rank mode.
	ErrBadRankMode = errors.New("bad rank mode")
)

// Page is a slice of a board in rank order, with Entry.Rank in the requested
// RankMode.
type Page struct {
	Board  string
	Dims   []string
	Period ranking.Period
	// WindowStart and WindowEnd bound the event times the page counts:
	// the period's, or on a rolling board the N periods ending with it.
	WindowStart, WindowEnd time.Time
	Count                  int64 // members of the board (keep_top: also those trimmed from the set)
	Entries                []Entry
	// Complete is false on a keep_top board whose sorted set was trimmed:
	// members exist beyond it that no page lists; and on a rolling period
	// that has not started, read before the rollover timer prefilled it:
	// members carried over from the period before are missing.
	Complete bool
	// RankApprox is true when some ranks are lower bounds: a keep_top member
	// outside the set, a dense walk that hit its cap (see WithDenseBudget),
	// or entries of a rolling period read before its prefill.
	RankApprox bool
}

// MemberInfo is one member's standing on a board.
type MemberInfo struct {
	Member string
	Found  bool
	Value  int64 // decoded value
	Tie    int64 // tie offset (see Entry.Tie)
	// TieTime is the time Tie stands for (see Entry.TieTime).
	TieTime time.Time
	Score   float64 // raw encoded score
	// Rank is 1-based in the requested mode. RankApprox marks a lower bound:
	// a keep_top member outside the set (row mode: set size + 1), or a dense
	// rank beyond the walk's cap.
	Rank       int64
	RankApprox bool
	// PrevRank is the member's rank, same mode, in the period before Period;
	// PrevFound is false (and PrevRank 0) when it is absent there. Total
	// boards have no previous period.
	PrevRank  int64
	PrevFound bool
	// Gap is |value(Above) - Value|; Above is the member ranked just above:
	// the previous row in RankRow mode (possibly an equal value), the nearest
	// member with a strictly better value in the other modes. Both are zero
	// for rank 1.
	Gap    int64
	Above  string
	Period ranking.Period
	Count  int64 // members of the board, as in Page.Count
	// Better is the number of members with a strictly better decoded value
	// (the competition rank - 1, whatever the mode): a lower bound when
	// RankApprox is set on a keep_top member outside the set. See
	// Percentile.
	Better int64
}

// view is one resolved board+dims+period and its sorted set.
type view struct {
	s    *Store // of the board's active generation
	st   *boardState
	dims []string
	p    ranking.Period
	key  string
	// partial: a rolling period that has not started and whose prefill has
	// not run (see zkey).
	partial bool
}

func (s *Store) open(ctx context.Context, board string, dims []string, period string) (*view, error) {
	return s.openFull(ctx, board, dims, period, false)
}

// openFull is open; with prefill a rolling period is completed even before
// it starts.
func (s *Store) openFull(ctx context.Context, board string, dims []string, period string, prefill bool) (*view, error) {
	st, err := s.board(board)
	if err != nil {
		return nil, err
	}
	if err := s.checkDims(st, dims); err != nil {
		return nil, err
	}
	p, err := s.resolve(st, period)
	if err != nil {
		return nil, err
	}
	// Parameters are checked before Redis is asked for the board's
	// active generation.
	gs, err := s.reader(ctx, board)
	if err != nil {
		return nil, err
	}
	key, partial, err := gs.zkey(ctx, st, Tag(board, dims), p, prefill)
	if err != nil {
		return nil, err
	}
	return &view{st: st, dims: dims, p: p, key: key, s: gs, partial: partial}, nil
}

func (v *view) desc() bool      { return v.st.b.Order == ranking.Desc }
func (v *view) keepTop() bool   { return v.st.b.KeepTop > 0 }
func (v *view) hashKey() string { return v.key + suffixExact }

func (v *view) page() Page {
	ws, we := v.st.window(v.p)
	return Page{Board: v.st.b.Name, Dims: slices.Clone(v.dims), Period: v.p, WindowStart: ws, WindowEnd: we, Complete: !v.partial}
}

// finish marks the ranks of a page of a partial view as lower bounds.
func (v *view) finish(pg *Page) {
	if v.partial && len(pg.Entries) > 0 {
		pg.RankApprox = true
	}
}

// sizes are the queued size commands of a view.
type sizes struct {
	card, hlen *redis.IntCmd
}

func (v *view) queueSizes(ctx context.Context, pipe redis.Pipeliner) sizes {
	sz := sizes{card: pipe.ZCard(ctx, v.key)}
	if v.keepTop() {
		sz.hlen = pipe.HLen(ctx, v.hashKey())
	}
	return sz
}

// result returns the set size, the member count and whether the set holds
// every member.
func (sz sizes) result() (card, count int64, complete bool, err error) {
	if card, err = sz.card.Result(); err != nil {
		return 0, 0, false, err
	}
	if sz.hlen == nil {
		return card, card, true, nil
	}
	n, err := sz.hlen.Result()
	if err != nil {
		return 0, 0, false, err
	}
	return card, max(n, card), n <= card, nil
}

// Count returns the number of members of a board+dims in a period (keep_top
// boards: also those trimmed from the sorted set).
func (s *Store) Count(ctx context.Context, board string, dims []string, period string) (int64, error) {
	v, err := s.open(ctx, board, dims, period)
	if err != nil {
		return 0, err
	}
	pipe := s.rdb.TxPipeline()
	sz := v.queueSizes(ctx, pipe)
	_, _ = pipe.Exec(ctx) // errors checked per command
	_, n, _, err := sz.result()
	if err != nil {
		return 0, fmt.Errorf("counting %s: %w", v.key, err)
	}
	return n, nil
}

// Top returns the first limit (1..MaxLimit) members of a board+dims in a
// period ("current", "previous" or an id).
func (s *Store) Top(ctx context.Context, board string, dims []string, period string, limit int, mode RankMode) (Page, error) {
	if limit < 1 || limit > MaxLimit {
		return Page{}, fmt.Errorf("%w %d: want 1..%d", ErrBadLimit, limit, MaxLimit)
	}
	if err := mode.check(); err != nil {
		return Page{}, err
	}
	v, err := s.open(ctx, board, dims, period)
	if err != nil {
		return Page{}, err
	}
	pipe := s.rdb.TxPipeline()
	rng := pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: v.key, Start: 0, Stop: limit - 1, Rev: v.desc()})
	sz := v.queueSizes(ctx, pipe)
	_, _ = pipe.Exec(ctx) // errors checked per command
	pg := v.page()
	if _, pg.Count, pg.Complete, err = sz.result(); err != nil {
		return Page{}, fmt.Errorf("reading %s: %w", v.key, err)
	}
	pg.Complete = pg.Complete && !v.partial
	zs, err := rng.Result()
	if err != nil {
		return Page{}, fmt.Errorf("reading %s: %w", v.key, err)
	}
	pg.Entries = v.entries(zs, 1)
	rankEntries(pg.Entries, mode, 1) // nothing ranks above the first entry
	v.finish(&pg)
	return pg, nil
}

// Around returns the member with n (0..MaxLimit/2) members above and n below;
// near an edge the window extends on the other side, so it holds
// min(2n+1, count) entries. A keep_top member outside the set comes last,
// after the set's last 2n members, with an approximate rank. A member absent
// from the board gives ErrMemberNotFound.
func (s *Store) Around(ctx context.Context, board string, dims []string, member, period string, n int, mode RankMode) (Page, error) {
	if n < 0 || n > MaxLimit/2 {
		return Page{}, fmt.Errorf("%w %d: want 0..%d", ErrBadLimit, n, MaxLimit/2)
	}
	if err := mode.check(); err != nil {
		return Page{}, err
	}
	v, err := s.open(ctx, board, dims, period)
	if err != nil {
		return Page{}, err
	}
	pipe := s.rdb.TxPipeline()
	pos := v.queueRank(ctx, pipe, member)
	sz := v.queueSizes(ctx, pipe)
	var hs *redis.StringCmd
	if v.keepTop() {
		hs = pipe.HGet(ctx, v.hashKey(), member)
	}
	_, _ = pipe.Exec(ctx) // errors checked per command
	pg := v.page()
	card := int64(0)
	if card, pg.Count, pg.Complete, err = sz.result(); err != nil {
		return Page{}, fmt.Errorf("reading %s: %w", v.key, err)
	}
	pg.Complete = pg.Complete && !v.partial
	var outside *Entry // keep_top member trimmed from the set
	idx, err := pos.Result()
	switch {
	case err == nil:
	case !errors.Is(err, redis.Nil):
		return Page{}, fmt.Errorf("reading %s: %w", v.key, err)
	case hs != nil && hs.Err() == nil:
		e := v.st.entry(member, parseScore(hs.Val()), card+1)
		outside, idx = &e, card
	case hs != nil && !errors.Is(hs.Err(), redis.Nil):
		return Page{}, fmt.Errorf("reading %s: %w", v.hashKey(), hs.Err())
	default:
		return Page{}, fmt.Errorf("%w: %q on board %q", ErrMemberNotFound, member, board)
	}
	total := card
	if outside != nil {
		total++
	}
	lo, hi := window(idx, int64(n), total)
	if outside != nil {
		hi-- // the last row is the outside member
	}
	if lo <= hi {
		zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: v.key, Start: lo, Stop: hi, Rev: v.desc()}).Result()
		if err != nil {
			return Page{}, fmt.Errorf("reading %s: %w", v.key, err)
		}
		pg.Entries = v.entries(zs, lo+1)
	}
	if outside != nil {
		pg.Entries = append(pg.Entries, *outside)
		pg.RankApprox = true
	}
	v.finish(&pg)
	if len(pg.Entries) == 0 || mode == RankRow {
		return pg, nil
	}
	first, approx, err := s.valueRank(ctx, v, pg.Entries[0].Value, mode, false)
	if err != nil {
		return Page{}, err
	}
	pg.RankApprox = pg.RankApprox || approx
	rankEntries(pg.Entries, mode, first)
	return pg, nil
}

// window returns the rows [lo, hi] of n rows each side of idx among total,
// shifted inwards at the edges.
func window(idx, n, total int64) (lo, hi int64) {
	lo, hi = idx-n, idx+n
	if lo < 0 {
		hi, lo = hi-lo, 0
	}
	if hi > total-1 {
		lo, hi = lo-(hi-(total-1)), total-1
	}
	return max(lo, 0), hi
}

// Member returns a member's standing in a period and its rank in the
// previous one. An absent member is not an error: Found is false. A dense
// previous rank beyond the walk's budget (WithDenseBudget) is
// ErrTooExpensive.
func (s *Store) Member(ctx context.Context, board string, dims []string, member, period string, mode RankMode) (MemberInfo, error) {
	if err := mode.check(); err != nil {
		return MemberInfo{}, err
	}
	v, err := s.open(ctx, board, dims, period)
	if err != nil {
		return MemberInfo{}, err
	}
	cur, err := s.standing(ctx, v, member, mode, true, false)
	if err != nil {
		return MemberInfo{}, err
	}
	info := MemberInfo{
		Member: member, Found: cur.found, Value: cur.e.Value, Tie: cur.e.Tie, TieTime: v.st.tieTime(v.p, cur.e.Tie), Score: cur.e.Score,
		Rank: cur.e.Rank, RankApprox: cur.approx, Period: v.p, Count: cur.count,
	}
	if cur.found {
		if mode == RankCompetition {
			info.Better = cur.e.Rank - 1
		} else if info.Better, _, err = s.valueRank(ctx, v, cur.e.Value, RankCompetition, false); err != nil {
			return MemberInfo{}, err
		} else {
			info.Better--
		}
	}
	if cur.above != nil {
		info.Above = cur.above.Member
		info.Gap = cur.above.Value - cur.e.Value
		if info.Gap < 0 {
			info.Gap = -info.Gap
		}
	}
	if v.st.b.Window == ranking.WindowTotal {
		return info, nil
	}
	pp := v.st.cal.Prev(v.p)
	pkey, partial, err := v.s.zkey(ctx, v.st, Tag(board, dims), pp, false)
	if err != nil {
		return MemberInfo{}, err
	}
	prev, err := s.standing(ctx, &view{st: v.st, dims: dims, p: pp, key: pkey, partial: partial}, member, mode, false, true)
	if err != nil {
		return MemberInfo{}, err
	}
	if prev.capped {
		return MemberInfo{}, fmt.Errorf("%w: the dense rank of %q in %s lies beyond the distinct values a read may walk", ErrTooExpensive, member, pp.ID)
	}
	info.PrevFound, info.PrevRank = prev.found, prev.e.Rank
	return info, nil
}
