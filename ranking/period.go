package ranking

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"time"
)

// UnitKind is the kind of a period unit.
type UnitKind int

const (
	// UnitNone has a single period, "all": total boards.
	UnitNone UnitKind = iota
	// UnitMinutes is a slot of Unit.Minutes real minutes within a local day.
	UnitMinutes
	// UnitDay is a local calendar day.
	UnitDay
	// UnitWeek is a local calendar week starting on Calendar.WeekStart.
	UnitWeek
	// UnitMonth is a local calendar month.
	UnitMonth
)

// Unit is the length of a board's periods.
type Unit struct {
	Kind    UnitKind
	Minutes int // UnitMinutes only: slot length, 1..1439
}

// ParseUnit parses a period unit: "<n>m" or "<n>h" for slots shorter than a
// day (e.g. "30m", "90m", "1h"), "1d" (also "24h" and "1440m"), "1w" or "1mo".
func ParseUnit(s string) (Unit, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n <= 0 {
		return Unit{}, unitError(s)
	}
	minutes := 0
	switch suffix := s[i:]; {
	case suffix == "m" && n <= 24*60:
		minutes = n
	case suffix == "h" && n <= 24:
		minutes = n * 60
	case suffix == "d" && n == 1:
		return Unit{Kind: UnitDay}, nil
	case suffix == "w" && n == 1:
		return Unit{Kind: UnitWeek}, nil
	case suffix == "mo" && n == 1:
		return Unit{Kind: UnitMonth}, nil
	default:
		return Unit{}, unitError(s)
	}
	if minutes == 24*60 {
		return Unit{Kind: UnitDay}, nil
	}
	return Unit{Kind: UnitMinutes, Minutes: minutes}, nil
}

func unitError(s string) error {
	return fmt.Errorf("invalid period unit %q: want whole minutes or hours below a day "+
		`("30m", "90m", "1h", "12h"), "1d" (or "24h"), "1w" or "1mo"`, s)
}

// String returns the unit in ParseUnit's form, with hours when the slot
// length is a whole number of hours ("2h", "90m"). UnitNone is "total".
func (u Unit) String() string {
	switch u.Kind {
	case UnitNone:
		return "total"
	case UnitMinutes:
		if u.Minutes%60 == 0 {
			return strconv.Itoa(u.Minutes/60) + "h"
		}
		return strconv.Itoa(u.Minutes) + "m"
	case UnitDay:
		return "1d"
	case UnitWeek:
		return "1w"
	case UnitMonth:
		return "1mo"
	}
	return fmt.Sprintf("unit(%d)", int(u.Kind))
}

// MaxLength is the longest real duration one period of u can have in a zone
// whose clocks shift by at most one hour: a slot never exceeds its length; a
// day, week or month can gain one hour when clocks fall back. UnitNone has no
// bound and returns the largest Duration.
func (u Unit) MaxLength() time.Duration {
	switch u.Kind {
	case UnitMinutes:
		return time.Duration(u.Minutes) * time.Minute
	case UnitDay:
		return 25 * time.Hour
	case UnitWeek:
		return 7*24*time.Hour + time.Hour
	case UnitMonth:
		return 31*24*time.Hour + time.Hour
	}
	return math.MaxInt64
}

// Calendar cuts time into consecutive periods of Unit, with boundaries in
// Location (nil means UTC). It is a pure function of the instant: it never
// reads the clock. A local day starts at the first instant whose local time
// is at or after midnight of that date, so in zones where midnight is skipped
// by DST the day starts when the clocks jump (e.g. 01:00).
type Calendar struct {
	Unit      Unit
	Location  *time.Location
	WeekStart time.Weekday // first day of a UnitWeek period
}

// Period is one period of a Calendar: the instants in [Start, End). Start and
// End are in UTC. ID is the period's readable id, unique within the calendar:
// "20261121T1330" (slots; "20261101T0100-0500" for the second occurrence of
// a wall-clock time on a fall-back day), "20261121", "2026W47", "202611" or
// "all".
type Period struct {
	Start, End time.Time
	ID         string
}

// The single period of UnitNone.
var allTime = Period{
	Start: time.Unix(0, 0).UTC(),
	End:   time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	ID:    "all",
}

// At returns the period that contains t. For UnitNone it returns the single
// period "all", whatever t. It panics if c.Unit is not a valid unit.
func (c Calendar) At(t time.Time) Period {
	if c.Unit.Kind == UnitNone {
		return allTime
	}
	loc := c.loc()
	// d is the local date of the day period [start, end) that contains t.
	lt := t.In(loc)
	d := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, time.UTC)
	start, end := dayStart(loc, d), dayStart(loc, addDays(d, 1))
	for !t.Before(end) { // only where clocks fall back across midnight
		d, start, end = addDays(d, 1), end, dayStart(loc, addDays(d, 2))
	}
	switch c.Unit.Kind {
	case UnitMinutes:
		slot := time.Duration(c.Unit.Minutes) * time.Minute
		s := start.Add(t.Sub(start) / slot * slot)
		return Period{Start: s, End: minTime(s.Add(slot), end), ID: slotID(loc, s)}
	case UnitDay:
		return Period{Start: start, End: end, ID: d.Format("20060102")}
	case UnitWeek:
		ws := addDays(d, -((int(d.Weekday()) - int(c.WeekStart) + 7) % 7))
		mid := addDays(ws, 3) // the week belongs to the year of its 4th day
		return Period{
			Start: dayStart(loc, ws),
			End:   dayStart(loc, addDays(ws, 7)),
			ID:    fmt.Sprintf("%04dW%02d", mid.Year(), (mid.YearDay()-1)/7+1),
		}
	case UnitMonth:
		first := addDays(d, 1-d.Day())
		return Period{
			Start: dayStart(loc, first),
			End:   dayStart(loc, first.AddDate(0, 1, 0)),
			ID:    d.Format("200601"),
		}
	}
	panic(fmt.Sprintf("ranking: invalid calendar unit %v", c.Unit))
}

// Next returns the period that follows p: the one starting at p.End.
func (c Calendar) Next(p Period) Period {
	if c.Unit.Kind == UnitNone {
		return allTime
	}
	return c.At(p.End)
}

// Prev returns the period that precedes p: the one containing p.Start-1ns.
func (c Calendar) Prev(p Period) Period {
	if c.Unit.Kind == UnitNone {
		return allTime
	}
	return c.At(p.Start.Add(-1))
}

// WindowStart returns the first of the n consecutive periods that end with
// p: p stepped back n-1 periods (p itself for n <= 1). A rolling board of
// N periods sums the periods WindowStart(p, N) .. p into its board of p.
func (c Calendar) WindowStart(p Period, n int) Period {
	for i := 1; i < n; i++ {
		p = c.Prev(p)
	}
	return p
}

// Parse returns the period whose ID is id. It fails for a malformed id and
// for one no period of c has, such as a slot that does not start on the
// unit's grid, a wall-clock time skipped by DST, or week 53 of a year that
// has 52.
func (c Calendar) Parse(id string) (Period, error) {
	loc := c.loc()
	var start time.Time
	var err error
	switch c.Unit.Kind {
	case UnitNone:
		if id != allTime.ID {
			return Period{}, fmt.Errorf("invalid period id %q: want %q", id, allTime.ID)
		}
		return allTime, nil
	case UnitMinutes:
		start, err = parseSlot(loc, id)
	case UnitDay:
		start, err = parseDate(loc, "20060102", "YYYYMMDD", id)
	case UnitWeek:
		start, err = c.parseWeek(id)
	case UnitMonth:
		start, err = parseDate(loc, "200601", "YYYYMM", id)
	default:
		return Period{}, fmt.Errorf("invalid period id %q: invalid unit %v", id, c.Unit)
	}
	if err != nil {
		return Period{}, fmt.Errorf("invalid %s period id %q: %w", c.Unit, id, err)
	}
	// Every id names its period's start; At rejects what is not canonical.
	if p := c.At(start); p.ID == id && p.Start.Equal(start) {
		return p, nil
	}
	return Period{}, fmt.Errorf("invalid %s period id %q: no such period in %s", c.Unit, id, loc)
}

// parseDate returns the start of the local day named by id, formatted as
// layout (described to users as form).
func parseDate(loc *time.Location, layout, form, id string) (time.Time, error) {
	d, err := time.Parse(layout, id)
	if err != nil {
		return time.Time{}, fmt.Errorf("want %s", form)
	}
	return dayStart(loc, d), nil
}

// parseWeek returns the first day of week "YYYYWww".
func (c Calendar) parseWeek(id string) (time.Time, error) {
	if len(id) != 7 || id[4] != 'W' {
		return time.Time{}, errors.New("want YYYYWww")
	}
	year, err1 := strconv.ParseUint(id[:4], 10, 16)
	week, err2 := strconv.ParseUint(id[5:], 10, 8)
	if err1 != nil || err2 != nil || week < 1 || week > 53 {
		return time.Time{}, errors.New("want YYYYWww with week 01..53")
	}
	// Week 1's 4th day is the first day of the year that is WeekStart+3.
	jan1 := time.Date(int(year), time.January, 1, 0, 0, 0, 0, time.UTC)
	mid := addDays(jan1, (int(c.WeekStart)+3-int(jan1.Weekday())+14)%7+7*(int(week)-1))
	if mid.Year() != int(year) {
		return time.Time{}, fmt.Errorf("year %d has no week %d", year, week)
	}
	return dayStart(c.loc(), addDays(mid, -3)), nil
}

var errSlotForm = errors.New("want YYYYMMDDThhmm, optionally followed by ±hhmm")

// parseSlot returns the instant named by a slot id: the first instant with
// that local wall-clock time or, with an offset suffix, the instant with that
// wall-clock time and offset.
func parseSlot(loc *time.Location, id string) (time.Time, error) {
	const layout = "20060102T1504"
	if len(id) == len(layout)+len("-0700") {
		x, err := time.Parse(layout+"-0700", id)
		if err != nil {
			return time.Time{}, errSlotForm
		}
		return x, nil
	}
	wall, err := time.Parse(layout, id)
	if err != nil {
		return time.Time{}, errSlotForm
	}
	first, ok := firstOccurrence(loc, wall)
	if !ok {
		return time.Time{}, fmt.Errorf("local time skipped in %s", loc)
	}
	return first, nil
}

// slotID returns the id of the slot starting at s: its local date and
// wall-clock time, followed by its UTC offset when that wall-clock time
// already occurred earlier (clocks fell back).
func slotID(loc *time.Location, s time.Time) string {
	ls := s.In(loc)
	wall := time.Date(ls.Year(), ls.Month(), ls.Day(), ls.Hour(), ls.Minute(), 0, 0, time.UTC)
	id := ls.Format("20060102T1504")
	if first, _ := firstOccurrence(loc, wall); !first.Equal(s) {
		id += ls.Format("-0700")
	}
	return id
}

func (c Calendar) loc() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// Zone offsets are far below this bound, so an instant whose local time is
// some wall-clock time w lies within it of w read as UTC.
const maxOffset = 30 * time.Hour

// span is a stretch of time [start, end) with one UTC offset in a location.
type span struct {
	start, end time.Time // end is zero when the offset never changes again
	offset     time.Duration
}

// spans yields the spans of loc in time order, from the one containing from
// (trimmed to start at from) onwards.
func spans(loc *time.Location, from time.Time) iter.Seq[span] {
	return func(yield func(span) bool) {
		for t := from; ; {
			lt := t.In(loc)
			_, off := lt.Zone()
			_, end := lt.ZoneBounds()
			if !yield(span{t, end, time.Duration(off) * time.Second}) || !end.After(t) {
				return
			}
			t = end
		}
	}
}

// dayStart returns the start of local date d (given as midnight UTC): the
// first instant whose local time is d 00:00 or later. Unlike time.Date it is
// exact when midnight is skipped or repeated.
func dayStart(loc *time.Location, d time.Time) time.Time {
	for sp := range spans(loc, d.Add(-maxOffset)) {
		x := d.Add(-sp.offset) // where d 00:00 would be in this span
		if x.Before(sp.start) {
			x = sp.start // the clocks jumped over midnight
		}
		if sp.end.IsZero() || x.Before(sp.end) {
			return x.UTC()
		}
	}
	panic("unreachable: the last span never ends")
}

// firstOccurrence returns the first instant whose local time in loc is
// exactly the wall-clock time wall (given as UTC); ok is false when the
// clocks skip it.
func firstOccurrence(loc *time.Location, wall time.Time) (first time.Time, ok bool) {
	for sp := range spans(loc, wall.Add(-maxOffset)) {
		if sp.start.After(wall.Add(maxOffset)) {
			break
		}
		x := wall.Add(-sp.offset)
		if !x.Before(sp.start) && (sp.end.IsZero() || x.Before(sp.end)) {
			return x.UTC(), true
		}
	}
	return time.Time{}, false
}

func addDays(d time.Time, n int) time.Time { return d.AddDate(0, 0, n) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
