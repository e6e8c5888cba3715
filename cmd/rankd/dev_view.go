package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rankd/rankd/ranking"
)

// devView shows what `rankd dev` is doing: on a terminal, a screen that
// it redraws every second (banner and a top 10 of each board); otherwise
// the banner once and a compact snapshot line every few seconds.
type devView struct {
	out    io.Writer
	tui    bool
	banner []string
	store  *ranking.Store
	boards []*ranking.Board
	sent   *atomic.Int64
	start  time.Time
}

const (
	devTopN         = 10
	devTUIInterval  = time.Second
	devLineInterval = 5 * time.Second
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run shows the view until ctx is done.
func (v *devView) run(ctx context.Context) error {
	interval := devLineInterval
	if v.tui {
		interval = devTUIInterval
	} else {
		fmt.Fprintln(v.out, strings.Join(v.banner, "\n"))
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if v.tui {
			v.drawScreen(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !v.tui {
			v.drawLine(ctx)
		}
	}
}

// top reads the current top n of b, with a short timeout.
func (v *devView) top(ctx context.Context, b *ranking.Board, n int) (ranking.Page, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return v.store.Top(ctx, b.Name, nil, "current", n, ranking.RankRow)
}

func (v *devView) rate() string {
	n := v.sent.Load()
	return fmt.Sprintf("%d events sent (%.0f/s)", n, float64(n)/time.Since(v.start).Seconds())
}

// drawScreen clears the terminal and draws the banner and the boards.
func (v *devView) drawScreen(ctx context.Context) {
	var sb strings.Builder
	sb.WriteString("\x1b[H\x1b[2J")
	for _, l := range v.banner {
		sb.WriteString(l + "\n")
	}
	fmt.Fprintf(&sb, "\n%s · %s\n", time.Now().Format("15:04:05"), v.rate())
	for _, b := range v.boards {
		page, err := v.top(ctx, b, devTopN)
		fmt.Fprintf(&sb, "\n%s: %s\n", b.Name, b.Title)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(&sb, "  (%v)\n", err)
			continue
		}
		fmt.Fprintf(&sb, "  period %s%s · %d members\n", page.Period.ID, periodSpan(b, page.Period), page.Count)
		tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  #\tmember\tvalue\t\n")
		for _, e := range page.Entries {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t\n", e.Rank, e.Member, formatValue(e.Value, b.Decimals))
		}
		_ = tw.Flush()
	}
	sb.WriteString("\nCtrl-C to stop\n")
	_, _ = io.WriteString(v.out, sb.String())
}

// drawLine writes one snapshot line: the top 3 of each board.
func (v *devView) drawLine(ctx context.Context) {
	parts := []string{time.Now().Format("15:04:05"), v.rate()}
	for _, b := range v.boards {
		page, err := v.top(ctx, b, 3)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			parts = append(parts, fmt.Sprintf("%s: %v", b.Name, err))
			continue
		}
		var top []string
		for _, e := range page.Entries {
			top = append(top, e.Member+"="+formatValue(e.Value, b.Decimals))
		}
		parts = append(parts, fmt.Sprintf("%s %s (%d): %s", b.Name, page.Period.ID, page.Count, strings.Join(top, " ")))
	}
	fmt.Fprintln(v.out, strings.Join(parts, " · "))
}

// periodSpan returns " (start – end zone)" of a period, in the board's
// zone; for a rolling board the whole window ending with the period; ""
// for the single period of a total board.
func periodSpan(b *ranking.Board, p ranking.Period) string {
	if p.Start.IsZero() || b.Window == ranking.WindowTotal {
		return ""
	}
	loc := b.Location
	if loc == nil {
		loc = time.UTC
	}
	first := p
	if b.Window == ranking.WindowRolling {
		for range b.Periods - 1 {
			first = b.Calendar().Prev(first)
		}
	}
	start, end := first.Start.In(loc), p.End.In(loc)
	endLayout := "Jan 2 15:04"
	if end.Sub(start) < 24*time.Hour {
		endLayout = "15:04"
	}
	return fmt.Sprintf(" (%s – %s %s)", start.Format("Jan 2 15:04"), end.Format(endLayout), loc)
}

// formatValue writes a fixed-point value with its decimals.
func formatValue(v int64, decimals int) string {
	if decimals <= 0 {
		return strconv.FormatInt(v, 10)
	}
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v) // also right for the smallest int64
	}
	s := strconv.FormatUint(u, 10)
	for len(s) <= decimals {
		s = "0" + s
	}
	s = s[:len(s)-decimals] + "." + s[len(s)-decimals:]
	if neg {
		s = "-" + s
	}
	return s
}
