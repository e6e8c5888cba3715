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
}

// Status is the outcome of one Update.
type Status uint8

const (
	// StatusApplied: the update is part of the board.
	StatusApplied Status = iota
	// StatusDuplicate: its event had been applied before; nothing changed.
	StatusDuplicate
	// StatusLate: its period was sealed (stream time past end + grace).
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
