package store

import (
	"context"
	"fmt"
)

// Percentiles. A member's percentile is the share of the board's members
// whose value is the same as or worse than its own, in hundredths of a
// percent rounded down:
//
//	Percentile(better, count) = floor(10000 * (count - better) / count)
//
// where better is the number of members with a strictly better value
// (MemberInfo.Better) and count the board's members (MemberInfo.Count; on
// keep_top boards the kept-scores hash). The best value is 10000 (100%),
// equal values share their percentile, and it does not depend on the rank
// mode.

// Percentile returns the percentile, in hundredths of a percent, of a
// member with better members strictly ahead of it among count (0 when
// count is 0).
func Percentile(better, count int64) int64 {
	if count <= 0 {
		return 0
	}
	better = min(max(better, 0), count)
	return 10000 * (count - better) / count
}

// PercentRows returns how many members the top P% of count members holds,
// P being hundredths/100: ceil(count * hundredths / 10000).
func PercentRows(count, hundredths int64) int64 {
	return (count*hundredths + 9999) / 10000
}

// TopPercent returns the first ceil(count * P / 100) members of a board+dims
// in a period, P being hundredths/100 (0.01..100): count is the board's
// members (keep_top: the kept-scores hash, so the page may hold fewer
// entries than asked, with Complete false). It reads the count (ZCARD, and
// HLEN on keep_top boards), then the page as Top does, whose Count is read
// again with it: a write in between may make them differ. More than
// MaxLimit rows is ErrBadLimit.
func (s *Store) TopPercent(ctx context.Context, board string, dims []string, period string, hundredths int64, mode RankMode) (Page, error) {
	if hundredths < 1 || hundredths > 10000 {
		return Page{}, fmt.Errorf("%w: percent %s: want 0.01..100", ErrBadLimit, hundredthsString(hundredths))
	}
	if err := mode.check(); err != nil {
		return Page{}, err
	}
	v, err := s.open(ctx, board, dims, period)
	if err != nil {
		return Page{}, err
	}
	pipe := s.rdb.TxPipeline()
	sz := v.queueSizes(ctx, pipe)
	_, _ = pipe.Exec(ctx) // errors checked per command
	_, n, _, err := sz.result()
	if err != nil {
		return Page{}, fmt.Errorf("counting %s: %w", v.key, err)
	}
	rows := PercentRows(n, hundredths)
	if rows > MaxLimit {
		return Page{}, fmt.Errorf("%w: the top %s%% of %d members is %d members, more than a page holds (%d); ask for a smaller percent",
			ErrBadLimit, hundredthsString(hundredths), n, rows, MaxLimit)
	}
	if rows == 0 {
		pg := v.page()
		pg.Entries = []Entry{}
		return pg, nil
	}
	return s.Top(ctx, board, dims, period, int(rows), mode)
}

// hundredthsString writes hundredths of a percent as a decimal: 350 -> "3.5".
func hundredthsString(h int64) string {
	if h < 0 {
		return fmt.Sprint(float64(h) / 100)
	}
	s := fmt.Sprintf("%d.%02d", h/100, h%100)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}
