package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// standingsStore is the read of sealed standings; *store.Store implements
// it (store.Store.Standings). A Store without it answers 404.
type standingsStore interface {
	Standings(ctx context.Context, board string, dims []string, period string) ([]byte, error)
}

// handleStandings serves GET /v1/boards/{board}/standings: the sealed
// snapshot of a board+dims and period (period required: an id or
// "previous"), exactly as published to the standings topic, latest
// revision. 404 not_found: not sealed (yet), no members, or expired.
func (s *server) handleStandings(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parseQuery(r)
	if err != nil {
		return err
	}
	if q.b.Window == ranking.WindowTotal {
		return &apiError{status: http.StatusNotFound, code: codeNotFound, msg: fmt.Sprintf("board %q is a total board: it has no sealed periods", q.b.Name)}
	}
	if q.period == "" || q.period == "current" {
		return badRequest(codeBadPeriod, "period: give the id of a sealed period (or previous)")
	}
	ss, ok := s.store.(standingsStore)
	if !ok {
		return &apiError{status: http.StatusNotFound, code: codeNotFound, msg: "no sealed standings"}
	}
	var body []byte
	// one HGET of a stored body
	err = s.read(r, "standings", false, estimate{c: store.Counts{Commands: 1, Elements: 1}, board: q.b.Name}, func(ctx context.Context) error {
		var err error
		body, err = ss.Standings(ctx, q.b.Name, q.dims, q.period)
		return err
	})
	if errors.Is(err, store.ErrNoStandings) {
		return &apiError{status: http.StatusNotFound, code: codeNotFound,
			msg: fmt.Sprintf("no sealed standings of board %q, dims %q, period %s: not final yet, no members, or expired", q.b.Name, dimsText(q.b, q.dims), q.period)}
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	_, err = w.Write(append(body, '\n'))
	return err
}
