package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// periodJSON is a period: its id and, except for total boards' "all", its
// [start, end) in UTC.
//
// Final (not on total boards) is true once every partition feeding the
// board has passed the period's end plus its grace: no event can change
// the period any more.
type periodJSON struct {
	ID    string `json:"id"`
	Start string `json:"start,omitempty"`
	End   string `json:"end,omitempty"`
	Final *bool  `json:"final,omitempty"`
}

func renderPeriod(b *ranking.Board, p ranking.Period, final bool) periodJSON {
	if b.Window == ranking.WindowTotal {
		return periodJSON{ID: p.ID}
	}
	return periodJSON{ID: p.ID, Start: p.Start.UTC().Format(time.RFC3339), End: p.End.UTC().Format(time.RFC3339), Final: &final}
}

// final reports whether p of b is final; a failure to tell is logged and
// reported as not final.
func (s *server) final(ctx context.Context, b *ranking.Board, p ranking.Period) bool {
	if b.Window == ranking.WindowTotal {
		return false
	}
	final, err := s.store.Final(ctx, b.Name, p)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("reading finality failed; reporting the period as not final", "board", b.Name, "period", p.ID, "err", err)
	}
	return final
}

// entryJSON is one ranked member.
type entryJSON struct {
	Rank    int64       `json:"rank"`
	Member  string      `json:"member"`
	Value   json.Number `json:"value"` // Raw / 10^decimals, exact
	Raw     int64       `json:"raw"`
	TieTime string      `json:"tie_time,omitempty"`
	Factors object      `json:"factors,omitempty"`
	// PrevRank and Trend: the member's rank in the previous period (absent
	// when it was not there) and up, down, same or new. Set by /top and
	// /around with trend=1, and always by /members; never on total boards.
	PrevRank *int64 `json:"prev_rank,omitempty"`
	Trend    string `json:"trend,omitempty"`
}

// pageJSON is the response of /top and /around.
type pageJSON struct {
	Board      string      `json:"board"`
	Dims       object      `json:"dims"`
	Period     periodJSON  `json:"period"`
	RankMode   string      `json:"rank_mode"`
	Member     string      `json:"member,omitempty"`  // around only
	Percent    json.Number `json:"percent,omitempty"` // top?percent only
	Count      int64       `json:"count"`
	Complete   bool        `json:"complete"`
	RankApprox bool        `json:"rank_approx"`
	Entries    []entryJSON `json:"entries"`
}

// memberJSON is the response of /members/{member}.
type memberJSON struct {
	Board    string     `json:"board"`
	Dims     object     `json:"dims"`
	Period   periodJSON `json:"period"`
	RankMode string     `json:"rank_mode"`
	entryJSON
	RankApprox bool        `json:"rank_approx"`
	Above      string      `json:"above,omitempty"`
	Gap        json.Number `json:"gap"`
	GapRaw     int64       `json:"gap_raw"`
	Count      int64       `json:"count"`
	// Percentile: see store.Percentile (an upper bound when rank_approx
	// is set).
	Percentile json.Number `json:"percentile"`
}

// renderer turns store entries of one board into JSON.
type renderer struct {
	b *ranking.Board
}

func (s *server) renderer(b *ranking.Board) renderer { return renderer{b: b} }

func (rd renderer) entry(rank int64, member string, value int64, tieTime time.Time) entryJSON {
	e := entryJSON{Rank: rank, Member: member, Value: fixed(value, rd.b.Decimals), Raw: value}
	if !tieTime.IsZero() {
		e.TieTime = tieTime.Format(time.RFC3339Nano)
	}
	if len(rd.b.Sort) > 0 {
		vals := ranking.UnpackSort(rd.b.Sort, value)
		e.Factors = make(object, len(vals))
		for i, f := range rd.b.Sort {
			e.Factors[i] = field{f.Name, vals[i]}
		}
	}
	return e
}

func (rd renderer) entries(es []store.Entry) []entryJSON {
	out := make([]entryJSON, len(es))
	for i, e := range es {
		out[i] = rd.entry(e.Rank, e.Member, e.Value, e.TieTime)
	}
	return out
}

// trend compares a rank with the previous period's.
func trend(rank int64, prev *int64) string {
	switch {
	case prev == nil:
		return "new"
	case rank < *prev:
		return "up"
	case rank > *prev:
		return "down"
	}
	return "same"
}

// fixed is ranking.FixedDecimal as a JSON number.
func fixed(v int64, d int) json.Number { return json.Number(ranking.FixedDecimal(v, d)) }

// field is one member of an object.
type field struct {
	Name  string
	Value any
}

// object is a JSON object whose members keep their order (a board's dims,
// a sort key's factors).
type object []field

// MarshalJSON writes the object's members in order.
func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(f.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func dimsObject(b *ranking.Board, dims []string) object {
	o := make(object, len(b.Dims))
	for i, d := range b.Dims {
		o[i] = field{d, dims[i]}
	}
	return o
}
