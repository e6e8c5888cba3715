package ranking

import "time"

// Update is one change to one board, produced by routing one event.
type Update struct {
	Board  string
	Dims   []string // values of Board.Dims, in order
	Member string
	// Value is the fixed-point delta (sum) or candidate value (max, min,
	// last); for multi-factor boards it is the packed sort key (see PackSort).
	Value int64
	Time  time.Time // event time
	// MsgID identifies the event for dedupe. Consecutive updates with the same
	// MsgID belong to one event.
	MsgID string
	// Base is the member's starting value the first time it appears on a
	// period of the board (sum boards with HasBase).
	Base    int64
	HasBase bool
	// StreamTime is the stream time of the partition the event came from,
	// just before the event: the greatest event time of the valid messages
	// at lower offsets of its topic-partition (zero when there is none). An
	// update of period P is late when StreamTime >= P.End + Board.Grace, so
	// every verdict is a function of the log: consumption order, worker
	// count and batch boundaries cannot change it.
	StreamTime time.Time
}

// Status is the outcome of one Update.
type Status uint8

const (
	// StatusApplied: the update is part of the board.
	StatusApplied Status = iota
	// StatusDuplicate: its event had been applied before; nothing changed.
	StatusDuplicate
	// StatusLate: its partition's stream time had passed the period's end + grace.
	StatusLate
	// StatusOutOfRange: the value or tie time would leave the exact range.
	StatusOutOfRange
)

func (s Status) String() string {
	return [...]string{"applied", "duplicate", "late", "out_of_range"}[s]
}

// Result reports what Apply did with each update, index for index.
type Result struct {
	Status []Status
	// Repeated marks the updates of duplicate events whose StatusLate or
	// StatusOutOfRange repeats the verdict of the first delivery (the
	// update was rejected once already; count it once).
	Repeated []bool
}

// Count returns how many updates have status s.
func (r Result) Count(s Status) int {
	n := 0
	for _, x := range r.Status {
		if x == s {
			n++
		}
	}
	return n
}
