package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rankd/rankd/ranking"
)

// Discovering a board's dims values: KnownDims asks the dims registry
// (store_dims.go) of the board's active generation whether a tag exists,
// ListDims pages through it with the member count of each tag in a period.

// ErrUnknownDims is returned by KnownDims for dims values the board has
// never seen (or whose data expired and was pruned).
var ErrUnknownDims = errors.New("unknown dims")

// ErrBadCursor is returned by ListDims for a cursor it did not hand out.
var ErrBadCursor = errors.New("bad cursor")

// KnownDims returns nil when the dims values of a board with dims are in
// the dims registry of its active generation (one SISMEMBER), and an error
// wrapping ErrUnknownDims when they are not. Boards without dims are always
// known (no Redis command). The registry has a tag from the first write to
// it until PruneDims removes it after its data expired; a tag written again
// after being pruned is registered again within a minute (see reregister).
func (s *Store) KnownDims(ctx context.Context, board string, dims []string) error {
	st, err := s.board(board)
	if err != nil {
		return err
	}
	if err := s.checkDims(st, dims); err != nil {
		return err
	}
	if len(st.b.Dims) == 0 {
		return nil
	}
	gs, err := s.reader(ctx, board)
	if err != nil {
		return err
	}
	ok, err := gs.rdb.SIsMember(ctx, gs.dimsKey(board), Tag(board, dims)).Result()
	if err != nil {
		return fmt.Errorf("reading dims of %q: %w", board, err)
	}
	if !ok {
		return fmt.Errorf("%w: board %q has no data for dims %q", ErrUnknownDims, board, dims)
	}
	return nil
}

// DimsCount is one dims value of a board and its member count in a period.
type DimsCount struct {
	Dims  []string // in the board's Dims order
	Count int64    // members (keep_top: also those trimmed from the set)
}

// DimsPage is one page of ListDims.
type DimsPage struct {
	Board  string
	Period ranking.Period
	Dims   []DimsCount
	// Next is the cursor of the next page; "" when the listing is done.
	Next string
}

const (
	// MaxDimsLimit is the largest page of ListDims.
	MaxDimsLimit = 1000
	// MaxDimsScan is the most registry tags one ListDims call looks at
	// (half as many on keep_top boards, which need two commands a tag).
	MaxDimsScan = 1000
	// dimsScanCount is the COUNT hint of every SSCAN of ListDims. It is
	// fixed so that a resumed scan of the same cursor returns the same
	// batch of tags.
	dimsScanCount = 100
	// maxDimsScans is the most SSCAN calls of one ListDims call.
	maxDimsScans = 20
)

// ListDims returns up to limit (1..MaxDimsLimit) of the dims values of a
// board in a period ("current", "previous" or an id) whose sorted set
// exists, with their member counts, starting at cursor ("" for the first
// page). It walks the board's dims registry (of its active generation) with
// SSCAN, in batches of a fixed COUNT hint, sorting each batch by tag; each
// batch's counts are read with one pipeline of ZCARD (and HLEN on keep_top
// boards) per tag. One call looks at no more than MaxDimsScan tags (half on keep_top boards) and runs
// at most 20 SSCANs, so a page may hold fewer than limit values, even none,
// while Next is set: the listing is done only when Next is "". Values are
// in no particular order; like SSCAN, a value present for the whole listing
// is listed (at most, rarely, twice), a value added or removed during it
// may or may not be. Counts of a rolling board are read from the window as
// the rollover timer built it: a read does not roll a period over.
func (s *Store) ListDims(ctx context.Context, board, period, cursor string, limit int) (DimsPage, error) {
	if limit < 1 || limit > MaxDimsLimit {
		return DimsPage{}, fmt.Errorf("%w %d: want 1..%d", ErrBadLimit, limit, MaxDimsLimit)
	}
	st, err := s.board(board)
	if err != nil {
		return DimsPage{}, err
	}
	p, err := s.resolve(st, period)
	if err != nil {
		return DimsPage{}, err
	}
	pos, after, err := parseDimsCursor(cursor)
	if err != nil {
		return DimsPage{}, err
	}
	gs, err := s.reader(ctx, board)
	if err != nil {
		return DimsPage{}, err
	}
	out := DimsPage{Board: board, Period: p, Dims: []DimsCount{}}
	budget := MaxDimsScan
	if st.b.KeepTop > 0 {
		budget /= 2
	}
	looked := 0
	for scans := 0; ; scans++ {
		if scans == maxDimsScans || looked >= budget || len(out.Dims) == limit {
			out.Next = dimsCursor(pos, after)
			return out, nil
		}
		tags, next, err := gs.rdb.SScan(ctx, gs.dimsKey(board), pos, "", dimsScanCount).Result()
		if err != nil {
			return DimsPage{}, fmt.Errorf("listing dims of %q: %w", board, err)
		}
		slices.Sort(tags)
		tags = slices.Compact(tags)
		if after != "" {
			i, found := slices.BinarySearch(tags, after)
			if found {
				i++
			}
			tags = tags[i:]
		}
		// take as many tags as may still be listed and looked at
		take := min(len(tags), limit-len(out.Dims), budget-looked)
		counts, err := gs.dimsCounts(ctx, st, p, tags[:take])
		if err != nil {
			return DimsPage{}, err
		}
		looked += take
		for _, c := range counts {
			if c.Count > 0 {
				out.Dims = append(out.Dims, c)
			}
		}
		if take < len(tags) { // resume within this batch
			after = tags[take-1]
			out.Next = dimsCursor(pos, after)
			return out, nil
		}
		if pos, after = next, ""; pos == 0 {
			return out, nil
		}
	}
}

// dimsCounts reads the member counts of tags in period p, in one pipeline;
// tags that are not dims values of the board (a board whose dims changed)
// are left out.
func (s *Store) dimsCounts(ctx context.Context, st *boardState, p ranking.Period, tags []string) ([]DimsCount, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	type queued struct {
		dims []string
		sz   sizes
		key  string
	}
	pipe := s.rdb.Pipeline()
	var qs []queued
	for _, tag := range tags {
		b, dims, err := ParseTag(tag)
		if err != nil || b != st.b.Name || len(dims) != len(st.b.Dims) {
			continue
		}
		v := &view{st: st, key: s.periodKey(st, tag, p)}
		qs = append(qs, queued{dims: dims, sz: v.queueSizes(ctx, pipe), key: v.key})
	}
	if len(qs) == 0 {
		return nil, nil
	}
	_, _ = pipe.Exec(ctx) // errors checked per command
	out := make([]DimsCount, len(qs))
	for i, q := range qs {
		_, n, _, err := q.sz.result()
		if err != nil {
			return nil, fmt.Errorf("counting %s: %w", q.key, err)
		}
		if q.dims == nil {
			q.dims = []string{}
		}
		out[i] = DimsCount{Dims: q.dims, Count: n}
	}
	return out, nil
}

// periodKey is the visible sorted set of a tag in period p, as zkey names
// it but without completing a rollover.
func (s *Store) periodKey(st *boardState, tag string, p ranking.Period) string {
	switch st.b.Window {
	case ranking.WindowTotal:
		return Key(s.prefix, tag, KindTotal, PeriodAll)
	case ranking.WindowPeriodic:
		return Key(s.prefix, tag, KindPeriod, p.ID)
	}
	return Key(s.prefix, tag, KindRolling, p.ID)
}

// A ListDims cursor is the unpadded base64url of "<sscan cursor>" or of
// "<sscan cursor> <last tag listed of that cursor's batch>" (tags never
// hold a space: it is escaped).

func dimsCursor(pos uint64, after string) string {
	s := strconv.FormatUint(pos, 10)
	if after != "" {
		s += " " + after
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func parseDimsCursor(c string) (uint64, string, error) {
	if c == "" {
		return 0, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", fmt.Errorf("%w %q: not a cursor of this listing", ErrBadCursor, c)
	}
	num, after, _ := strings.Cut(string(raw), " ")
	pos, err := strconv.ParseUint(num, 10, 64)
	if err != nil || (after == "" && pos == 0) {
		return 0, "", fmt.Errorf("%w %q: not a cursor of this listing", ErrBadCursor, c)
	}
	return pos, after, nil
}
