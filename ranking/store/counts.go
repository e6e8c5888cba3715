package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/rankd/rankd/ranking"
)

// EventCount returns the updates applied to board+dims in period periodID
// ("all" for a total board) of the active generation: for a rolling board,
// to the periods of its window ending there. Every apply call counts the
// updates it applied, per stream and period, in the stream's count hash
// (<prefix>:{<tag>}:n), atomically with them; the sealed standings carry
// it as counts.events.
func (s *Store) EventCount(ctx context.Context, board string, dims []string, periodID string) (int64, error) {
	st, err := s.board(board)
	if err != nil {
		return 0, err
	}
	g, err := s.reader(ctx, board)
	if err != nil {
		return 0, err
	}
	fields := []string{periodID}
	if st.b.Window == ranking.WindowRolling {
		p, err := st.cal.Parse(periodID)
		if err != nil {
			return 0, err
		}
		fields = fields[:0]
		for w := st.cal.WindowStart(p, st.b.Periods); !w.Start.After(p.Start); w = st.cal.Next(w) {
			fields = append(fields, w.ID)
		}
	}
	vs, err := s.rdb.HMGet(ctx, Key(g.prefix, Tag(board, dims), KindCount, ""), fields...).Result()
	if err != nil {
		return 0, fmt.Errorf("reading the event counts of %s: %w", board, err)
	}
	return sumCounts(vs)
}

// sumCounts adds up the values of an HMGET of a count hash.
func sumCounts(vs []any) (int64, error) {
	var n int64
	for _, v := range vs {
		if s, ok := v.(string); ok {
			c, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("malformed event count %q", s)
			}
			n += c
		}
	}
	return n, nil
}
