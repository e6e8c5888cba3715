package devstack

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestDevScreenFits: the dev screen never needs more rows or columns than
// the terminal has, always shows the banner (the URLs), and shows fewer
// members (then fewer boards) when the terminal is small.
func TestDevScreenFits(t *testing.T) {
	cfg, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		t.Fatal(err)
	}
	banner := []string{ // the screen's banner (tuiBanner)
		"rankd dev · kafka 127.0.0.1:9092 · redis 127.0.0.1:40002 · 200 events/s",
		"  http://127.0.0.1:8080/            boards page",
		"  http://127.0.0.1:8080/v1/boards   JSON API",
		"  http://127.0.0.1:8080/metrics     metrics · config rankd-dev.yaml",
	}
	boards := cfg.Boards()[:2]
	page := func(b *ranking.Board) store.Page {
		pg := store.Page{Board: b.Name, Count: 500}
		for i := range 10 {
			pg.Entries = append(pg.Entries, store.Entry{Rank: int64(i + 1), Member: fmt.Sprintf("anchor-with-a-long-name-%d", i), Value: int64(1000 - i)})
		}
		return pg
	}
	tests := []struct {
		cols, rows    int
		wantN, wantOf int // members per board, boards shown
	}{
		{80, 24, 10, 1}, // a top 10 first (issue 22), one board
		{120, 40, 10, 2},
		{100, 60, 10, 2},
		{60, 17, 5, 1},
		{60, 15, 3, 1},
		{40, 12, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d", tt.cols, tt.rows), func(t *testing.T) {
			n, shown := layout(tt.rows, len(banner), len(boards))
			if n != tt.wantN || shown != tt.wantOf {
				t.Fatalf("layout = %d members × %d boards, want %d × %d", n, shown, tt.wantN, tt.wantOf)
			}
			var dbs []boardTop
			for _, b := range boards[:shown] {
				dbs = append(dbs, boardTop{b: b, page: page(b)})
			}
			screen := screen(banner, "12:00:00 · 100 events sent (100/s)", dbs, n, tt.cols)
			lines := strings.Split(screen, "\n")
			if len(lines) > tt.rows {
				t.Errorf("%d lines for %d rows:\n%s", len(lines), tt.rows, screen)
			}
			for _, l := range lines {
				if utf8.RuneCountInString(l) > tt.cols {
					t.Errorf("line of %d columns for %d: %q", utf8.RuneCountInString(l), tt.cols, l)
				}
			}
			for _, url := range []string{"http://127.0.0.1:8080/ ", "http://127.0.0.1:8080/v1/boards", "http://127.0.0.1:8080/metrics"} {
				if !strings.Contains(screen, url) {
					t.Errorf("URL %q not on the screen:\n%s", url, screen)
				}
			}
			if got := strings.Count(screen, "anchor-with-a-long-name-"); got != n*shown {
				t.Errorf("%d member rows, want %d", got, n*shown)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	for _, tt := range []struct {
		v    int64
		dec  int
		want string
	}{
		{0, 0, "0"}, {1234, 0, "1234"}, {-5, 0, "-5"}, {1234, 2, "12.34"}, {5, 2, "0.05"}, {-5, 3, "-0.005"},
		{-1 << 63, 2, "-92233720368547758.08"},
	} {
		if got := formatValue(tt.v, tt.dec); got != tt.want {
			t.Errorf("formatValue(%d, %d) = %q, want %q", tt.v, tt.dec, got, tt.want)
		}
	}
}
