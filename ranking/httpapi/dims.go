package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rankd/rankd/ranking/store"
)

// DefaultDimsLimit is the number of dims values /dims returns without limit.
const DefaultDimsLimit = 100

// dimsJSON is one dims value of a board in /dims.
type dimsJSON struct {
	Dims  object `json:"dims"`
	Count int64  `json:"count"`
}

// dimsPageJSON is the response of /dims.
type dimsPageJSON struct {
	Board      string     `json:"board"`
	Period     periodJSON `json:"period"`
	Dims       []dimsJSON `json:"dims"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// handleDims serves GET /v1/boards/{board}/dims: a page of the board's dims
// values that have members in the period, with their counts.
func (s *server) handleDims(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("board")
	b, ok := s.boards[name]
	if !ok {
		return &apiError{status: http.StatusNotFound, code: codeUnknownBoard, msg: fmt.Sprintf("unknown board %q", name)}
	}
	vals := r.URL.Query()
	period := vals.Get("period")
	if err := s.checkPeriod(b, period); err != nil {
		return err
	}
	limit, err := intParam(r, "limit", DefaultDimsLimit, 1, store.MaxDimsLimit)
	if err != nil {
		return err
	}
	cursor := vals.Get("cursor")
	var pg store.DimsPage
	var final bool
	err = s.read(r, false, func(ctx context.Context) error {
		var err error
		if pg, err = s.store.ListDims(ctx, b.Name, period, cursor, limit); err != nil {
			return err
		}
		final = s.final(ctx, b, pg.Period)
		return nil
	})
	if err != nil {
		return err
	}
	out := dimsPageJSON{Board: b.Name, Period: renderPeriod(b, pg.Period, final), Dims: make([]dimsJSON, len(pg.Dims)), NextCursor: pg.Next}
	for i, d := range pg.Dims {
		out.Dims[i] = dimsJSON{Dims: dimsObject(b, d.Dims), Count: d.Count}
	}
	return writeJSON(w, out)
}
