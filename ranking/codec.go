package ranking

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ScoreBits is the number of bits of an integer that a Redis score (an IEEE
// double) holds exactly: every integer in [-2^53, 2^53] is representable.
const ScoreBits = 53

// Default tie resolution and range of total boards.
const (
	// DefaultTieUnit is the tie resolution when Board.TieUnit is zero.
	DefaultTieUnit = time.Second
	// DefaultTieHorizon is how long after TieEpoch the tie times of a total
	// board fit when Board.TieHorizon is zero (3 × 365 days).
	DefaultTieHorizon = 3 * 365 * 24 * time.Hour
)

// DefaultTieEpoch is the origin of tie times on total boards whose
// Board.TieEpoch is zero: 2025-01-01T00:00:00Z.
func DefaultTieEpoch() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

// Codec packs a member's value and tie time into one Redis score:
//
//	score = value * 2^TieBits + part,  0 <= part <= MaxTie
//
// where part = tie for (TieFirst, Asc) and (TieLast, Desc), and
// part = MaxTie - tie for (TieFirst, Desc) and (TieLast, Asc). Scores therefore
// order by value, then by tie time in the board's tiebreak direction, and stay
// within ±2^53 so that every score is an exact integer in a double.
//
// The tie is an offset in TieUnit from the start of the period (periodic
// boards), of the window (rolling boards) or from TieEpoch (total boards); see
// TieOffset. TieBits is just wide enough for the longest possible period or
// window (or TieHorizon). The value gets the remaining bits: values must
// satisfy |v| <= MaxValue, and multi-factor values (packed with PackSort,
// "bigger is better") 0 <= v <= MaxValue.
//
// Plain boards keep one bit of headroom (values stay below 2^52 in
// magnitude) so that adding two in-range values is always exact. Rolling
// boards keep the window sum within ±MaxValue by bounding each period's value
// to MaxValue/Periods (the store enforces it).
type Codec struct {
	Order     Order
	Tiebreak  Tiebreak
	TieBits   uint
	ValueBits uint
	// TieUnit is the tie resolution: 1ms, 1s or 1m. It is set for every board
	// (also TieNone ones) because the `last` aggregate compares times
	// quantized to it.
	TieUnit time.Duration
	Sort    []SortField
	// TieEpoch and TieHorizon bound the tie times of total boards (zero for
	// other windows): ties count TieUnit from TieEpoch, below TieHorizon.
	TieEpoch   time.Time
	TieHorizon time.Duration
}

// NewCodec returns the score layout of board b, with defaults (TieUnit,
// TieEpoch, TieHorizon) filled into the Codec; b is not modified. It fails
// when the layout does not fit the 53 exact bits of a double or the board's
// tie or sort settings are invalid; the error is a *BoardError.
func NewCodec(b *Board) (Codec, error) {
	c := Codec{Order: b.Order, Tiebreak: b.Tiebreak, TieUnit: b.TieUnit, Sort: slices.Clone(b.Sort)}
	// fail names the setting at fault as BoardError does.
	fail := func(setting, format string, args ...any) (Codec, error) {
		return Codec{}, &BoardError{Board: b.Name, Setting: setting, Err: fmt.Errorf(format, args...)}
	}
	if b.Order != Desc && b.Order != Asc {
		return fail("order", "unknown order %v", b.Order)
	}
	if b.Tiebreak < TieNone || b.Tiebreak > TieLast {
		return fail("tiebreak", "unknown tiebreak %d", int(b.Tiebreak))
	}
	if c.TieUnit == 0 {
		c.TieUnit = DefaultTieUnit
	}
	switch c.TieUnit {
	case time.Millisecond, time.Second, time.Minute:
	default:
		return fail("tie_unit", "tie unit %v: must be 1ms, 1s or 1m", b.TieUnit)
	}
	if b.Window != WindowTotal && b.Every.Kind == UnitNone {
		return fail("every", "%v window needs a period unit", b.Window)
	}
	// One bit of headroom: the sum of two in-range values stays exact in a
	// double, which lets the store add first and range-check the result.
	const headroom = 1
	if b.Window == WindowRolling && b.Periods < 1 {
		return fail("periods", "rolling window needs periods >= 1, got %d", b.Periods)
	}
	if b.Window == WindowTotal {
		c.TieEpoch, c.TieHorizon = b.TieEpoch, b.TieHorizon
		if c.TieEpoch.IsZero() {
			c.TieEpoch = DefaultTieEpoch()
		}
		if c.TieHorizon == 0 {
			c.TieHorizon = DefaultTieHorizon
		}
		if c.TieHorizon < 0 {
			return fail("tie_horizon", "tie horizon %v must be positive", c.TieHorizon)
		}
	}
	if b.Tiebreak != TieNone {
		var span time.Duration // longest tie offset range, in time
		switch b.Window {
		case WindowTotal:
			span = c.TieHorizon
		case WindowPeriodic:
			span = b.Every.MaxLength()
		case WindowRolling:
			l := b.Every.MaxLength()
			if l > 0 && int64(b.Periods) > math.MaxInt64/int64(l) {
				return fail("periods", "rolling window of %d periods is too long", b.Periods)
			}
			span = time.Duration(b.Periods) * l
		default:
			return fail("window", "unknown window %v", b.Window)
		}
		if span <= 0 {
			return fail("every", "%v window has no period length for tie times", b.Window)
		}
		maxOffset := span / c.TieUnit // ceil, without overflow
		if span%c.TieUnit != 0 {
			maxOffset++
		}
		c.TieBits = uint(bits.Len64(uint64(maxOffset)))
	}
	if len(b.Sort) == 0 {
		if c.TieBits+headroom >= ScoreBits {
			return fail("tiebreak", "%d tie bits and %d rolling bits leave no value bits in a double's %d",
				c.TieBits, headroom, ScoreBits)
		}
		c.ValueBits = ScoreBits - c.TieBits - headroom
		return c, nil
	}

	// Multi-factor: the packed key is the value.
	switch b.Aggregate {
	case AggMax, AggMin, AggLast:
	default:
		return fail("sort", "multi-factor sort needs aggregate max, min or last, not %v", b.Aggregate)
	}
	if b.Order != Desc {
		return fail("sort", "multi-factor sort needs order desc (each factor has its own order)")
	}
	if b.Window == WindowRolling {
		return fail("sort", "multi-factor sort cannot roll (rolling boards sum)")
	}
	parts := make([]string, len(b.Sort))
	total := 0
	for i, f := range b.Sort {
		if f.Bits < 1 || f.Bits > 62 {
			return fail(fmt.Sprintf("sort[%d].bits", i), "sort factor %q: bits %d out of [1, 62]", f.Name, f.Bits)
		}
		total += f.Bits
		parts[i] = strconv.Itoa(f.Bits)
	}
	if total+int(c.TieBits) > ScoreBits {
		return fail("sort", "sort key needs %s=%d bits plus %d tie bits, only %d fit in a double",
			strings.Join(parts, "+"), total, c.TieBits, ScoreBits)
	}
	c.ValueBits = uint(total)
	return c, nil
}

// MaxValue is the largest value magnitude the codec encodes: 2^ValueBits - 1.
func (c Codec) MaxValue() int64 { return 1<<c.ValueBits - 1 }

// MaxTie is the largest tie offset the codec encodes: 2^TieBits - 1.
func (c Codec) MaxTie() int64 { return 1<<c.TieBits - 1 }

// Encode returns the score of value with tie offset tie. It fails when
// |value| > MaxValue (value < 0 on multi-factor boards) or tie is outside
// [0, MaxTie]. On TieNone boards tie is ignored.
func (c Codec) Encode(value, tie int64) (float64, error) {
	lo := -c.MaxValue()
	if len(c.Sort) > 0 {
		lo = 0
	}
	if value < lo || value > c.MaxValue() {
		return 0, fmt.Errorf("value %d out of range [%d, %d]", value, lo, c.MaxValue())
	}
	var part int64
	if c.Tiebreak != TieNone {
		if tie < 0 || tie > c.MaxTie() {
			return 0, fmt.Errorf("tie %d out of range [0, %d]", tie, c.MaxTie())
		}
		part = tie
		if c.invertTie() {
			part = c.MaxTie() - tie
		}
	}
	// |value| < 2^ValueBits and ValueBits+TieBits <= 53: the int64 is exact
	// and so is its conversion.
	return float64(value<<c.TieBits + part), nil
}

// Decode is the inverse of Encode. It also decodes negative scores (value is
// floor(score / 2^TieBits)). On TieNone boards tie is 0.
func (c Codec) Decode(score float64) (value, tie int64) {
	s := int64(math.Floor(score))
	value = s >> c.TieBits // arithmetic shift: floor division
	part := s & c.MaxTie()
	if c.Tiebreak == TieNone {
		return value, 0
	}
	if c.invertTie() {
		return value, c.MaxTie() - part
	}
	return value, part
}

// invertTie reports whether a later tie must give a smaller score.
func (c Codec) invertTie() bool {
	return (c.Tiebreak == TieFirst) == (c.Order == Desc)
}

// TieOffset returns floor((t - base) / TieUnit), rounding towards -inf also
// for t before base. It is the quantized time used for ties and for the
// `last` aggregate.
func (c Codec) TieOffset(t, base time.Time) int64 {
	u := c.TieUnit
	if u <= 0 {
		u = DefaultTieUnit
	}
	return FloorDiv(int64(t.Sub(base)), int64(u))
}

// FloorDiv returns floor(a / b), rounding towards -inf (Go's / truncates
// towards 0): the quantization of times to tie units, also of times before
// the origin. It panics if b is 0.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// PackSort packs the factors vals (vals[i] in [0, 2^fields[i].Bits)) into one
// "bigger is better" integer, most significant field first: a Desc factor is
// stored as v, an Asc factor as 2^Bits-1-v. The fields must total at most 63
// bits.
func PackSort(fields []SortField, vals []int64) (int64, error) {
	if len(vals) != len(fields) {
		return 0, fmt.Errorf("sort key has %d factors, got %d values", len(fields), len(vals))
	}
	var packed int64
	total := 0
	for i, f := range fields {
		if f.Bits < 1 || total+f.Bits > 63 {
			return 0, fmt.Errorf("sort factor %q: bits %d do not fit (total %d of 63)", f.Name, f.Bits, total)
		}
		total += f.Bits
		maxV := int64(1)<<f.Bits - 1
		v := vals[i]
		if v < 0 || v > maxV {
			return 0, fmt.Errorf("sort factor %q: %d out of range [0, %d]", f.Name, v, maxV)
		}
		if f.Order == Asc {
			v = maxV - v
		}
		packed = packed<<f.Bits | v
	}
	return packed, nil
}

// UnpackSort is the inverse of PackSort.
func UnpackSort(fields []SortField, packed int64) []int64 {
	vals := make([]int64, len(fields))
	for i := len(fields) - 1; i >= 0; i-- {
		f := fields[i]
		maxV := int64(1)<<f.Bits - 1
		v := packed & maxV
		packed >>= f.Bits
		if f.Order == Asc {
			v = maxV - v
		}
		vals[i] = v
	}
	return vals
}

// FixedDecimal renders v / 10^d exactly as a decimal number (trailing
// zeros dropped): how the API and the standings show a value of a board
// with decimals.
func FixedDecimal(v int64, d int) string {
	s := strconv.FormatInt(v, 10)
	if d <= 0 {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) <= d {
		s = strings.Repeat("0", d-len(s)+1) + s
	}
	s = s[:len(s)-d] + "." + s[len(s)-d:]
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if neg && s != "0" {
		s = "-" + s
	}
	return s
}
