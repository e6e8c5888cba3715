package httpapi

import (
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
)

func TestPeriodLabels(t *testing.T) {
	load := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	unit := func(s string) ranking.Unit {
		u, err := ranking.ParseUnit(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	sh, ny, kolkata := load("Asia/Shanghai"), load("America/New_York"), load("Asia/Kolkata")
	board := func(window ranking.Window, every string, periods int, loc *time.Location) *ranking.Board {
		b := &ranking.Board{Window: window, Periods: periods, Location: loc, WeekStart: time.Monday}
		if every != "" {
			b.Every = unit(every)
		}
		return b
	}
	// 26 Nov 2026 14:10 in Shanghai
	now := time.Date(2026, 11, 26, 6, 10, 0, 0, time.UTC)
	tests := []struct {
		name    string
		b       *ranking.Board
		at      time.Time
		current bool
		want    string
	}{
		{"slot", board(ranking.WindowPeriodic, "30m", 0, sh), now, true, "26 Nov 2026 14:00–14:30"},
		{"slot ending at midnight", board(ranking.WindowPeriodic, "30m", 0, sh), time.Date(2026, 11, 26, 15, 45, 0, 0, time.UTC), false, "26 Nov 2026 23:30–00:00"},
		{"hour slot in UTC", board(ranking.WindowPeriodic, "1h", 0, nil), now, true, "26 Nov 2026 06:00–07:00"},
		// 1 Nov 2026 in New York: clocks fall back at 02:00 EDT to 01:00 EST
		{"slot before the fall back", board(ranking.WindowPeriodic, "30m", 0, ny), time.Date(2026, 11, 1, 5, 10, 0, 0, time.UTC), false, "1 Nov 2026 01:00–01:30"},
		{"slot repeated by the fall back", board(ranking.WindowPeriodic, "30m", 0, ny), time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC), false, "1 Nov 2026 01:00–01:30 EST"},
		{"day", board(ranking.WindowPeriodic, "1d", 0, sh), now, true, "26 Nov 2026"},
		{"day starting in the previous UTC day", board(ranking.WindowPeriodic, "1d", 0, sh), time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC), false, "26 Nov 2026"},
		{"week", board(ranking.WindowPeriodic, "1w", 0, sh), now, true, "week of 23 Nov 2026"},
		{"month", board(ranking.WindowPeriodic, "1mo", 0, sh), now, true, "Nov 2026"},
		{"total", board(ranking.WindowTotal, "", 0, nil), now, true, "all time"},
		{"rolling days, current", board(ranking.WindowRolling, "1d", 7, sh), now, true, "last 7 days"},
		{"rolling days, earlier", board(ranking.WindowRolling, "1d", 7, sh), now.AddDate(0, 0, -1), false, "7 days to 25 Nov 2026"},
		{"rolling slots", board(ranking.WindowRolling, "30m", 4, sh), now, true, "last 2 hours"},
		{"rolling slots, earlier", board(ranking.WindowRolling, "30m", 3, sh), now.Add(-time.Hour), false, "90 minutes to 26 Nov 2026 13:30"},
		{"rolling weeks", board(ranking.WindowRolling, "1w", 4, kolkata), now, false, "4 weeks to 29 Nov 2026"},
		{"rolling months", board(ranking.WindowRolling, "1mo", 3, sh), now, false, "3 months to Nov 2026"},
		{"rolling one day", board(ranking.WindowRolling, "1d", 1, sh), now, true, "last day"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.b.Calendar().At(tt.at)
			if tt.b.Window == ranking.WindowTotal {
				p = ranking.Calendar{}.At(tt.at)
			}
			if got := periodLabel(tt.b, p, tt.current); got != tt.want {
				t.Errorf("periodLabel(%s) = %q, want %q", p.ID, got, tt.want)
			}
		})
	}
}

func TestTimeLabels(t *testing.T) {
	sh, _ := time.LoadLocation("Asia/Shanghai")
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	at := time.Date(2026, 11, 26, 6, 1, 2, 0, time.UTC)
	day := &ranking.Board{Window: ranking.WindowPeriodic, Every: ranking.Unit{Kind: ranking.UnitDay}, Location: sh}
	week := &ranking.Board{Window: ranking.WindowPeriodic, Every: ranking.Unit{Kind: ranking.UnitWeek}, Location: sh}
	total := &ranking.Board{Window: ranking.WindowTotal, Location: sh}
	for _, tt := range []struct{ got, want string }{
		{zoneLabel(day, at), "Asia/Shanghai, UTC+8"},
		{zoneLabel(&ranking.Board{Location: kolkata}, at), "Asia/Kolkata, UTC+5:30"},
		{zoneLabel(&ranking.Board{}, at), "UTC"},
		{tieLabel(day, at), "14:01:02"},
		{tieLabel(day, at.Add(250*time.Millisecond)), "14:01:02.250"},
		{tieLabel(week, at), "26 Nov 14:01:02"},
		{tieLabel(total, at), "26 Nov 2026 14:01:02"},
		{tieLabel(&ranking.Board{Window: ranking.WindowRolling, Location: sh, TieUnit: time.Minute}, at.Truncate(time.Minute)), "26 Nov 14:01"},
		{tieLabel(&ranking.Board{Window: ranking.WindowTotal, TieUnit: time.Millisecond}, at), "26 Nov 2026 06:01:02.000"},
		{groupDigits("1250000"), "1,250,000"},
		{groupDigits("-1234.50"), "-1,234.50"},
		{groupDigits("999"), "999"},
		{groupDigits("0.05"), "0.05"},
		{plural(1, "member"), "1 member"},
		{plural(1234, "member"), "1,234 members"},
		{textQuery("zone:3, room : a:b%2Cc d/é"), "zone:3,room:a%3Ab%2Cc+d%2F%C3%A9"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
