package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// RankMode says how equal values are ranked. Whatever the mode, entries are
// listed in sorted-set order (value, then tiebreak).
type RankMode int

const (
	// RankRow ranks by position: 1, 2, 3, 4 (the default).
	RankRow RankMode = iota
	// RankCompetition gives equal decoded values the same rank, 1 + the
	// number of members with a strictly better value: 1, 2, 2, 4.
	RankCompetition
	// RankDense gives equal decoded values the same rank, 1 + the number of
	// distinct strictly better values: 1, 2, 2, 3.
	RankDense
)

// ParseRankMode parses "row" (or ""), "competition" or "dense".
func ParseRankMode(s string) (RankMode, error) {
	switch s {
	case "", "row":
		return RankRow, nil
	case "competition":
		return RankCompetition, nil
	case "dense":
		return RankDense, nil
	}
	return 0, fmt.Errorf("%w %q: want row, competition or dense", ErrBadRankMode, s)
}

func (m RankMode) String() string {
	switch m {
	case RankRow:
		return "row"
	case RankCompetition:
		return "competition"
	case RankDense:
		return "dense"
	}
	return fmt.Sprintf("rankmode(%d)", int(m))
}

func (m RankMode) check() error {
	if m < RankRow || m > RankDense {
		return fmt.Errorf("%w %d", ErrBadRankMode, int(m))
	}
	return nil
}

// standing is a member's place on one view.
type standing struct {
	found  bool
	e      Entry // Rank in the requested mode
	approx bool
	capped bool // the dense walk stopped at its budget (approx is set too)
	above  *Entry
	count  int64
}

func (v *view) queueRank(ctx context.Context, pipe redis.Pipeliner, member string) *redis.IntCmd {
	if v.desc() {
		return pipe.ZRevRank(ctx, v.key, member)
	}
	return pipe.ZRank(ctx, v.key, member)
}

// standing reads a member's place on v. withAbove also reads the member
// ranked above it; strict marks a previous-period read (see walkCap).
func (s *Store) standing(ctx context.Context, v *view, member string, mode RankMode, withAbove, strict bool) (standing, error) {
	pipe := s.rdb.TxPipeline()
	sc := pipe.ZScore(ctx, v.key, member)
	pos := v.queueRank(ctx, pipe, member)
	sz := v.queueSizes(ctx, pipe)
	var hs *redis.StringCmd
	if v.keepTop() {
		hs = pipe.HGet(ctx, v.hashKey(), member)
	}
	_, _ = pipe.Exec(ctx) // errors checked per command
	var out standing
	card, count, _, err := sz.result()
	if err != nil {
		return out, fmt.Errorf("reading %s: %w", v.key, err)
	}
	out.count = count
	var score float64
	var row int64
	idx, err := pos.Result()
	switch {
	case err == nil:
		if score, err = sc.Result(); err != nil {
			return out, fmt.Errorf("reading %s: %w", v.key, err)
		}
		row = idx + 1
	case !errors.Is(err, redis.Nil):
		return out, fmt.Errorf("reading %s: %w", v.key, err)
	case hs != nil && hs.Err() == nil:
		score, row, out.approx = parseScore(hs.Val()), card+1, true
	case hs != nil && !errors.Is(hs.Err(), redis.Nil):
		return out, fmt.Errorf("reading %s: %w", v.hashKey(), hs.Err())
	default:
		return out, nil
	}
	out.found = true
	out.approx = out.approx || v.partial
	out.e = v.st.entry(member, score, row)
	if mode != RankRow {
		r, capped, err := s.valueRank(ctx, v, out.e.Value, mode, strict)
		if err != nil {
			return out, err
		}
		out.e.Rank, out.approx, out.capped = r, out.approx || capped, capped
	}
	if !withAbove {
		return out, nil
	}
	var zs []redis.Z
	switch {
	case mode == RankRow && row > 1:
		zs, err = s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: v.key, Start: row - 2, Stop: row - 2, Rev: v.desc()}).Result()
	case mode == RankRow:
	case v.desc(): // the lowest score of a strictly better value
		zs, err = s.rdb.ZRangeByScoreWithScores(ctx, v.key, &redis.ZRangeBy{Min: scoreArg(v.st.valueEnd(out.e.Value)), Max: "+inf", Count: 1}).Result()
	default:
		zs, err = s.rdb.ZRevRangeByScoreWithScores(ctx, v.key, &redis.ZRangeBy{Min: "-inf", Max: "(" + scoreArg(v.st.valueStart(out.e.Value)), Count: 1}).Result()
	}
	if err != nil {
		return out, fmt.Errorf("reading %s: %w", v.key, err)
	}
	if len(zs) > 0 {
		e := v.st.entry(zs[0].Member.(string), zs[0].Score, 0)
		out.above = &e
	}
	return out, nil
}

// valueRank returns the competition or dense rank of a decoded value on a
// view's sorted set, and whether it is only a lower bound: a dense walk that
// stopped at its cap (see WithDenseBudget).
func (s *Store) valueRank(ctx context.Context, v *view, value int64, mode RankMode, strict bool) (int64, bool, error) {
	if mode == RankCompetition {
		lo, hi := v.betterRange(value)
		n, err := s.rdb.ZCount(ctx, v.key, lo, hi).Result()
		if err != nil {
			return 0, false, fmt.Errorf("counting %s: %w", v.key, err)
		}
		return n + 1, false, nil
	}
	ranks, capped, err := s.denseRanks(ctx, v, []int64{value}, strict)
	if err != nil {
		return 0, false, err
	}
	return ranks[0], capped, nil
}

// betterRange returns the ZCOUNT bounds of the scores of values strictly
// better than value.
func (v *view) betterRange(value int64) (lo, hi string) {
	if v.desc() {
		return scoreArg(v.st.valueEnd(value)), "+inf"
	}
	return "-inf", "(" + scoreArg(v.st.valueStart(value))
}

// denseRanks returns the dense ranks of distinct decoded values, best
// first, with one walk (dense.lua) of at most the context's budget of steps
// (see walkCap; DenseWalkCap without a budget). capped reports that the
// walk stopped before the last value: the ranks it did not reach are lower
// bounds. A strict walk (previous-period ranks) first counts the members
// better than the worst value, and the span of values from the best to it:
// when both exceed the budget it reports
// capped without walking (ranks 1, meaningless), so that a refusal costs
// one O(log n) command.
func (s *Store) denseRanks(ctx context.Context, v *view, values []int64, strict bool) (ranks []int64, capped bool, err error) {
	steps, budget := walkCap(ctx, strict)
	if strict && len(values) > 0 {
		// Before any walk: the walk passes at most the members strictly
		// better than the worst value (one ZCOUNT). When they are more
		// than the budget, the walk might not fit: refuse without walking.
		// The distinct values are also at most the span from the best
		// value to the worst target (ties: a few values, many members).
		worst := values[len(values)-1]
		lo, hi := v.betterRange(worst)
		pipe := s.rdb.Pipeline()
		count := pipe.ZCount(ctx, v.key, lo, hi)
		best := pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: v.key, Start: 0, Stop: 0, Rev: v.desc()})
		_, _ = pipe.Exec(ctx) // errors checked per command
		n, err := count.Result()
		if err != nil {
			return nil, false, fmt.Errorf("counting %s: %w", v.key, err)
		}
		top, err := best.Result()
		if err != nil {
			return nil, false, fmt.Errorf("reading %s: %w", v.key, err)
		}
		if len(top) > 0 {
			bv, _ := v.st.codec.Decode(top[0].Score)
			n = min(n, max(bv-worst, worst-bv))
		}
		if n > steps {
			ranks = make([]int64, len(values))
			for i := range ranks {
				ranks[i] = 1
			}
			return ranks, true, nil
		}
	}
	a := denseArgs{key: v.key, tieBits: v.st.codec.TieBits, asc: !v.desc(), cap: steps, values: values}
	res, err := denseScript.Run(ctx, s.rdb, a.keys(), a.add(nil)...).Int64Slice()
	if err != nil {
		return nil, false, fmt.Errorf("dense rank on %s: %w", v.key, err)
	}
	if len(res) != 2+len(values) {
		return nil, false, fmt.Errorf("dense rank on %s: script returned %v", v.key, res)
	}
	budget.spend(res[0])
	addDense(ctx, res[0])
	return res[2:], res[1] == 1, nil
}

// rankEntries sets the ranks of consecutive entries in mode, given the first
// entry's rank; Rank holds the row rank on entry.
func rankEntries(es []Entry, mode RankMode, first int64) {
	if mode == RankRow || len(es) == 0 {
		return
	}
	prev := es[0]
	es[0].Rank = first
	for i := 1; i < len(es); i++ {
		row := es[i].Rank
		switch {
		case es[i].Value == prev.Value:
			es[i].Rank = es[i-1].Rank
		case mode == RankCompetition:
			es[i].Rank = row
		default:
			es[i].Rank = es[i-1].Rank + 1
		}
		prev = es[i]
	}
}

func (st *boardState) entry(member string, score float64, rank int64) Entry {
	v, t := st.codec.Decode(score)
	return Entry{Member: member, Value: v, Tie: t, Score: score, Rank: rank}
}

// valueStart and valueEnd bound the scores of a decoded value:
// [value * 2^TieBits, (value+1) * 2^TieBits).
func (st *boardState) valueStart(value int64) int64 { return value << st.codec.TieBits }
func (st *boardState) valueEnd(value int64) int64   { return (value + 1) << st.codec.TieBits }

// scoreArg formats an integer score exactly (|x| <= 2^53) for Redis.
func scoreArg(x int64) string { return fmt.Sprintf("%.17g", float64(x)) }
