package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

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
// or, without one, renders it for every request.
func (s *server) cachedRead(route string, body func(*http.Request) ([]byte, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.cache == nil {
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
		return body(r)
	}
	e, err := s.cachedEntry(route, body, r)
	if err != nil {
		return nil, err
	}
	return e.body, nil
}

// cachedEntry returns the fresh cache entry of a board read, reading it
// once for all the requests that miss it at the same time.
func (s *server) cachedEntry(route string, body func(*http.Request) ([]byte, error), r *http.Request) (*cached, error) {
	cur, err := s.store.ResolvePeriod(r.PathValue("board"), "current")
	if err != nil {
		return nil, unknownBoard(r.PathValue("board"))
	}
	// The path holds the board (and member); the raw query every
	// parameter; the current period id makes "current" and
	// "previous" move on at the period's end.
	key := route + "\x00" + r.URL.Path + "\x00" + r.URL.RawQuery + "\x00" + cur.ID
	if e := s.cache.get(key, time.Now().UnixNano()); e != nil {
		if s.m != nil {
			s.m.hit.Inc()
		}
		s.cache.hits.Add(1)
		return e, nil
	}
	led := false
	v, err, _ := s.cache.flight.Do(key, func() (any, error) {
		led = true
		// one request reads for all who wait: its client leaving must
		// not fail theirs (the read's own timeout still applies)
		b, err := body(r.WithContext(context.WithoutCancel(r.Context())))
		if err != nil {
			return nil, err
		}
		return s.cache.put(key, b, time.Now().UnixNano()), nil
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

// maxEstimate is the Redis time of the costliest read the parameters
// allow (a page of MaxLimit with dense previous ranks) on a board of the
// assumed size: the budget's bucket holds at least that much.
func (s *server) maxEstimate() float64 {
	return store.DefaultCostModel.Micros(plus(pageCost(store.MaxLimit), s.trendCost(store.MaxLimit, store.RankDense)), assumedMembers)
}
