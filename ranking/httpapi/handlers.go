package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// DefaultLimit is the number of members /top returns without limit.
const DefaultLimit = 20

// DefaultAround is the number of members each side that /around returns
// without n.
const DefaultAround = 5

// boardJSON is one declared board in /v1/boards.
type boardJSON struct {
	Name      string `json:"name"`
	Title     string `json:"title"`
	Window    string `json:"window"`
	Every     string `json:"every,omitempty"`   // periodic and rolling
	Periods   int    `json:"periods,omitempty"` // rolling
	Timezone  string `json:"timezone"`
	WeekStart string `json:"week_start,omitempty"` // weekly periods: "monday", "sunday", ... as in the config
	// Dims are the names the dims parameter takes, in key order.
	Dims      []string   `json:"dims"`
	Aggregate string     `json:"aggregate"`
	Order     string     `json:"order"`
	Tiebreak  string     `json:"tiebreak"`
	TieUnit   string     `json:"tie_unit,omitempty"` // with a tiebreak
	Decimals  int        `json:"decimals"`
	KeepTop   int        `json:"keep_top"`
	Sort      []sortJSON `json:"sort,omitempty"`
	// Current and Previous are the period ids "current" and "previous"
	// resolve to now ("all" for total boards).
	Current  string `json:"current"`
	Previous string `json:"previous"`
}

// sortJSON is one factor of a multi-factor sort key.
type sortJSON struct {
	Name  string `json:"name"`
	Order string `json:"order"`
	Bits  int    `json:"bits"`
}

// handleBoards serves GET /v1/boards.
func (s *server) handleBoards(w http.ResponseWriter, r *http.Request) error {
	out := struct {
		Boards []boardJSON `json:"boards"`
	}{Boards: make([]boardJSON, 0, len(s.order))}
	for _, b := range s.order {
		cur, err := s.store.ResolvePeriod(b.Name, "current")
		if err != nil {
			return err
		}
		prev, err := s.store.ResolvePeriod(b.Name, "previous")
		if err != nil {
			return err
		}
		bj := boardJSON{
			Name: b.Name, Title: b.Title, Window: b.Window.String(), Timezone: b.Calendar().Location.String(),
			Dims: append([]string{}, b.Dims...), Aggregate: b.Aggregate.String(), Order: b.Order.String(),
			Tiebreak: b.Tiebreak.String(), Decimals: b.Decimals, KeepTop: b.KeepTop,
			Current: cur.ID, Previous: prev.ID,
		}
		if b.Window != ranking.WindowTotal {
			bj.Every = b.Every.String()
			if b.Every.Kind == ranking.UnitWeek {
				// the config's spelling (week_start: sunday), not time.Weekday's
				bj.WeekStart = strings.ToLower(b.WeekStart.String())
			}
		}
		if b.Window == ranking.WindowRolling {
			bj.Periods = b.Periods
		}
		if b.Tiebreak != ranking.TieNone {
			c, _ := s.store.Codec(b.Name)
			bj.TieUnit = durationString(c.TieUnit)
		}
		for _, f := range b.Sort {
			bj.Sort = append(bj.Sort, sortJSON{Name: f.Name, Order: f.Order.String(), Bits: f.Bits})
		}
		out.Boards = append(out.Boards, bj)
	}
	return writeJSON(w, out)
}

// topBody renders GET /v1/boards/{board}/top.
func (s *server) topBody(r *http.Request) ([]byte, error) {
	q, err := s.parseQuery(r)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", DefaultLimit, 1, store.MaxLimit)
	if err != nil {
		return nil, err
	}
	percent, err := percentParam(r)
	if err != nil {
		return nil, err
	}
	rows := limit
	if percent > 0 {
		rows = store.MaxLimit // not known before the count is read
		limit = int(min(store.PercentRows(s.sizes.of(q.b.Name), percent), store.MaxLimit))
	}
	est := plus(pageCost(limit), boardCost(q.b))
	if percent > 0 {
		est = plus(est, store.Counts{RoundTrips: 1, Commands: 4}) // the count first: MULTI, ZCARD, (HLEN,) EXEC
	}
	if q.trend && q.b.Window != ranking.WindowTotal {
		est = plus(est, s.trendCost(min(rows, limit), q.mode))
	}
	var res pageResult
	err = s.read(r, "top", q.expensive(rows, false), estimate{c: est, board: q.b.Name}, func(ctx context.Context) error {
		if err := s.knownDims(ctx, q); err != nil {
			return err
		}
		var pg store.Page
		var err error
		if percent > 0 {
			pg, err = s.store.TopPercent(ctx, q.b.Name, q.dims, q.period, percent, q.mode)
		} else {
			pg, err = s.store.Top(ctx, q.b.Name, q.dims, q.period, limit, q.mode)
		}
		if err != nil {
			return err
		}
		s.sizes.seen(q.b.Name, pg.Count)
		res, err = s.pageResult(ctx, q, pg)
		return err
	})
	if err != nil {
		return nil, err
	}
	res.percent = percent
	return s.renderPage(q, res, "")
}

// percentParam reads /top's percent: a decimal number in (0, 100] with at
// most 2 decimals, returned in hundredths of a percent (0: absent). It
// excludes limit.
func percentParam(r *http.Request) (int64, error) {
	vals := r.URL.Query()
	p := vals.Get("percent")
	if p == "" {
		return 0, nil
	}
	if vals.Get("limit") != "" {
		return 0, badRequest(codeBadRequest, "percent and limit exclude each other: percent gives the number of members")
	}
	bad := badRequest(codeBadRequest, fmt.Sprintf("percent %s: want a number in 0.01..100 with at most 2 decimals", quote(p)))
	whole, frac, hasFrac := strings.Cut(p, ".")
	if whole == "" || len(whole) > 3 || (hasFrac && (len(frac) < 1 || len(frac) > 2)) || !digits(whole) || !digits(frac) {
		return 0, bad
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64)
		if len(frac) == 1 {
			f *= 10
		}
	}
	h := w*100 + f
	if h < 1 || h > 10000 {
		return 0, bad
	}
	return h, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// knownDims answers 404 unknown_dims for dims values that the board's dims
// registry does not hold (one SISMEMBER; nothing for boards without dims),
// after checking the period.
func (s *server) knownDims(ctx context.Context, q *query) error {
	// a bad period is reported first (the store would report it after)
	if _, err := s.store.ResolvePeriod(q.b.Name, q.period); err != nil {
		return err
	}
	err := s.store.KnownDims(ctx, q.b.Name, q.dims)
	if errors.Is(err, store.ErrUnknownDims) {
		return &apiError{status: http.StatusNotFound, code: codeUnknownDims, cause: err,
			msg: fmt.Sprintf("board %q has no data for dims %s; its dims values are listed at /v1/boards/%s/dims",
				q.b.Name, clip(dimsText(q.b, q.dims)), url.PathEscape(q.b.Name))}
	}
	return err
}

// dimsText writes dims values as the dims parameter takes them.
func dimsText(b *ranking.Board, dims []string) string {
	parts := make([]string, len(b.Dims))
	for i, d := range b.Dims {
		parts[i] = d + ":" + strings.ReplaceAll(strings.ReplaceAll(dims[i], "%", "%25"), ",", "%2C")
	}
	return strings.Join(parts, ",")
}

// aroundBody renders GET /v1/boards/{board}/members/{member}/around.
func (s *server) aroundBody(r *http.Request) ([]byte, error) {
	q, err := s.parseQuery(r)
	if err != nil {
		return nil, err
	}
	n, err := intParam(r, "n", DefaultAround, 0, store.MaxLimit/2)
	if err != nil {
		return nil, err
	}
	member := r.PathValue("member")
	// the member's position and the set's size in one MULTI, then the
	// page's ZRANGE; the first entry's rank with rank=competition (one
	// ZCOUNT: two commands) or rank=dense (a walk of at most half the dense
	// budget)
	est := plus(plus(pageCost(2*n+1), boardCost(q.b)), store.Counts{RoundTrips: 1, Commands: 1})
	switch q.mode {
	case store.RankCompetition:
		est = plus(est, store.Counts{RoundTrips: 1, Commands: 2})
	case store.RankDense:
		est = plus(est, store.Counts{RoundTrips: 1, Commands: 1, Elements: 3, DenseSteps: int64(s.denseSteps / 2)})
	}
	if q.trend && q.b.Window != ranking.WindowTotal {
		est = plus(est, s.trendCost(2*n+1, q.mode))
	}
	var res pageResult
	err = s.read(r, "around", q.expensive(2*n+1, true), estimate{c: est, board: q.b.Name}, func(ctx context.Context) error {
		if err := s.knownDims(ctx, q); err != nil {
			return err
		}
		pg, err := s.store.Around(ctx, q.b.Name, q.dims, member, q.period, n, q.mode)
		if errors.Is(err, store.ErrMemberNotFound) {
			return s.memberNotFound(q, member, q.period)
		}
		if err != nil {
			return err
		}
		s.sizes.seen(q.b.Name, pg.Count)
		res, err = s.pageResult(ctx, q, pg)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.renderPage(q, res, member)
}

// memberNotFound is the 404 of a member absent from a board.
func (s *server) memberNotFound(q *query, member, period string) error {
	if period == "" {
		period = "current"
	}
	return &apiError{status: http.StatusNotFound, code: codeNotFound,
		msg: fmt.Sprintf("member %s is not on board %q (period %s)", quote(member), q.b.Name, quote(period))}
}

// pageResult is what /top and /around read from Redis.
type pageResult struct {
	pg      store.Page
	final   bool
	percent int64    // /top?percent, in hundredths (0: absent)
	prev    []*int64 // with trend=1: each entry's previous rank (nil: absent)
}

// pageResult reads the rest of a page: its period's finality and, with
// trend=1, the previous ranks of its entries.
func (s *server) pageResult(ctx context.Context, q *query, pg store.Page) (pageResult, error) {
	res := pageResult{pg: pg, final: s.final(ctx, q.b, pg.Period)}
	if !q.trend || q.b.Window == ranking.WindowTotal {
		return res, nil
	}
	var err error
	res.prev, err = s.prevRanks(ctx, q, pg)
	return res, err
}

func (s *server) renderPage(q *query, res pageResult, member string) ([]byte, error) {
	pg := res.pg
	rd := s.renderer(q.b)
	out := pageJSON{
		Board: q.b.Name, Dims: dimsObject(q.b, q.dims), Period: renderPeriod(q.b, pg.Period, res.final),
		RankMode: q.mode.String(), Member: member, Count: pg.Count, Complete: pg.Complete,
		RankApprox: pg.RankApprox, Entries: rd.entries(pg.Entries),
	}
	if res.percent > 0 {
		out.Percent = fixed(res.percent, 2)
	}
	if res.prev != nil {
		for i := range out.Entries {
			out.Entries[i].PrevRank = res.prev[i]
			out.Entries[i].Trend = trend(out.Entries[i].Rank, res.prev[i])
		}
	}
	return marshalBody(out)
}

// prevRanks returns each entry's rank, in the page's rank mode, in the
// period before the page's (nil where the member was absent), with one
// bounded Store.Ranks call for the whole page.
func (s *server) prevRanks(ctx context.Context, q *query, pg store.Page) ([]*int64, error) {
	out := make([]*int64, len(pg.Entries))
	if len(pg.Entries) == 0 {
		return out, nil
	}
	prevID := q.b.Calendar().Prev(pg.Period).ID
	members := make([]string, len(pg.Entries))
	for i, e := range pg.Entries {
		members[i] = e.Member
	}
	ranks, err := s.store.Ranks(ctx, q.b.Name, q.dims, prevID, members, q.mode)
	if err != nil {
		return nil, fmt.Errorf("ranks in %s: %w", prevID, err)
	}
	for i, rk := range ranks {
		if rk.Found {
			out[i] = &rk.Rank
		}
	}
	return out, nil
}

// memberBody renders GET /v1/boards/{board}/members/{member}.
func (s *server) memberBody(r *http.Request) ([]byte, error) {
	q, err := s.parseQuery(r)
	if err != nil {
		return nil, err
	}
	member := r.PathValue("member")
	var info store.MemberInfo
	var final bool
	// the standing (a MULTI of 5 commands), the member above (ZRANGE) and
	// the count of the members better than it (ZCOUNT, two commands), and
	// the standing in the previous period; with rank=competition the
	// previous rank's count, with rank=dense two walks of at most the dense
	// budget in all
	est := plus(boardCost(q.b), store.Counts{RoundTrips: 3, Commands: 8, Elements: 2})
	if q.b.Window != ranking.WindowTotal {
		est = plus(est, store.Counts{RoundTrips: 1, Commands: 5})
	}
	switch q.mode {
	case store.RankCompetition:
		est = plus(est, store.Counts{RoundTrips: 1, Commands: 2})
	case store.RankDense:
		est = plus(est, store.Counts{RoundTrips: 3, Commands: 5, Elements: 8, DenseSteps: int64(s.denseSteps)})
	}
	err = s.read(r, "member", q.expensive(0, true), estimate{c: est, board: q.b.Name}, func(ctx context.Context) error {
		if err := s.knownDims(ctx, q); err != nil {
			return err
		}
		var err error
		if info, err = s.store.Member(ctx, q.b.Name, q.dims, member, q.period, q.mode); err != nil {
			return err
		}
		s.sizes.seen(q.b.Name, info.Count)
		if info.Found {
			final = s.final(ctx, q.b, info.Period)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !info.Found {
		return nil, &apiError{status: http.StatusNotFound, code: codeNotFound,
			msg: fmt.Sprintf("member %s is not on board %q (period %s)", quote(member), q.b.Name, info.Period.ID)}
	}
	rd := s.renderer(q.b)
	out := memberJSON{
		Board: q.b.Name, Dims: dimsObject(q.b, q.dims), Period: renderPeriod(q.b, info.Period, final), RankMode: q.mode.String(),
		entryJSON:  rd.entry(info.Rank, member, info.Value, info.TieTime),
		RankApprox: info.RankApprox, Above: info.Above,
		Gap: fixed(info.Gap, q.b.Decimals), GapRaw: info.Gap, Count: info.Count,
		Percentile: fixed(store.Percentile(info.Better, info.Count), 2),
	}
	if q.b.Window != ranking.WindowTotal {
		if info.PrevFound {
			out.PrevRank = &info.PrevRank
		}
		out.Trend = trend(info.Rank, out.PrevRank)
	}
	return marshalBody(out)
}

// durationString writes a tie unit as a config would: "1ms", "1s", "1m".
func durationString(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d >= time.Second && d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d >= time.Millisecond && d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}
