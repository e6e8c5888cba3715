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

// dimsBody renders GET /v1/boards/{board}/dims: a page of the board's dims
// values that have members in the period, with their counts.
func (s *server) dimsBody(r *http.Request) ([]byte, error) {
	name := r.PathValue("board")
	b, ok := s.boards[name]
	if !ok {
		return nil, unknownBoard(name)
	}
	vals := r.URL.Query()
	period := vals.Get("period")
	if err := s.checkPeriod(b, period); err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", DefaultDimsLimit, 1, store.MaxDimsLimit)
	if err != nil {
		return nil, err
	}
	cursor := vals.Get("cursor")
	if len(cursor) > maxCursor {
		return nil, badRequest(codeBadRequest, fmt.Sprintf("cursor %s: not a cursor of this listing", quote(cursor)))
	}
	var pg store.DimsPage
	var final bool
	// an SSCAN (COUNT 100) per batch of registry values, then a pipeline
	// of a ZCARD (and HLEN) per value looked at: about limit plus two
	// batches on a registry of that size or more (the registry's size is
	// not known before)
	scan := int64(min(store.MaxDimsScan, limit+2*100))
	batches := (scan + 99) / 100
	est := store.Counts{RoundTrips: 2 * batches, Commands: batches + scan, Elements: 2 * scan}
	err = s.read(r, "dims", false, estimate{c: est, board: b.Name}, func(ctx context.Context) error {
		var err error
		if pg, err = s.store.ListDims(ctx, b.Name, period, cursor, limit); err != nil {
			return err
		}
		final = s.final(ctx, b, pg.Period)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := dimsPageJSON{Board: b.Name, Period: renderPeriod(b, pg.Period, final), Dims: make([]dimsJSON, len(pg.Dims)), NextCursor: pg.Next}
	for i, d := range pg.Dims {
		out.Dims[i] = dimsJSON{Dims: dimsObject(b, d.Dims), Count: d.Count}
	}
	return marshalBody(out)
}

// maxCursor is longer than any cursor ListDims hands out.
const maxCursor = 1024
