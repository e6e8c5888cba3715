package ranking

import (
	"fmt"
	"time"
)

// Window is how a board's periods are formed.
type Window int

const (
	// WindowTotal never resets: one sorted set per board+dims.
	WindowTotal Window = iota
	// WindowPeriodic starts a new sorted set every period of Board.Every.
	WindowPeriodic
	// WindowRolling is the sum of the last Board.Periods periods of Board.Every.
	WindowRolling
)

func (w Window) String() string {
	switch w {
	case WindowTotal:
		return "total"
	case WindowPeriodic:
		return "periodic"
	case WindowRolling:
		return "rolling"
	}
	return fmt.Sprintf("window(%d)", int(w))
}

// Aggregate says how a member's updates within one period combine.
type Aggregate int

const (
	// AggSum adds deltas.
	AggSum Aggregate = iota
	// AggMax keeps the largest value.
	AggMax
	// AggMin keeps the smallest value.
	AggMin
	// AggLast keeps the value of the update with the latest event time,
	// compared in exact milliseconds (equal times: the larger message ID
	// wins), whatever the arrival order and the tie unit.
	AggLast
)

func (a Aggregate) String() string {
	if names := [...]string{"sum", "max", "min", "last"}; a >= 0 && int(a) < len(names) {
		return names[a]
	}
	return fmt.Sprintf("aggregate(%d)", int(a))
}

// Order is the ranking direction.
type Order int

const (
	// Desc ranks the highest value first.
	Desc Order = iota
	// Asc ranks the lowest value first.
	Asc
)

func (o Order) String() string {
	switch o {
	case Desc:
		return "desc"
	case Asc:
		return "asc"
	}
	return fmt.Sprintf("order(%d)", int(o))
}

// Tiebreak orders members with equal values.
type Tiebreak int

const (
	// TieNone leaves equal values in Redis member (byte) order.
	TieNone Tiebreak = iota
	// TieFirst ranks the member that reached its value earlier higher.
	TieFirst
	// TieLast ranks the member that reached its value later higher.
	TieLast
)

func (t Tiebreak) String() string {
	if names := [...]string{"none", "first", "last"}; t >= 0 && int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("tiebreak(%d)", int(t))
}

// SortField is one factor of a multi-factor sort key packed into the score.
// Factors are listed most significant first.
type SortField struct {
	Name  string
	Order Order // Desc: larger factor ranks higher
	Bits  int   // width; the factor must be in [0, 2^Bits)
}

// Board is a declared leaderboard family. It is materialized as one sorted
// set per combination of dimension values and period. Boards are built by the
// config package (over NewBoard's defaults), checked by Validate and
// completed by Normalize.
type Board struct {
	Name  string // [a-z0-9_]+, part of every key
	Title string

	Window  Window
	Every   Unit // period length (periodic) or unit (rolling); unused for total
	Periods int  // rolling: number of periods N in the window

	Location  *time.Location // period boundaries; default UTC
	WeekStart time.Weekday   // default Monday

	Dims []string // event fields that split the board

	Aggregate Aggregate
	Order     Order
	Tiebreak  Tiebreak
	// TieUnit is the resolution of tie times: 1ms, 1s (default) or 1m.
	TieUnit time.Duration
	// TieEpoch and TieHorizon bound tie times of total boards: a tie is
	// counted in TieUnit from TieEpoch and must be below TieHorizon.
	TieEpoch   time.Time
	TieHorizon time.Duration

	Sort     []SortField
	Decimals int // fixed-point digits of values: value = round(x * 10^Decimals)

	KeepTop   int           // >0: keep only the top K in the sorted set
	Retention time.Duration // how long past periods stay readable
	Grace     time.Duration // how long after a period ends events still count
	HasBase   bool          // routes give a starting score (sum boards only)
}

// DefaultRetention is how long a board's past periods stay readable when
// Retention is not set, counted from the end of the period (in event time):
// periodic boards 2 periods plus the grace, rolling boards the window plus
// one period plus the grace, total boards forever (0). The grace is always
// included, so that a period cannot expire while it still accepts events.
func (b *Board) DefaultRetention() time.Duration {
	switch b.Window {
	case WindowPeriodic:
		return 2*b.Every.MaxLength() + b.Grace
	case WindowRolling:
		return time.Duration(b.Periods+1)*b.Every.MaxLength() + b.Grace
	}
	return 0
}

// Calendar returns the board's period calendar.
func (b *Board) Calendar() Calendar {
	loc := b.Location
	if loc == nil {
		loc = time.UTC
	}
	return Calendar{Unit: b.Every, Location: loc, WeekStart: b.WeekStart}
}

// WindowStart returns the first period counted by the board of period p:
// for a rolling board of N periods the start of its window, P(k-N+1) for p
// = P(k) (Calendar.WindowStart); p itself for periodic and total boards.
func (b *Board) WindowStart(p Period) Period {
	if b.Window != WindowRolling {
		return p
	}
	return b.Calendar().WindowStart(p, b.Periods)
}

// Late reports whether an update of period p whose partition had the given
// stream time is late: streamTime >= p.End + Grace (total boards never
// are; a zero stream time is before everything).
func (b *Board) Late(p Period, streamTime time.Time) bool {
	return b.Window != WindowTotal && !streamTime.IsZero() && !streamTime.Before(p.End.Add(b.Grace))
}
