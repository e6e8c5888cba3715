package ranking

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultGrace is a board's grace when none is given (NewBoard).
const DefaultGrace = 5 * time.Minute

// NewBoard returns a board named name that holds every per-board default:
// a total board in UTC, weeks starting on Monday, aggregate sum, order
// desc, no tiebreak, tie unit DefaultTieUnit and grace DefaultGrace. The
// defaults that depend on other settings (retention, the tie range of total
// boards) are resolved by Normalize.
func NewBoard(name string) *Board {
	return &Board{
		Name:      name,
		Location:  time.UTC,
		WeekStart: time.Monday,
		Aggregate: AggSum,
		Order:     Desc,
		Tiebreak:  TieNone,
		TieUnit:   DefaultTieUnit,
		Grace:     DefaultGrace,
	}
}

// Normalize resolves, in place, the settings whose zero value means "the
// default": Location (UTC), TieUnit (DefaultTieUnit), Retention of
// periodic and rolling boards (DefaultRetention), TieEpoch and TieHorizon
// of total boards (DefaultTieEpoch, DefaultTieHorizon). It is idempotent
// and leaves other settings alone; call it on a board that Validate
// accepts.
func (b *Board) Normalize() {
	if b.Location == nil {
		b.Location = time.UTC
	}
	if b.TieUnit == 0 {
		b.TieUnit = DefaultTieUnit
	}
	switch b.Window {
	case WindowTotal:
		if b.TieEpoch.IsZero() {
			b.TieEpoch = DefaultTieEpoch()
		}
		if b.TieHorizon == 0 {
			b.TieHorizon = DefaultTieHorizon
		}
	case WindowPeriodic, WindowRolling:
		if b.Retention == 0 {
			b.Retention = b.DefaultRetention()
		}
	}
}

// BoardError is one problem of a board.
type BoardError struct {
	Board string // the board's name
	// Setting is the setting at fault, named as in the configuration file
	// ("periods", "keep_top", "sort[1].field"); "" for the board as a
	// whole.
	Setting string
	Err     error
}

// Error returns `board "name": ` and the problem.
func (e *BoardError) Error() string { return fmt.Sprintf("board %q: %v", e.Board, e.Err) }

func (e *BoardError) Unwrap() error { return e.Err }

// Validate reports every problem of the board, as an errors.Join of
// *BoardError, or nil. A zero Location, TieUnit, Retention, TieEpoch or
// TieHorizon is read as "the default" (see Normalize). It checks the name,
// the window (every, periods), the settings only some windows have, the
// rules of rolling boards (aggregate sum, no keep_top, no base), keep_top,
// base, sort factor names, retention, and the score layout (NewCodec).
func (b *Board) Validate() error { return b.ValidateWritten(nil) }

// ValidateWritten is Validate for a board read from a file: written
// reports whether the file wrote a setting (named as in BoardError), so
// that a setting written with a zero value is checked as written ("periods:
// 0" on a periodic board, "retention: 0" shorter than the grace) instead of
// being read as "not set". A nil written is Validate.
func (b *Board) ValidateWritten(written func(setting string) bool) error {
	var errs []error
	fail := func(setting, format string, args ...any) {
		errs = append(errs, &BoardError{Board: b.Name, Setting: setting, Err: fmt.Errorf(format, args...)})
	}
	set := func(setting string, nonZero bool) bool {
		if written != nil {
			return written(setting)
		}
		return nonZero
	}
	if err := b.ValidateName(); err != nil {
		errs = append(errs, err)
	}
	aggOK := slices.Contains(Aggregates(), b.Aggregate)
	if !aggOK {
		fail("aggregate", "unknown aggregate %v", b.Aggregate)
	}
	everyOK, periodsOK := b.validateWindow(set, fail, aggOK)
	if b.WeekStart < time.Sunday || b.WeekStart > time.Saturday {
		fail("week_start", "unknown weekday %d", int(b.WeekStart))
	}
	for _, k := range []struct {
		setting string
		nonZero bool
	}{{"tie_epoch", !b.TieEpoch.IsZero()}, {"tie_horizon", b.TieHorizon != 0}} {
		if set(k.setting, k.nonZero) && b.Window != WindowTotal {
			fail(k.setting, "%s is only for total boards", k.setting)
		}
	}
	if set("tie_horizon", b.TieHorizon != 0) && b.TieHorizon <= 0 {
		fail("tie_horizon", "must be positive, got %v", b.TieHorizon)
	}
	if b.Decimals < 0 || b.Decimals > 18 {
		fail("decimals", "must be in [0, 18], got %d", b.Decimals)
	}
	if b.Grace < 0 {
		fail("grace", "must not be negative, got %v", b.Grace)
	}
	b.validateKeepTop(fail)
	if b.HasBase && (b.Aggregate != AggSum || b.Window == WindowRolling) {
		fail("base", "base needs a periodic or total board with aggregate sum (this one is %v with aggregate %v)", b.Window, b.Aggregate)
	}
	seen := map[string]bool{}
	for i, f := range b.Sort {
		if !seen[f.Name] && IsIdent(f.Name) {
			seen[f.Name] = true
			continue
		}
		fail(fmt.Sprintf("sort[%d].field", i), "sort factor name %q is empty, repeated or not an identifier", f.Name)
	}
	if set("retention", b.Retention != 0) {
		switch {
		case b.Window == WindowTotal:
			fail("retention", "total boards never expire: remove retention")
		case b.Retention < b.Grace:
			fail("retention", "retention %v is shorter than grace %v", b.Retention, b.Grace)
		case b.Window == WindowRolling && periodsOK:
			if least := b.DefaultRetention() - b.Grace; b.Retention < least {
				fail("retention", "a rolling board of %d × %v needs a retention of at least %v (periods+1 of the longest period)",
					b.Periods, b.Every, least)
			}
		}
	}
	// The score layout: the window's own errors are reported above, so the
	// codec checks the rest of a board whose window is complete (a rolling
	// board without periods is laid out as one period).
	if everyOK && slices.Contains(Windows(), b.Window) && (b.Window == WindowTotal || b.Every.Kind != UnitNone) {
		cb := *b
		if !periodsOK {
			cb.Periods = 1
		}
		cb.TieHorizon = max(cb.TieHorizon, 0)
		if _, err := NewCodec(&cb); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validateWindow checks the window and its settings (every, periods, a
// rolling board's aggregate) with ValidateWritten's set and fail; aggOK:
// the aggregate is known. It reports whether every is a valid period and
// whether the window's periods are, which the later checks need.
func (b *Board) validateWindow(set func(string, bool) bool, fail func(setting, format string, args ...any), aggOK bool) (everyOK, periodsOK bool) {
	everyOK = b.Every.Kind >= UnitNone && b.Every.Kind <= UnitMonth &&
		(b.Every.Kind != UnitMinutes || b.Every.Minutes >= 1 && b.Every.Minutes < 24*60)
	periodsOK = true // the window's periods, for the codec
	switch b.Window {
	case WindowTotal:
		if set("every", b.Every.Kind != UnitNone) {
			fail("every", "every is only for periodic and rolling boards")
		}
		if set("periods", b.Periods != 0) {
			fail("periods", "periods is only for rolling boards")
		}
	case WindowPeriodic:
		if set("periods", b.Periods != 0) {
			fail("periods", "periods is only for rolling boards")
		}
	case WindowRolling:
		switch l := b.Every.MaxLength(); {
		case b.Periods < 1:
			fail("periods", "a rolling board needs periods >= 1, got %d", b.Periods)
			periodsOK = false
		case everyOK && b.Every.Kind != UnitNone && int64(b.Periods) >= math.MaxInt64/int64(l)-1:
			// Its retention, periods+1 periods, must fit a Duration.
			fail("periods", "rolling window of %d periods is too long", b.Periods)
			periodsOK = false
		}
		if aggOK && b.Aggregate != AggSum {
			fail("aggregate", "a rolling board must use aggregate sum, got %v", b.Aggregate)
		}
	default:
		fail("window", "unknown window %v", b.Window)
	}
	switch {
	case !everyOK:
		fail("every", "invalid period unit (kind %d, %d minutes)", int(b.Every.Kind), b.Every.Minutes)
	case b.Window != WindowTotal && b.Every.Kind == UnitNone:
		fail("every", "a %v board needs every (30m, 1h, ..., 1d, 1w, 1mo)", b.Window)
	}
	return everyOK, periodsOK
}

// ValidateName checks the board's name, which is part of every key: it
// must match [a-z0-9_]+. The error is a *BoardError, or nil.
func (b *Board) ValidateName() error {
	switch {
	case b.Name == "":
		return &BoardError{Board: b.Name, Err: errors.New("missing name")}
	case !isBoardName(b.Name):
		return &BoardError{Board: b.Name, Setting: "name", Err: fmt.Errorf("board name %q must match [a-z0-9_]+", b.Name)}
	}
	return nil
}

func isBoardName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '_' && !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// validateKeepTop allows keep_top only where an update never lowers a
// member's rank position, so that a trimmed member can never belong back.
func (b *Board) validateKeepTop(fail func(setting, format string, args ...any)) {
	if b.KeepTop < 0 {
		fail("keep_top", "must not be negative, got %d", b.KeepTop)
	}
	if b.KeepTop <= 0 {
		return
	}
	if b.Window == WindowRolling {
		fail("keep_top", "keep_top does not work on rolling boards (members fall as periods leave the window)")
		return
	}
	ok := (b.Aggregate == AggSum && b.Order == Desc ||
		b.Aggregate == AggMax && b.Order == Desc ||
		b.Aggregate == AggMin && b.Order == Asc) &&
		(b.Tiebreak == TieNone || b.Tiebreak == TieFirst)
	if !ok {
		fail("keep_top", "keep_top needs updates that never lower a member: aggregate sum or max with order desc, "+
			"or min with order asc, and tiebreak none or first (this board: aggregate %v, order %v, tiebreak %v)",
			b.Aggregate, b.Order, b.Tiebreak)
	}
}

// IsIdent reports whether s is an identifier of routing expressions and
// sort factors: an ASCII letter or '_', then ASCII letters, digits or '_'.
func IsIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
