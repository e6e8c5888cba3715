package ranking

import (
	"flag"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var calendarSeed = flag.Uint64("calendar.seed", 0, "seed of TestCalendarProperties (0: random)")

func calLocation(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	return loc
}

func calInstant(t *testing.T, s string) time.Time {
	t.Helper()
	x, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("parsing %s: %v", s, err)
	}
	return x.UTC()
}

func TestParseUnit(t *testing.T) {
	tests := []struct {
		in   string
		want Unit
		str  string
	}{
		{"30m", Unit{Kind: UnitMinutes, Minutes: 30}, "30m"},
		{"15m", Unit{Kind: UnitMinutes, Minutes: 15}, "15m"},
		{"7m", Unit{Kind: UnitMinutes, Minutes: 7}, "7m"},
		{"90m", Unit{Kind: UnitMinutes, Minutes: 90}, "90m"},
		{"60m", Unit{Kind: UnitMinutes, Minutes: 60}, "1h"},
		{"1439m", Unit{Kind: UnitMinutes, Minutes: 1439}, "1439m"},
		{"1h", Unit{Kind: UnitMinutes, Minutes: 60}, "1h"},
		{"2h", Unit{Kind: UnitMinutes, Minutes: 120}, "2h"},
		{"12h", Unit{Kind: UnitMinutes, Minutes: 720}, "12h"},
		{"24h", Unit{Kind: UnitDay}, "1d"},
		{"1440m", Unit{Kind: UnitDay}, "1d"},
		{"1d", Unit{Kind: UnitDay}, "1d"},
		{"1w", Unit{Kind: UnitWeek}, "1w"},
		{"1mo", Unit{Kind: UnitMonth}, "1mo"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseUnit(tt.in)
			if err != nil {
				t.Fatalf("ParseUnit(%q): %v", tt.in, err)
			}
			if got != tt.want || got.String() != tt.str {
				t.Errorf("ParseUnit(%q) = %+v (%s), want %+v (%s)", tt.in, got, got, tt.want, tt.str)
			}
		})
	}
	for _, in := range []string{"", "m", "0m", "0h", "-5m", "+5m", "5", "1441m", "1500m", "25h",
		"48h", "0d", "2d", "2w", "3mo", "1y", "1M", "1 d", " 1d", "1.5h", "99999999999999999999m"} {
		t.Run("reject "+in, func(t *testing.T) {
			_, err := ParseUnit(in)
			if err == nil || !strings.Contains(err.Error(), "1mo") {
				t.Errorf("ParseUnit(%q) error = %v, want one naming the accepted forms", in, err)
			}
		})
	}
}

func TestUnitMaxLength(t *testing.T) {
	tests := []struct {
		unit Unit
		want time.Duration
	}{
		{Unit{Kind: UnitMinutes, Minutes: 30}, 30 * time.Minute},
		{Unit{Kind: UnitMinutes, Minutes: 90}, 90 * time.Minute},
		{Unit{Kind: UnitDay}, 25 * time.Hour},
		{Unit{Kind: UnitWeek}, 169 * time.Hour},
		{Unit{Kind: UnitMonth}, 745 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.unit.String(), func(t *testing.T) {
			if got := tt.unit.MaxLength(); got != tt.want {
				t.Errorf("MaxLength() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCalendarAt(t *testing.T) {
	ny := calLocation(t, "America/New_York")
	berlin := calLocation(t, "Europe/Berlin")
	shanghai := calLocation(t, "Asia/Shanghai")
	havana := calLocation(t, "America/Havana")
	santiago := calLocation(t, "America/Santiago")
	cal := func(unit string, loc *time.Location) Calendar {
		u, err := ParseUnit(unit)
		if err != nil {
			t.Fatal(err)
		}
		return Calendar{Unit: u, Location: loc, WeekStart: time.Monday}
	}
	sundayWeek := Calendar{Unit: Unit{Kind: UnitWeek}, WeekStart: time.Sunday}

	tests := []struct {
		name       string
		cal        Calendar
		at         string
		start, end string
		id         string
	}{
		// Days of 23 and 25 hours.
		{"ny spring day", cal("1d", ny), "2026-03-08T12:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", "20260308"},
		{"ny fall day", cal("1d", ny), "2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", "20261101"},
		{"berlin spring day", cal("24h", berlin), "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", "20260329"},
		{"berlin fall day", cal("1d", berlin), "2026-10-25T12:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", "20261025"},
		{"nil location is utc", Calendar{Unit: Unit{Kind: UnitDay}}, "2026-11-21T23:59:59Z", "2026-11-21T00:00:00Z", "2026-11-22T00:00:00Z", "20261121"},

		// Local midnight.
		{"shanghai before midnight", cal("1d", shanghai), "2026-11-21T15:59:59Z", "2026-11-20T16:00:00Z", "2026-11-21T16:00:00Z", "20261121"},
		{"shanghai at midnight", cal("1d", shanghai), "2026-11-21T16:00:00Z", "2026-11-21T16:00:00Z", "2026-11-22T16:00:00Z", "20261122"},
		{"havana day before skipped midnight", cal("1d", havana), "2026-03-08T04:59:59Z", "2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "20260307"},
		{"havana day without midnight", cal("1d", havana), "2026-03-08T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", "20260308"},
		{"havana first slot starts 0100", cal("1h", havana), "2026-03-08T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-08T06:00:00Z", "20260308T0100"},
		{"havana day with two midnights", cal("1d", havana), "2026-11-01T04:30:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", "20261101"},
		{"havana first midnight", cal("1h", havana), "2026-11-01T04:00:00Z", "2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "20261101T0000"},
		{"havana second midnight", cal("1h", havana), "2026-11-01T05:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "20261101T0000-0500"},
		{"santiago day without midnight", cal("1d", santiago), "2026-09-06T04:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z", "20260906"},
		{"apia after skipped day", cal("1d", calLocation(t, "Pacific/Apia")), "2011-12-30T10:00:00Z", "2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z", "20111231"},
		{"santiago day before", cal("1d", santiago), "2026-09-06T03:59:59Z", "2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z", "20260905"},

		// 30m slots across DST in New York: 02:00 EST -> 03:00 EDT, 02:00 EDT -> 01:00 EST.
		{"ny spring 30m before", cal("30m", ny), "2026-03-08T06:59:59Z", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "20260308T0130"},
		{"ny spring 30m at", cal("30m", ny), "2026-03-08T07:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "20260308T0300"},
		{"ny spring 30m after", cal("30m", ny), "2026-03-08T07:45:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:00:00Z", "20260308T0330"},
		{"ny fall 30m first 0100", cal("30m", ny), "2026-11-01T05:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "20261101T0100"},
		{"ny fall 30m first 0130", cal("30m", ny), "2026-11-01T05:59:59Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "20261101T0130"},
		{"ny fall 30m second 0100", cal("30m", ny), "2026-11-01T06:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "20261101T0100-0500"},
		{"ny fall 30m second 0130", cal("30m", ny), "2026-11-01T06:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z", "20261101T0130-0500"},
		{"ny fall 30m after", cal("30m", ny), "2026-11-01T07:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z", "20261101T0200"},
		{"ny spring 1h before", cal("1h", ny), "2026-03-08T06:00:00Z", "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "20260308T0100"},
		{"ny spring 1h at", cal("1h", ny), "2026-03-08T07:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z", "20260308T0300"},
		{"ny fall 1h first", cal("1h", ny), "2026-11-01T05:59:59Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "20261101T0100"},
		{"ny fall 1h second", cal("1h", ny), "2026-11-01T06:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "20261101T0100-0500"},
		{"ny fall 1h after", cal("1h", ny), "2026-11-01T07:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z", "20261101T0200"},

		// 30m and 1h slots across DST in Berlin: 02:00 CET -> 03:00 CEST, 03:00 CEST -> 02:00 CET.
		{"berlin spring 30m before", cal("30m", berlin), "2026-03-29T00:59:59Z", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "20260329T0130"},
		{"berlin spring 30m at", cal("30m", berlin), "2026-03-29T01:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", "20260329T0300"},
		{"berlin fall 30m first 0200", cal("30m", berlin), "2026-10-25T00:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "20261025T0200"},
		{"berlin fall 30m first 0230", cal("30m", berlin), "2026-10-25T00:59:59Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "20261025T0230"},
		{"berlin fall 30m second 0200", cal("30m", berlin), "2026-10-25T01:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "20261025T0200+0100"},
		{"berlin fall 30m second 0230", cal("30m", berlin), "2026-10-25T01:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z", "20261025T0230+0100"},
		{"berlin fall 30m after", cal("30m", berlin), "2026-10-25T02:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z", "20261025T0300"},
		{"berlin fall 1h second", cal("1h", berlin), "2026-10-25T01:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z", "20261025T0200+0100"},

		// Slots that do not divide the day: the last one is cut short.
		{"7m last slot", cal("7m", nil), "2026-11-21T23:58:00Z", "2026-11-21T23:55:00Z", "2026-11-22T00:00:00Z", "20261121T2355"},
		{"7m next day", cal("7m", nil), "2026-11-22T00:00:00Z", "2026-11-22T00:00:00Z", "2026-11-22T00:07:00Z", "20261122T0000"},
		{"7m berlin 25h day last slot", cal("7m", berlin), "2026-10-25T22:59:59Z", "2026-10-25T22:58:00Z", "2026-10-25T23:00:00Z", "20261025T2358"},
		{"7m berlin before fall back", cal("7m", berlin), "2026-10-25T00:59:00Z", "2026-10-25T00:55:00Z", "2026-10-25T01:02:00Z", "20261025T0255"},
		// 02:02 CEST is not a slot start, but 02:02 CET is still its second occurrence.
		{"7m berlin repeated time", cal("7m", berlin), "2026-10-25T01:02:00Z", "2026-10-25T01:02:00Z", "2026-10-25T01:09:00Z", "20261025T0202+0100"},
		{"90m utc last slot is whole", cal("90m", nil), "2026-11-21T23:00:00Z", "2026-11-21T22:30:00Z", "2026-11-22T00:00:00Z", "20261121T2230"},
		{"90m ny 23h day last slot", cal("90m", ny), "2026-03-09T03:59:59Z", "2026-03-09T03:30:00Z", "2026-03-09T04:00:00Z", "20260308T2330"},
		{"90m ny 25h day last slot", cal("90m", ny), "2026-11-02T04:59:59Z", "2026-11-02T04:00:00Z", "2026-11-02T05:00:00Z", "20261101T2300"},

		// Weeks: ISO (Monday) and Sunday-start across year boundaries.
		{"iso 2020W53", cal("1w", nil), "2020-12-31T12:00:00Z", "2020-12-28T00:00:00Z", "2021-01-04T00:00:00Z", "2020W53"},
		{"iso 2020W53 last instant", cal("1w", nil), "2021-01-03T23:59:59Z", "2020-12-28T00:00:00Z", "2021-01-04T00:00:00Z", "2020W53"},
		{"iso 2021W01", cal("1w", nil), "2021-01-04T00:00:00Z", "2021-01-04T00:00:00Z", "2021-01-11T00:00:00Z", "2021W01"},
		{"sunday 2020W53", sundayWeek, "2020-12-31T12:00:00Z", "2020-12-27T00:00:00Z", "2021-01-03T00:00:00Z", "2020W53"},
		{"sunday 2021W01", sundayWeek, "2021-01-03T12:00:00Z", "2021-01-03T00:00:00Z", "2021-01-10T00:00:00Z", "2021W01"},
		{"iso 2026W53", cal("1w", nil), "2027-01-01T00:00:00Z", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", "2026W53"},
		{"iso 2027W01", cal("1w", nil), "2027-01-04T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-11T00:00:00Z", "2027W01"},
		{"sunday 2026W52", sundayWeek, "2027-01-01T00:00:00Z", "2026-12-27T00:00:00Z", "2027-01-03T00:00:00Z", "2026W52"},
		{"sunday 2027W01", sundayWeek, "2027-01-03T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-10T00:00:00Z", "2027W01"},
		{"iso 2026W47", cal("1w", nil), "2026-11-21T12:00:00Z", "2026-11-16T00:00:00Z", "2026-11-23T00:00:00Z", "2026W47"},
		{"iso week of ny spring", cal("1w", ny), "2026-03-08T12:00:00Z", "2026-03-02T05:00:00Z", "2026-03-09T04:00:00Z", "2026W10"},

		// Months.
		{"feb 29 2028", cal("1mo", nil), "2028-02-29T23:59:59Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", "202802"},
		{"march 2028", cal("1mo", nil), "2028-03-01T00:00:00Z", "2028-03-01T00:00:00Z", "2028-04-01T00:00:00Z", "202803"},
		{"december", cal("1mo", nil), "2026-12-31T23:59:59.999999999Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "202612"},
		{"january", cal("1mo", nil), "2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", "202701"},
		{"berlin march", cal("1mo", berlin), "2026-03-15T00:00:00Z", "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z", "202603"},
		{"shanghai month edge", cal("1mo", shanghai), "2026-11-30T16:00:00Z", "2026-11-30T16:00:00Z", "2026-12-31T16:00:00Z", "202612"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := Period{Start: calInstant(t, tt.start), End: calInstant(t, tt.end), ID: tt.id}
			if got := tt.cal.At(calInstant(t, tt.at)); got != want {
				t.Fatalf("At(%s) = %v, want %v", tt.at, got, want)
			}
			got, err := tt.cal.Parse(tt.id)
			if err != nil || got != want {
				t.Errorf("Parse(%q) = %v, %v, want %v", tt.id, got, err, want)
			}
		})
	}
}

func TestCalendarSlotsPerDay(t *testing.T) {
	ny := calLocation(t, "America/New_York")
	berlin := calLocation(t, "Europe/Berlin")
	tests := []struct {
		name  string
		loc   *time.Location
		unit  string
		day   string
		slots int
	}{
		{"ny spring 30m", ny, "30m", "20260308", 46},
		{"ny normal 30m", ny, "30m", "20260309", 48},
		{"ny fall 30m", ny, "30m", "20261101", 50},
		{"berlin spring 30m", berlin, "30m", "20260329", 46},
		{"berlin fall 30m", berlin, "30m", "20261025", 50},
		{"berlin fall 1h", berlin, "1h", "20261025", 25},
		{"utc 7m", nil, "7m", "20261121", 206},
		{"utc 90m", nil, "90m", "20261121", 16},
		{"ny spring 90m", ny, "90m", "20260308", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unit, err := ParseUnit(tt.unit)
			if err != nil {
				t.Fatal(err)
			}
			day, err := Calendar{Unit: Unit{Kind: UnitDay}, Location: tt.loc}.Parse(tt.day)
			if err != nil {
				t.Fatal(err)
			}
			c := Calendar{Unit: unit, Location: tt.loc}
			n := 0
			for p := c.At(day.Start); p.Start.Before(day.End); p = c.Next(p) {
				if !strings.HasPrefix(p.ID, tt.day+"T") {
					t.Errorf("slot %v outside day %s", p, tt.day)
				}
				n++
			}
			if n != tt.slots {
				t.Errorf("%d slots on %s, want %d", n, tt.day, tt.slots)
			}
		})
	}
}

func TestCalendarParseErrors(t *testing.T) {
	ny := calLocation(t, "America/New_York")
	tests := []struct {
		name string
		cal  Calendar
		id   string
	}{
		{"slot off the grid", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}, Location: ny}, "20261101T0115"},
		{"suffix on first occurrence", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}, Location: ny}, "20261101T0100-0400"},
		{"suffix on single occurrence", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}, Location: ny}, "20261101T0200-0500"},
		{"suffix with wrong offset", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}, Location: ny}, "20261101T0100-0600"},
		{"skipped local time", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}, Location: ny}, "20260308T0230"},
		{"day skipped in samoa", Calendar{Unit: Unit{Kind: UnitDay}, Location: calLocation(t, "Pacific/Apia")}, "20111230"},
		{"slot hour 24", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}}, "20261121T2400"},
		{"slot without time", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}}, "20261121"},
		{"slot with garbage suffix", Calendar{Unit: Unit{Kind: UnitMinutes, Minutes: 30}}, "20261121T1330Z0000"},
		{"day with time", Calendar{Unit: Unit{Kind: UnitDay}}, "20261121T0000"},
		{"day 30 feb", Calendar{Unit: Unit{Kind: UnitDay}}, "20260230"},
		{"day short", Calendar{Unit: Unit{Kind: UnitDay}}, "2026112"},
		{"day as week", Calendar{Unit: Unit{Kind: UnitDay}}, "2026W47"},
		{"week 53 of 52-week year", Calendar{Unit: Unit{Kind: UnitWeek}, WeekStart: time.Monday}, "2027W53"},
		{"week 54", Calendar{Unit: Unit{Kind: UnitWeek}, WeekStart: time.Monday}, "2026W54"},
		{"week 0", Calendar{Unit: Unit{Kind: UnitWeek}, WeekStart: time.Monday}, "2026W00"},
		{"week one digit", Calendar{Unit: Unit{Kind: UnitWeek}, WeekStart: time.Monday}, "2026W5"},
		{"week lowercase", Calendar{Unit: Unit{Kind: UnitWeek}, WeekStart: time.Monday}, "2026w47"},
		{"month 13", Calendar{Unit: Unit{Kind: UnitMonth}}, "202613"},
		{"month as day", Calendar{Unit: Unit{Kind: UnitMonth}}, "20261101"},
		{"all on periodic", Calendar{Unit: Unit{Kind: UnitDay}}, "all"},
		{"total not all", Calendar{}, "20261121"},
		{"empty", Calendar{Unit: Unit{Kind: UnitDay}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := tt.cal.Parse(tt.id); err == nil {
				t.Errorf("Parse(%q) = %v, want an error", tt.id, p)
			}
		})
	}
}

func TestCalendarTotal(t *testing.T) {
	c := Calendar{Unit: Unit{Kind: UnitNone}}
	want := Period{
		Start: time.Unix(0, 0).UTC(),
		End:   time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		ID:    "all",
	}
	for _, at := range []time.Time{time.Unix(0, 0), time.Date(2026, 11, 21, 13, 30, 0, 0, time.UTC)} {
		if got := c.At(at); got != want {
			t.Errorf("At(%v) = %v, want %v", at, got, want)
		}
	}
	if got := c.Next(want); got != want {
		t.Errorf("Next = %v, want %v", got, want)
	}
	if got := c.Prev(want); got != want {
		t.Errorf("Prev = %v, want %v", got, want)
	}
	if got, err := c.Parse("all"); err != nil || got != want {
		t.Errorf(`Parse("all") = %v, %v, want %v`, got, err, want)
	}
}

// TestCalendarProperties checks the calendar laws for random instants and a
// walk over a year, for every unit in zones with and without DST.
func TestCalendarProperties(t *testing.T) {
	seed := *calendarSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -calendar.seed=%d)", seed, seed)

	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "Asia/Shanghai",
		"America/Havana", "America/Santiago", "Australia/Lord_Howe", "Asia/Kathmandu"}
	units := []string{"7m", "30m", "1h", "90m", "1d", "1w", "1mo"}
	lo := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	hi := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	stream := uint64(0)
	for _, zone := range zones {
		loc := calLocation(t, zone)
		for _, unitName := range units {
			unit, err := ParseUnit(unitName)
			if err != nil {
				t.Fatal(err)
			}
			for _, weekStart := range []time.Weekday{time.Monday, time.Sunday} {
				if weekStart != time.Monday && unit.Kind != UnitWeek {
					continue
				}
				c := Calendar{Unit: unit, Location: loc, WeekStart: weekStart}
				stream++
				rng := rand.New(rand.NewPCG(seed, stream))
				t.Run(zone+"/"+unitName+"/"+weekStart.String(), func(t *testing.T) {
					t.Parallel()
					for range 2000 {
						at := lo.Add(time.Duration(rng.Int64N(int64(hi.Sub(lo)))))
						checkPeriodLaws(t, c, at)
					}
					walkYear(t, c, time.Date(2026, 1, 1, 0, 0, 0, 0, loc))
				})
			}
		}
	}
}

func checkPeriodLaws(t *testing.T, c Calendar, at time.Time) {
	t.Helper()
	p := c.At(at)
	if at.Before(p.Start) || !at.Before(p.End) {
		t.Fatalf("At(%v) = %v does not contain it", at, p)
	}
	if d := p.End.Sub(p.Start); d > c.Unit.MaxLength() {
		t.Fatalf("At(%v) = %v lasts %v, more than MaxLength %v", at, p, d, c.Unit.MaxLength())
	}
	if got, err := c.Parse(p.ID); err != nil || got != p {
		t.Fatalf("Parse(%q) = %v, %v, want %v", p.ID, got, err, p)
	}
	next := c.Next(p)
	if got := c.At(p.End); got != next || next.Start != p.End {
		t.Fatalf("At(End of %v) = %v, Next = %v", p, got, next)
	}
	if got := c.Prev(next); got != p {
		t.Fatalf("Prev(Next(%v)) = %v", p, got)
	}
	if got := c.Next(c.Prev(p)); got != p {
		t.Fatalf("Next(Prev(%v)) = %v", p, got)
	}
}

func walkYear(t *testing.T, c Calendar, from time.Time) {
	t.Helper()
	seen := make(map[string]bool)
	prev := c.At(from)
	for p := c.Next(prev); p.Start.Before(from.AddDate(1, 0, 0)); prev, p = p, c.Next(p) {
		if p.Start != prev.End || !prev.Start.Before(p.Start) {
			t.Fatalf("%v follows %v", p, prev)
		}
		if seen[p.ID] {
			t.Fatalf("id %q seen twice", p.ID)
		}
		seen[p.ID] = true
		if c.Unit.Kind == UnitMinutes && len(p.ID) > len("20060102T1504") {
			checkPeriodLaws(t, c, p.Start) // every fall-back slot
		}
	}
}
