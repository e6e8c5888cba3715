package ranking

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzBoard builds a board from fuzzed settings. The window and aggregate
// are valid (config decodes them by name); order and tiebreak may be out of
// range (NewCodec checks them); the unit comes from ParseUnit, as in config.
func fuzzBoard(order, tiebreak, window, agg uint8, unit string, periods int, tieUnit uint8, horizon int64, sortSpec []byte) *Board {
	u, err := ParseUnit(unit)
	if err != nil {
		u = Unit{}
	}
	b := &Board{
		Name:       "fuzz",
		Window:     Window(window % 3),
		Every:      u,
		Periods:    periods,
		Aggregate:  Aggregate(agg % 4),
		Order:      Order(int(order%4) - 1),       // -1, desc, asc, 2
		Tiebreak:   Tiebreak(int(tiebreak%5) - 1), // -1, none, first, last, 3
		TieUnit:    []time.Duration{0, time.Millisecond, time.Second, time.Minute, 2 * time.Second, -time.Second, time.Nanosecond}[int(tieUnit&0x7F)%7],
		TieHorizon: time.Duration(horizon),
	}
	if tieUnit&0x80 != 0 {
		b.TieEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	for i, x := range sortSpec {
		if i == 4 {
			break
		}
		f := SortField{Name: fmt.Sprintf("f%d", i), Bits: int(x & 0x7F)}
		if x&0x80 != 0 {
			f.Order = Asc
		}
		b.Sort = append(b.Sort, f)
	}
	return b
}

// codecModel is the layout NewCodec must give b, computed independently
// (exact arithmetic with math/big): ok reports whether b fits a double.
func codecModel(b *Board) (tieBits, valueBits uint, ok bool) {
	if b.Order != Desc && b.Order != Asc || b.Tiebreak < TieNone || b.Tiebreak > TieLast {
		return 0, 0, false
	}
	unit := b.TieUnit
	if unit == 0 {
		unit = time.Second
	}
	if unit != time.Millisecond && unit != time.Second && unit != time.Minute {
		return 0, 0, false
	}
	if b.Window != WindowTotal && b.Every.Kind == UnitNone {
		return 0, 0, false
	}
	if b.Window == WindowRolling && b.Periods < 1 {
		return 0, 0, false
	}
	horizon := b.TieHorizon
	if horizon == 0 {
		horizon = 3 * 365 * 24 * time.Hour
	}
	if b.Window == WindowTotal && horizon < 0 {
		return 0, 0, false
	}
	if b.Tiebreak != TieNone {
		var span *big.Int
		switch b.Window {
		case WindowTotal:
			span = big.NewInt(int64(horizon))
		case WindowPeriodic:
			span = big.NewInt(int64(b.Every.MaxLength()))
		case WindowRolling:
			span = new(big.Int).Mul(big.NewInt(int64(b.Periods)), big.NewInt(int64(b.Every.MaxLength())))
		}
		if span.Sign() <= 0 || !span.IsInt64() {
			return 0, 0, false
		}
		// Tie offsets are 0 .. ceil(span/unit)-1; the codec reserves
		// bits for ceil(span/unit) itself.
		u := big.NewInt(int64(unit))
		maxOffset := new(big.Int).Div(new(big.Int).Add(span, new(big.Int).Sub(u, big.NewInt(1))), u)
		tieBits = uint(maxOffset.BitLen())
	}
	if len(b.Sort) == 0 {
		if tieBits+1 >= ScoreBits {
			return 0, 0, false
		}
		return tieBits, ScoreBits - tieBits - 1, true
	}
	if b.Aggregate == AggSum || b.Order != Desc || b.Window == WindowRolling {
		return 0, 0, false
	}
	total := 0
	for _, f := range b.Sort {
		if f.Bits < 1 || f.Bits > 62 {
			return 0, 0, false
		}
		total += f.Bits
	}
	if total+int(tieBits) > ScoreBits {
		return 0, 0, false
	}
	return tieBits, uint(total), true
}

// floorMod maps x into [0, n) (n > 0).
func floorMod(x, n int64) int64 {
	return int64(uint64(x) % uint64(n))
}

// FuzzCodec builds codecs from fuzzed board settings and checks NewCodec
// against an independent model of the layout (it accepts exactly the
// boards that fit 53 bits, with the model's tie and value bits, and names
// the board when it refuses), that the longest window's tie offsets fit,
// and for in-range (value, tie) pairs — the fuzzed ones, folded into range,
// and the extremes — that Encode/Decode round-trip exactly and that scores
// order as the board ranks (value, then tie in the tiebreak direction);
// out-of-range pairs are refused. Multi-factor boards also pack fuzzed
// factors with PackSort and check the lexicographic order end to end.
// The seeds run in the default suite; explore with
//
//	go test ./ranking -run '^$' -fuzz '^FuzzCodec$' -fuzztime 1m
func FuzzCodec(f *testing.F) {
	type seed struct {
		order, tiebreak, window, agg uint8
		unit                         string
		periods                      int
		tieUnit                      uint8
		horizon                      int64
		sort                         []byte
	}
	// Order 1 = desc, 2 = asc; tiebreak 1 = none, 2 = first, 3 = last;
	// window 0 total, 1 periodic, 2 rolling; agg 0 sum 1 max 2 min 3 last;
	// tie unit 0 default, 1 ms, 2 s, 3 m (+0x80: tie epoch 2026).
	for _, s := range []seed{
		{1, 2, 1, 0, "30m", 0, 0, 0, nil},                                // hot 30m, tie first
		{2, 3, 1, 0, "1d", 0, 0, 0, nil},                                 // day asc, tie last
		{1, 2, 1, 0, "1d", 0, 1, 0, nil},                                 // day, 1ms ties
		{1, 2, 1, 0, "1w", 0, 3, 0, nil},                                 // week, 1m ties
		{1, 2, 1, 0, "1mo", 0, 2, 0, nil},                                // month
		{1, 2, 2, 0, "1d", 7, 0, 0, nil},                                 // rolling 7 x 1d
		{1, 1, 2, 0, "1d", 8, 0, 0, nil},                                 // rolling, no ties
		{1, 2, 2, 0, "1h", 1 << 40, 1, 0, nil},                           // rolling too long
		{1, 2, 0, 0, "", 0, 0, 0, nil},                                   // total, default horizon
		{1, 2, 0, 0, "", 0, 0x83, int64(1040 * 7 * 24 * time.Hour), nil}, // the example's anchor_luck_total
		{1, 3, 0, 0, "", 0, 1, math.MaxInt64, nil},                       // horizon too long for 1ms
		{1, 2, 0, 0, "", 0, 2, -1, nil},                                  // negative horizon
		{1, 1, 0, 2, "", 0, 0, 0, []byte{24, 8, 0x80 | 21}},              // speedrun 24+8+21
		{1, 1, 0, 2, "", 0, 0, 0, []byte{0x80 | 24, 8, 0x80 | 32}},       // 64 bits: refused
		{1, 2, 1, 1, "30m", 0, 0, 0, []byte{24, 8, 0x80 | 10}},           // multi-factor + 11 tie bits
		{2, 1, 1, 1, "30m", 0, 0, 0, []byte{8}},                          // multi-factor asc: refused
		{1, 1, 1, 0, "1d", 0, 0, 0, []byte{8}},                           // multi-factor sum: refused
		{1, 1, 0, 3, "", 0, 0, 0, []byte{53}},                            // one 53-bit factor
		{1, 2, 1, 0, "1d", 0, 4, 0, nil},                                 // bad tie unit
		{0, 2, 1, 0, "1d", 0, 0, 0, nil},                                 // bad order
		{1, 4, 1, 0, "1d", 0, 0, 0, nil},                                 // bad tiebreak
		{1, 2, 1, 0, "", 0, 0, 0, nil},                                   // periodic without unit
		{1, 2, 2, 0, "1m", 0, 0, 0, nil},                                 // rolling without periods
		{2, 2, 1, 0, "1m", 0, 3, 0, nil},                                 // 1m slots with 1m ties: 1 tie bit
	} {
		for _, vt := range [][4]int64{{0, 0, 1, 1}, {-1, 5, 1, 3}, {math.MaxInt64, math.MinInt64, -(1 << 52), 1 << 40}} {
			f.Add(s.order, s.tiebreak, s.window, s.agg, s.unit, s.periods, s.tieUnit, s.horizon, s.sort, vt[0], vt[1], vt[2], vt[3])
		}
	}
	f.Fuzz(func(t *testing.T, order, tiebreak, window, agg uint8, unit string, periods int, tieUnit uint8, horizon int64, sortSpec []byte,
		v1, t1, v2, t2 int64) {
		if u, err := ParseUnit(unit); err == nil {
			if u.Kind == UnitMinutes && (u.Minutes < 1 || u.Minutes >= 24*60) {
				t.Fatalf("ParseUnit(%q) = %+v: minutes outside [1, 1439]", unit, u)
			}
			if again, err := ParseUnit(u.String()); err != nil || again != u {
				t.Fatalf("ParseUnit(%q) = %+v; ParseUnit(%q) = %+v, %v", unit, u, u.String(), again, err)
			}
		}
		b := fuzzBoard(order, tiebreak, window, agg, unit, periods, tieUnit, horizon, sortSpec)
		before := *b
		before.Sort = slices.Clone(b.Sort)
		c, err := NewCodec(b)
		if !reflect.DeepEqual(*b, before) {
			t.Fatalf("NewCodec modified the board: %+v, was %+v", *b, before)
		}
		wantTie, wantValue, ok := codecModel(b)
		if err != nil {
			if ok {
				t.Fatalf("NewCodec(%+v) = %v; the model fits it in %d tie + %d value bits", *b, err, wantTie, wantValue)
			}
			if !strings.HasPrefix(err.Error(), `board "fuzz": `) {
				t.Fatalf("error %q does not name the board", err)
			}
			return
		}
		if !ok {
			t.Fatalf("NewCodec(%+v) accepted (%d tie + %d value bits); the model refuses it", *b, c.TieBits, c.ValueBits)
		}
		if c.TieBits != wantTie || c.ValueBits != wantValue {
			t.Fatalf("NewCodec(%+v): %d tie + %d value bits, want %d + %d", *b, c.TieBits, c.ValueBits, wantTie, wantValue)
		}
		checkCodecLayout(t, b, c)

		lo, hi := -c.MaxValue(), c.MaxValue()
		if len(c.Sort) > 0 {
			lo = 0
		}
		inRange := func(v, tie int64) bool {
			return lo <= v && v <= hi && (c.Tiebreak == TieNone || 0 <= tie && tie <= c.MaxTie())
		}
		type pt struct {
			v, tie int64
			s      float64
		}
		var pts []pt
		encode := func(v, tie int64) {
			s, err := c.Encode(v, tie)
			if !inRange(v, tie) {
				if err == nil {
					t.Fatalf("%+v: Encode(%d, %d) = %v, want an out-of-range error", c, v, tie, s)
				}
				return
			}
			if err != nil {
				t.Fatalf("%+v: Encode(%d, %d): %v", c, v, tie, err)
			}
			if s != math.Trunc(s) || math.Abs(s) > 1<<ScoreBits {
				t.Fatalf("%+v: Encode(%d, %d) = %v: not an exact integer within 2^53", c, v, tie, s)
			}
			want := tie
			if c.Tiebreak == TieNone {
				want = 0
			}
			if gv, gt := c.Decode(s); gv != v || gt != want {
				t.Fatalf("%+v: Decode(Encode(%d, %d) = %v) = (%d, %d)", c, v, tie, s, gv, gt)
			}
			pts = append(pts, pt{v, want, s})
		}
		fv1, fv2 := lo+floorMod(v1, hi-lo+1), lo+floorMod(v2, hi-lo+1)
		ft1, ft2 := floorMod(t1, c.MaxTie()+1), floorMod(t2, c.MaxTie()+1)
		for _, p := range [][2]int64{
			{v1, t1}, {v2, t2}, // raw: in range or refused
			{fv1, ft1}, {fv2, ft2}, {fv1, ft2}, {fv2, ft1}, {fv1, min(ft1+1, c.MaxTie())}, {min(fv1+1, hi), ft1},
			{lo, 0}, {lo, c.MaxTie()}, {hi, 0}, {hi, c.MaxTie()}, {0, ft2},
			{hi + 1, 0}, {lo - 1, 0}, {0, -1}, {0, c.MaxTie() + 1}, // out of range (ties: unless TieNone)
		} {
			encode(p[0], p[1])
		}
		for _, a := range pts {
			for _, b := range pts {
				if got, want := rankOfScores(c.Order, a.s, b.s), ranksAbove(c.Order, c.Tiebreak, a.v, a.tie, b.v, b.tie); got != want {
					t.Fatalf("%+v: (%d,%d) vs (%d,%d): scores %v %v rank %d, want %d", c, a.v, a.tie, b.v, b.tie, a.s, b.s, got, want)
				}
			}
		}
		if len(c.Sort) > 0 {
			checkPackedOrder(t, c, v1, v2, ft1, ft2)
		}
	})
}

// checkCodecLayout checks the bounds of an accepted codec: scores stay
// within 2^53 (plain boards: 2^52, so that two values add exactly), the
// defaults are filled, and the last tie offset of the longest window fits.
func checkCodecLayout(t *testing.T, b *Board, c Codec) {
	t.Helper()
	limit := int64(1) << ScoreBits
	if len(c.Sort) == 0 {
		limit >>= 1
	}
	if top := c.MaxValue()<<c.TieBits + c.MaxTie(); top >= limit {
		t.Fatalf("%+v: largest score %d beyond %d", c, top, limit)
	}
	if c.TieUnit != time.Millisecond && c.TieUnit != time.Second && c.TieUnit != time.Minute {
		t.Fatalf("%+v: tie unit %v", c, c.TieUnit)
	}
	if b.Window == WindowTotal && (c.TieEpoch.IsZero() || c.TieHorizon <= 0) {
		t.Fatalf("%+v: total board without tie epoch or horizon", c)
	}
	if c.Tiebreak == TieNone {
		if c.TieBits != 0 {
			t.Fatalf("%+v: tie bits without a tiebreak", c)
		}
		return
	}
	var span time.Duration
	switch b.Window {
	case WindowTotal:
		span = c.TieHorizon
	case WindowPeriodic:
		span = b.Every.MaxLength()
	case WindowRolling:
		span = time.Duration(b.Periods) * b.Every.MaxLength()
	}
	base := c.TieEpoch
	if base.IsZero() {
		base = time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	}
	if last := c.TieOffset(base.Add(span-time.Nanosecond), base); last < 0 || last > c.MaxTie() {
		t.Fatalf("%+v: last tie offset of a %v window is %d, MaxTie %d", c, span, last, c.MaxTie())
	}
}

// checkPackedOrder packs factors drawn from v1 and v2 and checks that the
// encoded scores rank them lexicographically, each factor in its order.
func checkPackedOrder(t *testing.T, c Codec, v1, v2, tie1, tie2 int64) {
	t.Helper()
	draw := func(v int64) []int64 {
		vals := make([]int64, len(c.Sort))
		for i, f := range c.Sort {
			vals[i] = floorMod(v>>(7*i)^v<<(3*i), 1<<f.Bits)
		}
		return vals
	}
	a, b := draw(v1), draw(v2)
	pa, err := PackSort(c.Sort, a)
	if err != nil {
		t.Fatalf("PackSort(%v, %v): %v", c.Sort, a, err)
	}
	pb, err := PackSort(c.Sort, b)
	if err != nil {
		t.Fatalf("PackSort(%v, %v): %v", c.Sort, b, err)
	}
	if got := UnpackSort(c.Sort, pa); !slices.Equal(got, a) {
		t.Fatalf("UnpackSort(PackSort(%v)) = %v", a, got)
	}
	sa, err := c.Encode(pa, tie1)
	if err != nil {
		t.Fatalf("%+v: Encode(PackSort(%v) = %d): %v", c, a, pa, err)
	}
	sb, err := c.Encode(pb, tie2)
	if err != nil {
		t.Fatalf("%+v: Encode(PackSort(%v) = %d): %v", c, b, pb, err)
	}
	want := 0
	for i, f := range c.Sort {
		if a[i] != b[i] {
			want = 1
			if (a[i] > b[i]) == (f.Order == Desc) {
				want = -1
			}
			break
		}
	}
	if want == 0 {
		want = ranksAbove(c.Order, c.Tiebreak, 0, tie1, 0, tie2)
	}
	if got := rankOfScores(c.Order, sa, sb); got != want {
		t.Fatalf("%+v: factors %v (tie %d) vs %v (tie %d): scores %v %v rank %d, want %d", c, a, tie1, b, tie2, sa, sb, got, want)
	}
}
