package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// MemberRank is one member's rank in a period, as Ranks reads it.
type MemberRank struct {
	Found bool
	Rank  int64 // in the requested mode; 0 when not Found
	// Approx marks a lower bound: a keep_top member outside the sorted set,
	// or a rolling period read before its prefill (Page.Complete).
	Approx bool
}

// MaxRanks is the most members one Ranks call takes: an Around page.
const MaxRanks = MaxLimit + 1

// Ranks returns the ranks in mode of members (at most MaxRanks) on a
// board+dims in a period ("current", "previous" or an id): the previous
// ranks a page's trend needs, for the whole page at once. Its Redis cost is
// bounded whatever the board and the members' places:
//
//   - row: one pipeline of a ZREVRANK (ZRANK on asc boards) per member;
//   - competition: ZMSCORE of the members, then one pipeline of a ZCOUNT per
//     distinct value;
//   - dense: ZMSCORE of the members, then one walk (dense.lua) over the
//     distinct values better than the worst of them, of at most the
//     context's budget of steps (WithDenseBudget; DenseWalkCap without one).
//     When the walk would need more, Ranks returns ErrTooExpensive.
//
// On keep_top boards an HMGET of the members' exact scores is added to the
// first pipeline. The pipelines are not one snapshot: an update between
// them may be reflected in some ranks and not others.
func (s *Store) Ranks(ctx context.Context, board string, dims []string, period string, members []string, mode RankMode) ([]MemberRank, error) {
	if len(members) > MaxRanks {
		return nil, fmt.Errorf("%w: %d members, want at most %d", ErrBadLimit, len(members), MaxRanks)
	}
	if err := mode.check(); err != nil {
		return nil, err
	}
	v, err := s.open(ctx, board, dims, period)
	if err != nil {
		return nil, err
	}
	out := make([]MemberRank, len(members))
	if len(members) == 0 {
		return out, nil
	}
	score, err := s.readMembers(ctx, v, members, mode, out)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Approx = out[i].Approx || (out[i].Found && v.partial)
	}
	if mode == RankRow {
		return out, nil
	}
	// the distinct values, best first
	value := make([]int64, len(members))
	var values []int64
	for i := range out {
		if out[i].Found {
			value[i], _ = v.st.codec.Decode(score[i])
			values = append(values, value[i])
		}
	}
	slices.Sort(values)
	values = slices.Compact(values)
	if v.desc() {
		slices.Reverse(values)
	}
	rank, err := s.valueRanks(ctx, v, values, mode)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Found {
			out[i].Rank = rank[value[i]]
		}
	}
	return out, nil
}

// readMembers reads, in one pipeline, where members stand in v: their
// row ranks (mode RankRow) or their scores (the other modes, ZMSCORE),
// and on keep_top boards their exact scores outside the sorted set. It
// sets out[i].Found, and Rank where it is known already (row mode; the
// set's size + 1, Approx, for a keep_top member outside the set), and
// returns the scores of the members found (none in row mode but those
// outside a keep_top set).
func (s *Store) readMembers(ctx context.Context, v *view, members []string, mode RankMode, out []MemberRank) ([]float64, error) {
	pipe := s.rdb.Pipeline()
	var pos []*redis.IntCmd
	var scores *redis.Cmd
	if mode == RankRow {
		pos = make([]*redis.IntCmd, len(members))
		for i, m := range members {
			pos[i] = v.queueRank(ctx, pipe, m)
		}
	} else {
		args := make([]any, 0, 2+len(members))
		args = append(args, "zmscore", v.key)
		for _, m := range members {
			args = append(args, m)
		}
		scores = pipe.Do(ctx, args...)
	}
	var card *redis.IntCmd
	var hashed *redis.SliceCmd
	if v.keepTop() {
		card = pipe.ZCard(ctx, v.key)
		hashed = pipe.HMGet(ctx, v.hashKey(), members...)
	}
	_, _ = pipe.Exec(ctx) // errors checked per command
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	score := make([]float64, len(members)) // of each member found
	if scores != nil {
		vals, err := scores.Slice()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", v.key, err)
		}
		if len(vals) != len(members) {
			return nil, fmt.Errorf("reading %s: ZMSCORE returned %d scores for %d members", v.key, len(vals), len(members))
		}
		for i, x := range vals {
			if score[i], out[i].Found, err = replyScore(x); err != nil {
				return nil, fmt.Errorf("reading %s: %w", v.key, err)
			}
		}
	} else {
		for i, c := range pos {
			idx, err := c.Result()
			switch {
			case err == nil:
				out[i] = MemberRank{Found: true, Rank: idx + 1}
			case !errors.Is(err, redis.Nil):
				return nil, fmt.Errorf("reading %s: %w", v.key, err)
			}
		}
	}
	if hashed == nil {
		return score, nil
	}
	n, err := card.Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", v.key, err)
	}
	hv, err := hashed.Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", v.hashKey(), err)
	}
	for i, x := range hv {
		if out[i].Found || x == nil {
			continue
		}
		sc, ok, err := replyScore(x)
		if err != nil || !ok {
			return nil, fmt.Errorf("reading %s: bad score %v: %v", v.hashKey(), x, err)
		}
		// outside the set: row mode's rank is the set's size + 1
		score[i], out[i] = sc, MemberRank{Found: true, Rank: n + 1, Approx: true}
	}
	return score, nil
}

// valueRanks returns the rank in mode (competition or dense) of each of
// values, distinct and best first: competition counts the members
// strictly better than each (one pipeline of a ZCOUNT per value), dense
// walks the distinct values better than the worst (denseRanks), within the
// context's budget or ErrTooExpensive.
func (s *Store) valueRanks(ctx context.Context, v *view, values []int64, mode RankMode) (map[int64]int64, error) {
	rank := make(map[int64]int64, len(values))
	switch {
	case len(values) == 0:
	case mode == RankCompetition:
		pipe := s.rdb.Pipeline()
		counts := make([]*redis.IntCmd, len(values))
		for i, x := range values {
			lo, hi := v.betterRange(x)
			counts[i] = pipe.ZCount(ctx, v.key, lo, hi)
		}
		_, _ = pipe.Exec(ctx)
		for i, c := range counts {
			n, err := c.Result()
			if err != nil {
				return nil, fmt.Errorf("counting %s: %w", v.key, err)
			}
			rank[values[i]] = n + 1
		}
	default:
		ranks, capped, err := s.denseRanks(ctx, v, values, true)
		if err != nil {
			return nil, err
		}
		if capped {
			return nil, fmt.Errorf("%w: dense ranks in %s on board %q lie beyond the distinct values a read may walk", ErrTooExpensive, v.p.ID, v.st.b.Name)
		}
		for i, x := range values {
			rank[x] = ranks[i]
		}
	}
	return rank, nil
}

// replyScore reads one element of a ZMSCORE or HMGET reply: nil (absent),
// a RESP3 double or a RESP2 string.
func replyScore(x any) (float64, bool, error) {
	switch x := x.(type) {
	case nil:
		return 0, false, nil
	case float64:
		return x, true, nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil, err
	}
	return 0, false, fmt.Errorf("unexpected score %T %v", x, x)
}
