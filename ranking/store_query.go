package ranking

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ErrBadPeriod is returned for a period that is not "current", "previous" or
// a valid period id of the board.
var ErrBadPeriod = errors.New("bad period")

// ResolvePeriod turns "current", "previous" (or "") or a period id into a
// Period of the board, using the store's clock for current.
func (s *Store) ResolvePeriod(board, period string) (Period, error) {
	st, err := s.board(board)
	if err != nil {
		return Period{}, err
	}
	return s.resolve(st, period)
}

func (s *Store) resolve(st *boardState, period string) (Period, error) {
	cur := st.cal.At(s.now())
	switch period {
	case "", "current":
		return cur, nil
	case "previous":
		return st.cal.Prev(cur), nil
	}
	p, err := st.cal.Parse(period)
	if err != nil {
		return Period{}, fmt.Errorf("%w %q for board %q: %v", ErrBadPeriod, period, st.b.Name, err)
	}
	return p, nil
}

// zkey returns the visible sorted set of a board+dims and period; for rolling
// boards it first makes sure the rolling board is complete.
func (s *Store) zkey(ctx context.Context, st *boardState, tag string, p Period) (string, error) {
	switch st.b.Window {
	case WindowTotal:
		return Key(s.prefix, tag, "t", "all"), nil
	case WindowPeriodic:
		return Key(s.prefix, tag, "p", p.ID), nil
	}
	if err := s.ensureRolled(ctx, st, tag, p); err != nil {
		return "", err
	}
	return Key(s.prefix, tag, "r", p.ID), nil
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
// dims and period ("current", "previous" or an id), in rank order.
func (s *Store) Entries(ctx context.Context, board string, dims []string, period string) ([]Entry, error) {
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
	key, err := s.zkey(ctx, st, Tag(board, dims), p)
	if err != nil {
		return nil, err
	}
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: 0, Stop: -1, Rev: st.b.Order == Desc}).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	return st.entries(zs, 1), nil
}

func (st *boardState) entries(zs []redis.Z, firstRank int64) []Entry {
	out := make([]Entry, len(zs))
	for i, z := range zs {
		v, t := st.codec.Decode(z.Score)
		out[i] = Entry{Member: z.Member.(string), Value: v, Tie: t, Score: z.Score, Rank: firstRank + int64(i)}
	}
	return out
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
}
