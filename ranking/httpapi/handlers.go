package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/ranking"
)

// DefaultLimit is the number of members /top returns without limit.
const DefaultLimit = 20

// DefaultAround is the number of members each side that /around returns
// without n.
const DefaultAround = 5

// prevConcurrency bounds the previous-rank look-ups of one trend=1 request.
const prevConcurrency = 8

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

// handleTop serves GET /v1/boards/{board}/top.
func (s *server) handleTop(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parseQuery(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", DefaultLimit, 1, ranking.MaxLimit)
	if err != nil {
		return err
	}
	pg, err := s.store.Top(r.Context(), q.b.Name, q.dims, q.period, limit, q.mode)
	if err != nil {
		return err
	}
	return s.writePage(w, r, q, pg, "")
}

// handleAround serves GET /v1/boards/{board}/members/{member}/around.
func (s *server) handleAround(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parseQuery(r)
	if err != nil {
		return err
	}
	n, err := intParam(r, "n", DefaultAround, 0, ranking.MaxLimit/2)
	if err != nil {
		return err
	}
	member := r.PathValue("member")
	pg, err := s.store.Around(r.Context(), q.b.Name, q.dims, member, q.period, n, q.mode)
	if err != nil {
		return err
	}
	return s.writePage(w, r, q, pg, member)
}

func (s *server) writePage(w http.ResponseWriter, r *http.Request, q *query, pg ranking.Page, member string) error {
	rd := s.renderer(q.b, pg.Period)
	out := pageJSON{
		Board: q.b.Name, Dims: dimsObject(q.b, q.dims), Period: s.renderPeriod(r.Context(), q.b, pg.Period),
		RankMode: q.mode.String(), Member: member, Count: pg.Count, Complete: pg.Complete,
		RankApprox: pg.RankApprox, Entries: rd.entries(pg.Entries),
	}
	if q.trend && q.b.Window != ranking.WindowTotal {
		prev, err := s.prevRanks(r.Context(), q, pg)
		if err != nil {
			return err
		}
		for i := range out.Entries {
			out.Entries[i].PrevRank = prev[i]
			out.Entries[i].Trend = trend(out.Entries[i].Rank, prev[i])
		}
	}
	return writeJSON(w, out)
}

// prevRanks returns each entry's rank, in the page's rank mode, in the
// period before the page's (nil where the member was absent).
func (s *server) prevRanks(ctx context.Context, q *query, pg ranking.Page) ([]*int64, error) {
	prevID := q.b.Calendar().Prev(pg.Period).ID
	out := make([]*int64, len(pg.Entries))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(prevConcurrency)
	for i, e := range pg.Entries {
		g.Go(func() error {
			p, err := s.store.Around(ctx, q.b.Name, q.dims, e.Member, prevID, 0, q.mode)
			if errors.Is(err, ranking.ErrMemberNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("rank of %q in %s: %w", e.Member, prevID, err)
			}
			for _, pe := range p.Entries {
				if pe.Member == e.Member {
					out[i] = &pe.Rank
				}
			}
			return nil
		})
	}
	return out, g.Wait()
}

// handleMember serves GET /v1/boards/{board}/members/{member}.
func (s *server) handleMember(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parseQuery(r)
	if err != nil {
		return err
	}
	member := r.PathValue("member")
	info, err := s.store.Member(r.Context(), q.b.Name, q.dims, member, q.period, q.mode)
	if err != nil {
		return err
	}
	if !info.Found {
		return &apiError{status: http.StatusNotFound, code: codeNotFound,
			msg: fmt.Sprintf("member %q is not on board %q (period %s)", member, q.b.Name, info.Period.ID)}
	}
	rd := s.renderer(q.b, info.Period)
	out := memberJSON{
		Board: q.b.Name, Dims: dimsObject(q.b, q.dims), Period: s.renderPeriod(r.Context(), q.b, info.Period), RankMode: q.mode.String(),
		entryJSON:  rd.entry(info.Rank, member, info.Value, info.Tie),
		RankApprox: info.RankApprox, Above: info.Above,
		Gap: fixed(info.Gap, q.b.Decimals), GapRaw: info.Gap, Count: info.Count,
	}
	if q.b.Window != ranking.WindowTotal {
		if info.PrevFound {
			out.PrevRank = &info.PrevRank
		}
		out.Trend = trend(info.Rank, out.PrevRank)
	}
	return writeJSON(w, out)
}

// handlePage serves the HTML page at /.
func (s *server) handlePage(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	http.ServeContent(w, r, "", time.Time{}, pageReader())
	return nil
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
