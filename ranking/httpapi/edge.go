package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// The serving edge: what a request's input may make a response say, and
// the cached read path.

// maxQuote is about how many bytes of a request's input an error message
// quotes.
const maxQuote = 100

// clip shortens s to about maxQuote bytes (on a rune boundary), saying how
// long it was.
func clip(s string) string {
	if len(s) <= maxQuote {
		return s
	}
	n := maxQuote
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}

// quote quotes input for an error message, clipped (see clip).
func quote(s string) string {
	if len(s) <= maxQuote {
		return strconv.Quote(s)
	}
	n := maxQuote
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}

// unknownBoard is the 404 of a board name.
func unknownBoard(name string) error {
	return &apiError{status: http.StatusNotFound, code: codeUnknownBoard, msg: "unknown board " + quote(name)}
}

// publicMessage is the message of a 4xx store error: written from the
// request, never from the error's text, which may name Redis keys or echo
// long input.
func publicMessage(r *http.Request, err error) string {
	board := r.PathValue("board")
	switch {
	case errors.Is(err, store.ErrUnknownBoard):
		return "unknown board " + quote(board)
	case errors.Is(err, store.ErrUnknownDims):
		return fmt.Sprintf("board %s has no data for these dims values", quote(board))
	case errors.Is(err, store.ErrMemberNotFound):
		return fmt.Sprintf("member %s is not on board %s", quote(r.PathValue("member")), quote(board))
	case errors.Is(err, store.ErrBadDims):
		return fmt.Sprintf("dims do not match the dims of board %s", quote(board))
	case errors.Is(err, store.ErrBadPeriod):
		return fmt.Sprintf("period %s: want current, previous or a period id of board %s", quote(r.URL.Query().Get("period")), quote(board))
	case errors.Is(err, store.ErrBadCursor):
		return fmt.Sprintf("cursor %s: not a cursor of this listing", quote(r.URL.Query().Get("cursor")))
	case errors.Is(err, store.ErrBadLimit):
		return "bad limit: " + stripped(err.Error()) // numbers of the request and the board only
	case errors.Is(err, store.ErrBadRankMode):
		return fmt.Sprintf("rank %s: want row, competition or dense", quote(r.URL.Query().Get("rank")))
	}
	return "bad request"
}

// stripped drops the "bad limit" prefix of a store message (it names no
// key: the page sizes and counts it states are the request's).
func stripped(msg string) string {
	const p = "bad limit"
	if len(msg) >= len(p) && msg[:len(p)] == p {
		msg = msg[len(p):]
	}
	for len(msg) > 0 && (msg[0] == ':' || msg[0] == ' ') {
		msg = msg[1:]
	}
	return msg
}

// cachedRead serves a board read through the response cache (cache.go),
// or, without one, renders it for every request. A hit is usually served
// by serveHit before any routing; one found here (an entry stored
// meanwhile) is served the same way.
func (s *server) cachedRead(route string, body func(*http.Request) ([]byte, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.cache == nil {
			if err := s.admit(r); err != nil {
				return err
			}
			b, err := body(r)
			if err != nil {
				return err
			}
			writeBody(w, b)
			return nil
		}
		e, err := s.cachedEntry(route, body, r)
		if err != nil {
			return err
		}
		s.cache.serve(w, r, e)
		return nil
	}
}

// readBody returns the rendered body of a board read, from the response
// cache when there is one (the HTML page reads the board this way).
func (s *server) readBody(route string, body func(*http.Request) ([]byte, error), r *http.Request) ([]byte, error) {
	if s.cache == nil {
		if err := s.admit(r); err != nil {
			return nil, err
		}
		return body(r)
	}
	e, err := s.cachedEntry(route, body, r)
	if err != nil {
		return nil, err
	}
	return e.body, nil
}

// cachedEntry returns the cache entry of a board read: a fresh one; an
// expired one while another request reads it again (stale); or the one
// this request reads, once for all the requests that miss it at the same
// time. Requests are admitted (the API's yielding) except the one that
// reads an expired entry again.
func (s *server) cachedEntry(route string, body func(*http.Request) ([]byte, error), r *http.Request) (*cached, error) {
	cur, err := s.store.ResolvePeriod(r.PathValue("board"), "current")
	if err != nil {
		return nil, unknownBoard(r.PathValue("board"))
	}
	key := cacheKey{path: r.URL.EscapedPath(), query: r.URL.RawQuery}
	old, fresh := s.cache.get(key, s.clock().UnixNano(), s.storeNow())
	hot := false
	switch {
	case old == nil:
		if err := s.admit(r); err != nil {
			return nil, err
		}
	case fresh:
		if err := s.admit(r); err != nil {
			return nil, err
		}
		if s.m != nil {
			s.m.hit.Inc()
		}
		s.cache.hits.Add(1)
		old.hit()
		return old, nil
	case !old.refreshing.CompareAndSwap(false, true):
		if err := s.admit(r); err != nil {
			return nil, err
		}
		s.countStale() // another request reads it again
		return old, nil
	default:
		// this request reads it again, without waiting for its turn;
		// the others get old meanwhile
		defer old.refreshing.Store(false) // the new entry replaces it, unless the read fails
		hot = old.hits.Load() >= hotHits
	}
	// The flight includes the current period id: reads on each side
	// of a period's end are not the same read.
	flight := key.path + "?" + key.query + "\x00" + cur.ID
	led := false
	v, err, _ := s.cache.flight.Do(flight, func() (any, error) {
		led = true
		// one request reads for all who wait: its client leaving must
		// not fail theirs (the read's own timeout still applies)
		ctx := context.WithoutCancel(r.Context())
		if hot {
			ctx = withHot(ctx)
		}
		v, readAt := s.cache.version(r.PathValue("board")), s.clock().UnixNano()
		b, err := body(r.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		return s.cache.put(key, b, readAt, s.clock().UnixNano(), periodEnd(cur), v, s.routes[route]), nil
	})
	switch {
	case led:
		s.cache.misses.Add(1)
		if s.m != nil {
			s.m.miss.Inc()
		}
	default:
		s.cache.coalesced.Add(1)
		if s.m != nil {
			s.m.coalesced.Inc()
		}
	}
	if err != nil {
		return nil, err
	}
	return v.(*cached), nil
}

// periodEnd is the end of p in unix ns of the store's clock, 0 for none
// (the total boards' period "all" ends in 9999).
func periodEnd(p ranking.Period) int64 {
	if p.End.IsZero() || !p.End.Before(maxNano) {
		return 0
	}
	return p.End.UnixNano()
}

var maxNano = time.Unix(0, math.MaxInt64)

// storeNow is the store's clock, the one periods end by, in unix ns.
func (s *server) storeNow() int64 {
	if s.storeClock != nil {
		return s.storeClock.Now().UnixNano()
	}
	return s.clock().UnixNano()
}

// serveHit serves GET and HEAD requests whose response the cache holds,
// fresh, and reports whether it did. It is the whole of a hit: no routing,
// no parsing, no allocation but net/http's own; its metrics are those the
// route would count (pre-resolved per route). serveHitFast is the same for
// fasthttp, the server rankd runs.
func (s *server) serveHit(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	start := s.clock()
	e, fresh, ok := s.hitEntry(r.Context(), cacheKey{path: r.URL.EscapedPath(), query: r.URL.RawQuery}, start)
	if !ok {
		return false
	}
	s.countHit(e, fresh)
	s.served(e, s.cache.serve(w, r, e), start)
	return true
}

// hitEntry returns the entry a hit on k serves and whether it is fresh,
// once the request's turn came (WithPriority); ok is false when the route
// must answer: no entry, an expired one nobody reads again, or a refusal
// to wait (the route answers it).
func (s *server) hitEntry(ctx context.Context, k cacheKey, start time.Time) (e *cached, fresh, ok bool) {
	e, fresh = s.cache.get(k, start.UnixNano(), s.storeNow())
	if e == nil || (!fresh && !e.refreshing.Load()) {
		return nil, false, false // the route reads it
	}
	if s.gov != nil {
		if s.gov.admit(ctx, start) != nil {
			return nil, false, false // the route answers (overloaded, the client left, or the server stops)
		}
		if e, fresh = s.cache.get(e.key, s.clock().UnixNano(), s.storeNow()); e == nil || (!fresh && !e.refreshing.Load()) {
			return nil, false, false // expired while it waited: the route reads it again
		}
	}
	return e, fresh, true
}

// countHit counts a response served from e: a hit, or stale.
func (s *server) countHit(e *cached, fresh bool) {
	if !fresh {
		s.countStale()
		return
	}
	s.cache.hits.Add(1)
	e.hit()
	if s.m != nil {
		s.m.hit.Inc()
	}
}

// served counts the response of e's route.
func (s *server) served(e *cached, status int, start time.Time) {
	if s.m != nil {
		e.route.served(status, s.clock().Sub(start))
	}
}

// countStale counts a response from an expired entry.
func (s *server) countStale() {
	s.cache.stale.Add(1)
	if s.m != nil {
		s.m.stale.Inc()
	}
}

// maxEstimate is the Redis time of the costliest read the parameters
// allow (a page of MaxLimit with dense previous ranks) on a board of the
// assumed size: the budget's bucket holds at least that much.
func (s *server) maxEstimate() float64 {
	return store.DefaultCostModel.Micros(plus(pageCost(store.MaxLimit), s.trendCost(store.MaxLimit, store.RankDense)), assumedMembers)
}
