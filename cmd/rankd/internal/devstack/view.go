package devstack

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
	"unicode/utf8"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// view shows what `rankd dev` is doing: on a terminal, a screen that
// it redraws every second (banner and a top 10 of each board); otherwise
// the banner once and a compact snapshot line every few seconds.
type view struct {
	out    io.Writer
	tui    bool
	banner []string
	// tuiBanner is the banner of the screen: the URLs and addresses in
	// few lines, so that 80×24 has room for a top 10.
	tuiBanner []string
	store     *store.Store
	boards    []*ranking.Board
	sent      *atomic.Int64
	start     time.Time
}

const (
	topN         = 10
	tuiInterval  = time.Second
	lineInterval = 5 * time.Second
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
func (v *view) run(ctx context.Context) error {
	interval := lineInterval
	if v.tui {
		interval = tuiInterval
		// The alternate screen (the scrollback stays as it was, and comes
		// back on exit), no cursor, and no "^C" echoed by Ctrl-C.
		restore := quietControl(v.out)
		_, _ = io.WriteString(v.out, "\x1b[?1049h\x1b[?25l")
		defer func() {
			_, _ = io.WriteString(v.out, "\x1b[?25h\x1b[?1049l")
			restore()
		}()
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
func (v *view) top(ctx context.Context, b *ranking.Board, n int) (store.Page, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return v.store.Top(ctx, b.Name, nil, "current", n, store.RankRow)
}

func (v *view) rate() string {
	n := v.sent.Load()
	return fmt.Sprintf("%d events sent (%.0f/s)", n, float64(n)/time.Since(v.start).Seconds())
}

// drawScreen clears the terminal and draws the banner and the boards,
// fitted to the terminal's size (80×24 when it cannot be read).
func (v *view) drawScreen(ctx context.Context) {
	cols, rows, ok := termSize(v.out)
	if !ok {
		cols, rows = 80, 24
	}
	banner := v.tuiBanner
	if banner == nil {
		banner = v.banner
	}
	n, shown := layout(rows, len(banner), len(v.boards))
	var pages []boardTop
	for _, b := range v.boards[:shown] {
		db := boardTop{b: b}
		if n > 0 {
			db.page, db.err = v.top(ctx, b, n)
			if db.err != nil && ctx.Err() != nil {
				return
			}
		}
		pages = append(pages, db)
	}
	status := time.Now().Format("15:04:05") + " · " + v.rate()
	if shown < len(v.boards) {
		status += fmt.Sprintf(" · %d more boards (a taller terminal shows them)", len(v.boards)-shown)
	}
	_, _ = io.WriteString(v.out, "\x1b[H\x1b[2J"+screen(banner, status, pages, n, cols))
}

// boardTop is one board's top as the dev screen shows it.
type boardTop struct {
	b    *ranking.Board
	page store.Page
	err  error
}

// Lines of the dev screen besides the banner and the boards: a blank line
// and the status line, a blank line and "Ctrl-C to stop".
const fixedLines = 4

// layout returns how many members per board (n, at most topN) and
// how many boards fit in rows, below a banner of banner lines: each board
// takes a blank line, its title, its period line, the table header and n
// rows. A full top 10 comes first: as many boards as fit with theirs,
// else one board with what fits. The banner (with the URLs) and the
// status lines always stay.
func layout(rows, banner, boards int) (n, shown int) {
	free := rows - banner - fixedLines
	const perBoard = 4 // blank, title, period, header
	if boards == 0 {
		return 0, 0
	}
	for shown = boards; shown > 0; shown-- {
		if free/shown-perBoard >= topN {
			return topN, shown
		}
	}
	if n = min(topN, free-perBoard); n >= 1 {
		return n, 1
	}
	return 0, 0
}

// screen renders the screen: every line cut to cols.
func screen(banner []string, status string, boards []boardTop, n, cols int) string {
	var lines []string
	lines = append(lines, banner...)
	lines = append(lines, "", status)
	for _, db := range boards {
		b := db.b
		lines = append(lines, "", b.Name+": "+b.Title)
		if db.err != nil {
			lines = append(lines, fmt.Sprintf("  (%v)", db.err), "")
			continue
		}
		lines = append(lines, fmt.Sprintf("  period %s%s · %d members", db.page.Period.ID, periodSpan(b, db.page.Period), db.page.Count))
		var tb strings.Builder
		tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  #\tmember\tvalue\t\n")
		for _, e := range db.page.Entries[:min(n, len(db.page.Entries))] {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t\n", e.Rank, e.Member, formatValue(e.Value, b.Decimals))
		}
		_ = tw.Flush()
		lines = append(lines, strings.Split(strings.TrimSuffix(tb.String(), "\n"), "\n")...)
	}
	lines = append(lines, "", "Ctrl-C to stop")
	for i, l := range lines {
		r := []rune(l)
		if len(r) <= cols {
			continue
		}
		// A URL is never cut: its label goes first (a URL longer than the
		// terminal wraps, still whole).
		if at := strings.Index(l, "http://"); at >= 0 {
			end := at + strings.IndexByte(l[at:]+" ", ' ')
			if utf8.RuneCountInString(l[:end]) >= cols {
				lines[i] = strings.TrimLeft(l[:end], " ")
				continue
			}
		}
		lines[i] = string(r[:max(cols-1, 0)]) + "…"
	}
	// No newline after the last line: a screen of exactly rows lines must
	// not scroll the banner away.
	return strings.Join(lines, "\n")
}

// drawLine writes one snapshot line: the top 3 of each board.
func (v *view) drawLine(ctx context.Context) {
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
