package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking"
)

// Labels of periods and times for people, as the HTML page shows them:
// in the board's zone, in English, day before month ("26 Nov 2026").

// boardZone is the board's time zone.
func boardZone(b *ranking.Board) *time.Location {
	if b.Location == nil {
		return time.UTC
	}
	return b.Location
}

// zoneLabel names the board's zone with its UTC offset at t:
// "Asia/Shanghai, UTC+8", "UTC".
func zoneLabel(b *ranking.Board, t time.Time) string {
	loc := boardZone(b)
	if loc == time.UTC || loc.String() == "UTC" {
		return "UTC"
	}
	_, off := t.In(loc).Zone()
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	o := "UTC" + sign + strconv.Itoa(off/3600)
	if m := off % 3600 / 60; m != 0 {
		o += ":" + twoDigits(m)
	}
	return loc.String() + ", " + o
}

func twoDigits(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// periodLabel names period p of board b: "26 Nov 2026 14:00–14:30" (slots),
// "26 Nov 2026" (days), "week of 23 Nov 2026", "Nov 2026", "all time";
// for a rolling board the window ending with p: "last 7 days" when p is the
// current period, else "7 days to 25 Nov 2026".
func periodLabel(b *ranking.Board, p ranking.Period, current bool) string {
	if b.Window == ranking.WindowTotal || b.Every.Kind == ranking.UnitNone {
		return "all time"
	}
	if b.Window == ranking.WindowRolling {
		n := windowLength(b.Every, b.Periods)
		if current {
			return "last " + n
		}
		return n + " to " + windowEnd(b, p)
	}
	loc := boardZone(b)
	start, end := p.Start.In(loc), p.End.In(loc)
	switch b.Every.Kind {
	case ranking.UnitMinutes:
		s := start.Format("2 Jan 2006 15:04") + "–" + end.Format("15:04")
		if strings.ContainsAny(p.ID[min(len(p.ID), 9):], "+-") {
			// the second occurrence of these wall-clock times (clocks fell back)
			s += " " + start.Format("MST")
		}
		return s
	case ranking.UnitDay:
		return start.Format("2 Jan 2006")
	case ranking.UnitWeek:
		return "week of " + start.Format("2 Jan 2006")
	case ranking.UnitMonth:
		return start.Format("Jan 2006")
	}
	return p.ID
}

// windowEnd names where a rolling window ending with p ends: the end time
// of a slot, the last day of a day or week, the month.
func windowEnd(b *ranking.Board, p ranking.Period) string {
	loc := boardZone(b)
	start, end := p.Start.In(loc), p.End.In(loc)
	switch b.Every.Kind {
	case ranking.UnitMinutes:
		return end.Format("2 Jan 2006 15:04")
	case ranking.UnitWeek:
		return end.AddDate(0, 0, -1).Format("2 Jan 2006")
	case ranking.UnitMonth:
		return start.Format("Jan 2006")
	}
	return start.Format("2 Jan 2006")
}

// windowLength says how long a rolling window of n periods of u is:
// "7 days", "2 hours", "90 minutes", "4 weeks", "3 months", "day".
func windowLength(u ranking.Unit, n int) string {
	count, unit := n, ""
	switch u.Kind {
	case ranking.UnitMinutes:
		count *= u.Minutes
		unit = "minute"
		if count%60 == 0 {
			count, unit = count/60, "hour"
		}
	case ranking.UnitDay:
		unit = "day"
	case ranking.UnitWeek:
		unit = "week"
	case ranking.UnitMonth:
		unit = "month"
	}
	if count == 1 {
		return unit
	}
	return strconv.Itoa(count) + " " + unit + "s"
}

// tieLabel writes the time a member reached its value (an entry's
// tie_time), in the board's zone and to its tie unit (minutes, seconds or
// milliseconds): the time of day on boards whose periods last a day or
// less, with the date otherwise.
func tieLabel(b *ranking.Board, t time.Time) string {
	t = t.In(boardZone(b))
	layout := "15:04"
	switch {
	case b.Window == ranking.WindowTotal:
		layout = "2 Jan 2006 15:04"
	case b.Window == ranking.WindowRolling || b.Every.Kind == ranking.UnitWeek || b.Every.Kind == ranking.UnitMonth:
		layout = "2 Jan 15:04"
	}
	switch {
	case t.Nanosecond() != 0 || (b.TieUnit > 0 && b.TieUnit < time.Second):
		layout += ":05.000"
	case b.TieUnit < time.Minute || t.Second() != 0:
		layout += ":05"
	}
	return t.Format(layout)
}
