package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// query is the parsed common parameters of a board request.
type query struct {
	b      *ranking.Board
	dims   []string // values in the board's Dims order
	period string   // as given ("" = current)
	mode   store.RankMode
	trend  bool
}

// parseQuery reads the board from the path and dims, period, rank and trend
// from the query string.
func (s *server) parseQuery(r *http.Request) (*query, error) {
	name := r.PathValue("board")
	b, ok := s.boards[name]
	if !ok {
		return nil, unknownBoard(name)
	}
	q := &query{b: b}
	var err error
	if q.dims, err = parseDims(b, r.URL.RawQuery); err != nil {
		return nil, err
	}
	vals := r.URL.Query()
	q.period = vals.Get("period")
	if _, err := s.store.ResolvePeriod(b.Name, q.period); err != nil {
		return nil, badRequest(codeBadPeriod, fmt.Sprintf("period %s: want current, previous or a period id of board %q (e.g. %s)",
			quote(q.period), b.Name, s.examplePeriod(b)))
	}
	if err := s.checkPeriod(b, q.period); err != nil {
		return nil, err
	}
	if q.mode, err = store.ParseRankMode(vals.Get("rank")); err != nil {
		return nil, badRequest(codeBadRequest, fmt.Sprintf("rank %s: want row, competition or dense", quote(vals.Get("rank"))))
	}
	if t := vals.Get("trend"); t != "" {
		if q.trend, err = strconv.ParseBool(t); err != nil {
			return nil, badRequest(codeBadRequest, fmt.Sprintf("trend %s: want 1 or 0", quote(t)))
		}
	}
	return q, nil
}

// expensiveRows is the page size beyond which previous ranks (trend=1) make
// a read expensive.
const expensiveRows = 100

// expensive reports whether a read of q with a page of rows entries may
// cost Redis much more than a few look-ups (see WithExpensiveLimit): a
// dense rank walk (the page's own when walk is set: /around, /members; the
// previous period's with trend=1), or the previous ranks of more than
// expensiveRows entries.
func (q *query) expensive(rows int, walk bool) bool {
	trend := q.trend && q.b.Window != ranking.WindowTotal
	if q.mode == store.RankDense {
		return walk || trend
	}
	return trend && rows > expensiveRows
}

// parseDims returns the values of b.Dims from the dims parameters of a raw
// query: name:value pairs joined by ",", in any order, possibly spread over
// several dims parameters. Pairs are split on "," and on the first ":"
// before percent-decoding, so an encoded "," (%2C) belongs to a value; a
// pair is split on its first ":" after decoding, so an encoded ":" (%3A,
// as standard encoders write it) separates the name from the value as a
// plain one does (dims names never hold ":").
func parseDims(b *ranking.Board, rawQuery string) ([]string, error) {
	got := map[string]string{}
	for part := range strings.SplitSeq(rawQuery, "&") {
		k, raw, _ := strings.Cut(part, "=")
		if key, err := url.QueryUnescape(k); err != nil || key != "dims" {
			continue
		}
		for pair := range strings.SplitSeq(raw, ",") {
			if pair == "" {
				continue
			}
			decoded, err := url.QueryUnescape(pair)
			name, value, ok := strings.Cut(decoded, ":")
			if !ok || err != nil {
				return nil, badRequest(codeBadDims, fmt.Sprintf("dims: %s is not a name:value pair (percent-encoded)", quote(pair)))
			}
			if !containsDim(b, name) {
				return nil, badRequest(codeBadDims, fmt.Sprintf("dims: board %q has no dim %s; its dims are %s", b.Name, quote(name), dimsList(b)))
			}
			if _, dup := got[name]; dup {
				return nil, badRequest(codeBadDims, fmt.Sprintf("dims: %s given twice", quote(name)))
			}
			got[name] = value
		}
	}
	out := make([]string, len(b.Dims))
	for i, d := range b.Dims {
		v, ok := got[d]
		if !ok {
			return nil, badRequest(codeBadDims, fmt.Sprintf("dims: board %q needs a value for %q (dims=%s)", b.Name, d, dimsExample(b)))
		}
		out[i] = v
	}
	return out, nil
}

func containsDim(b *ranking.Board, name string) bool {
	for _, d := range b.Dims {
		if d == name {
			return true
		}
	}
	return false
}

func dimsList(b *ranking.Board) string {
	if len(b.Dims) == 0 {
		return "none"
	}
	return strings.Join(b.Dims, ", ")
}

func dimsExample(b *ranking.Board) string {
	parts := make([]string, len(b.Dims))
	for i, d := range b.Dims {
		parts[i] = d + ":..."
	}
	return strings.Join(parts, ",")
}

// checkPeriod rejects a period id of a rolling board that starts after the
// period following the current one: the rollover timer prefills at most
// the next period, so a later one has nothing to show (and reads never
// prefill a period that has not started). Malformed ids are left to the
// store.
func (s *server) checkPeriod(b *ranking.Board, period string) error {
	if b.Window != ranking.WindowRolling || period == "" || period == "current" || period == "previous" {
		return nil
	}
	p, err := b.Calendar().Parse(period)
	if err != nil {
		return nil // the store reports it as ErrBadPeriod
	}
	cur, err := s.store.ResolvePeriod(b.Name, "current")
	if err != nil {
		return err
	}
	if next := b.Calendar().Next(cur); p.Start.After(next.Start) {
		return badRequest(codeBadPeriod, fmt.Sprintf("period %s of rolling board %q is in the future: the latest readable period is %s", quote(period), b.Name, next.ID))
	}
	return nil
}

// intParam reads an integer query parameter in [lo, hi], def when absent.
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(codeBadRequest, fmt.Sprintf("%s %s: want an integer in %d..%d", name, quote(s), lo, hi))
	}
	return n, nil
}

// examplePeriod is the current period id of b, for messages.
func (s *server) examplePeriod(b *ranking.Board) string {
	p, err := s.store.ResolvePeriod(b.Name, "current")
	if err != nil {
		return "current"
	}
	return p.ID
}
