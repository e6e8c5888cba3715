package ranking

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv/testseed"
)

func TestNewCodecLayouts(t *testing.T) {
	min30 := Unit{Kind: UnitMinutes, Minutes: 30}
	day := Unit{Kind: UnitDay}
	speedrun := func(bits ...int) []SortField {
		names := []string{"clear_time", "vip", "recorded"}
		orders := []Order{Asc, Desc, Asc}
		var f []SortField
		for i, b := range bits {
			f = append(f, SortField{Name: names[i], Order: orders[i], Bits: b})
		}
		return f
	}
	tests := []struct {
		name      string
		b         Board
		tieBits   uint
		valueBits uint
		wantErr   string
	}{
		{
			name:    "seed 001 layout 24+8+32 refused",
			b:       Board{Name: "speedrun", Aggregate: AggMin, Sort: speedrun(24, 8, 32)},
			wantErr: `board "speedrun": sort key needs 24+8+32=64 bits plus 0 tie bits, only 53 fit in a double`,
		},
		{
			name:      "seed 001 layout shrunk to 24+8+21",
			b:         Board{Name: "speedrun", Aggregate: AggMin, Sort: speedrun(24, 8, 21)},
			valueBits: 53,
		},
		{
			name:    "multi-factor plus tie bits refused",
			b:       Board{Name: "mf", Window: WindowPeriodic, Every: min30, Aggregate: AggMax, Tiebreak: TieFirst, Sort: speedrun(24, 8, 11)},
			wantErr: "needs 24+8+11=43 bits plus 11 tie bits, only 53",
		},
		{
			name:    "multi-factor plus tie bits fits",
			b:       Board{Name: "mf", Window: WindowPeriodic, Every: min30, Aggregate: AggMax, Tiebreak: TieFirst, Sort: speedrun(24, 8, 10)},
			tieBits: 11, valueBits: 42,
		},
		{
			name:    "multi-factor needs desc",
			b:       Board{Name: "mf", Aggregate: AggMax, Order: Asc, Sort: speedrun(8)},
			wantErr: "order desc",
		},
		{
			name:    "multi-factor needs max min or last",
			b:       Board{Name: "mf", Aggregate: AggSum, Sort: speedrun(8)},
			wantErr: "aggregate max, min or last",
		},
		{
			name:    "multi-factor zero-width factor",
			b:       Board{Name: "mf", Aggregate: AggLast, Sort: speedrun(8, 0)},
			wantErr: "bits 0",
		},
		{
			name:    "30m periodic, 1s ties: 1800 needs 11 bits",
			b:       Board{Name: "hot", Window: WindowPeriodic, Every: min30, Tiebreak: TieFirst},
			tieBits: 11, valueBits: 41,
		},
		{
			name:    "day periodic, 1s ties: 90000 needs 17 bits",
			b:       Board{Name: "day", Window: WindowPeriodic, Every: day, Tiebreak: TieLast, Order: Asc},
			tieBits: 17, valueBits: 35,
		},
		{
			name:    "day periodic, 1ms ties: 90000000 needs 27 bits",
			b:       Board{Name: "day", Window: WindowPeriodic, Every: day, Tiebreak: TieFirst, TieUnit: time.Millisecond},
			tieBits: 27, valueBits: 25,
		},
		{
			name:    "week periodic, 1m ties: 10140 needs 14 bits",
			b:       Board{Name: "week", Window: WindowPeriodic, Every: Unit{Kind: UnitWeek}, Tiebreak: TieFirst, TieUnit: time.Minute},
			tieBits: 14, valueBits: 38,
		},
		{
			name:    "month periodic, 1s ties: 2682000 needs 22 bits",
			b:       Board{Name: "month", Window: WindowPeriodic, Every: Unit{Kind: UnitMonth}, Tiebreak: TieFirst},
			tieBits: 22, valueBits: 30,
		},
		{
			name:    "rolling 7x1d, 1s ties: 630000 needs 20 bits",
			b:       Board{Name: "r7", Window: WindowRolling, Every: day, Periods: 7, Tiebreak: TieFirst},
			tieBits: 20, valueBits: 32,
		},
		{
			name:      "rolling 8x1d without ties: every bit for the value",
			b:         Board{Name: "r8", Window: WindowRolling, Every: day, Periods: 8},
			valueBits: 52,
		},
		{
			name:      "rolling 1x1d: only the headroom bit",
			b:         Board{Name: "r1", Window: WindowRolling, Every: day, Periods: 1},
			valueBits: 52,
		},
		{
			name:    "rolling needs periods",
			b:       Board{Name: "r0", Window: WindowRolling, Every: day},
			wantErr: "periods >= 1",
		},
		{
			name:    "total, default 3 year horizon at 1s: 27 bits",
			b:       Board{Name: "total", Tiebreak: TieFirst},
			tieBits: 27, valueBits: 25,
		},
		{
			name:    "total, 1m ties: 21 bits",
			b:       Board{Name: "total", Tiebreak: TieFirst, TieUnit: time.Minute},
			tieBits: 21, valueBits: 31,
		},
		{
			name:      "no tiebreak: all 53 bits for the value",
			b:         Board{Name: "plain", Window: WindowPeriodic, Every: day},
			valueBits: 52,
		},
		{
			name:    "periodic needs a unit",
			b:       Board{Name: "nounit", Window: WindowPeriodic, Tiebreak: TieFirst},
			wantErr: "needs a period unit",
		},
		{
			name:    "bad tie unit",
			b:       Board{Name: "bad", Window: WindowPeriodic, Every: day, Tiebreak: TieFirst, TieUnit: 2 * time.Second},
			wantErr: `board "bad": tie unit 2s`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.b
			c, err := NewCodec(&tt.b)
			if tt.b.TieUnit != before.TieUnit || !tt.b.TieEpoch.Equal(before.TieEpoch) || tt.b.TieHorizon != before.TieHorizon {
				t.Errorf("NewCodec modified the board: %+v", tt.b)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewCodec() error = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewCodec() error = %v", err)
			}
			if c.TieBits != tt.tieBits || c.ValueBits != tt.valueBits {
				t.Errorf("bits = tie %d value %d, want tie %d value %d", c.TieBits, c.ValueBits, tt.tieBits, tt.valueBits)
			}
			if c.TieUnit == 0 {
				t.Error("TieUnit not defaulted")
			}
			if tt.b.Window == WindowTotal && (c.TieEpoch.IsZero() || c.TieHorizon == 0) {
				t.Errorf("total board defaults not filled: epoch %v horizon %v", c.TieEpoch, c.TieHorizon)
			}
		})
	}
}

func TestCodecTotalDefaults(t *testing.T) {
	c, err := NewCodec(&Board{Name: "total", Tiebreak: TieFirst})
	if err != nil {
		t.Fatal(err)
	}
	if !c.TieEpoch.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) || c.TieHorizon != 3*365*24*time.Hour || c.TieUnit != time.Second {
		t.Errorf("defaults = epoch %v horizon %v unit %v", c.TieEpoch, c.TieHorizon, c.TieUnit)
	}
	if last := c.TieOffset(c.TieEpoch.Add(c.TieHorizon-time.Nanosecond), c.TieEpoch); last > c.MaxTie() {
		t.Errorf("last offset in horizon %d > MaxTie %d", last, c.MaxTie())
	}
}

func TestCodecBoundaries(t *testing.T) {
	codecs := []Codec{
		{Order: Desc, Tiebreak: TieFirst, TieBits: 11, ValueBits: 42},
		{Order: Asc, Tiebreak: TieLast, TieBits: 17, ValueBits: 36},
		{Order: Desc, Tiebreak: TieNone, ValueBits: 53},
		{Order: Desc, Tiebreak: TieFirst, TieBits: 20, ValueBits: 30},
		{Order: Desc, Tiebreak: TieFirst, TieBits: 11, ValueBits: 42, Sort: []SortField{{Bits: 42}}},
	}
	for _, c := range codecs {
		lo := -c.MaxValue()
		if len(c.Sort) > 0 {
			lo = 0
		}
		tests := []struct {
			name   string
			v, tie int64
			ok     bool
		}{
			{"max value", c.MaxValue(), c.MaxTie(), true},
			{"max value, tie 0", c.MaxValue(), 0, true},
			{"min value", lo, c.MaxTie(), true},
			{"min value, tie 0", lo, 0, true},
			{"max value + 1", c.MaxValue() + 1, 0, false},
			{"min value - 1", lo - 1, 0, false},
			{"tie max + 1", 0, c.MaxTie() + 1, c.Tiebreak == TieNone},
			{"tie -1", 0, -1, c.Tiebreak == TieNone},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, err := c.Encode(tt.v, tt.tie)
				if !tt.ok {
					if err == nil {
						t.Fatalf("%+v Encode(%d, %d) = %v, want error", c, tt.v, tt.tie, s)
					}
					return
				}
				if err != nil {
					t.Fatalf("%+v Encode(%d, %d): %v", c, tt.v, tt.tie, err)
				}
				if s > 1<<53 || s < -(1<<53) || float64(int64(s)) != s {
					t.Fatalf("score %v not an exact integer within 2^53", s)
				}
				wantTie := tt.tie
				if c.Tiebreak == TieNone {
					wantTie = 0
				}
				if v, tie := c.Decode(s); v != tt.v || tie != wantTie {
					t.Errorf("Decode(Encode(%d, %d)) = (%d, %d)", tt.v, tt.tie, v, tie)
				}
			})
		}
	}
}

// ranksAbove is the expected comparator, written from the board semantics
// alone: -1 when a ranks above b, +1 when below, 0 when tied.
func ranksAbove(order Order, tb Tiebreak, av, at, bv, bt int64) int {
	if av != bv {
		if (av > bv) == (order == Desc) {
			return -1
		}
		return 1
	}
	switch {
	case tb == TieNone || at == bt:
		return 0
	case (at < bt) == (tb == TieFirst):
		return -1
	}
	return 1
}

// rankOfScores compares scores as Redis serves them: descending for Desc
// boards (ZREVRANGE), ascending for Asc boards.
func rankOfScores(order Order, sa, sb float64) int {
	switch {
	case sa == sb:
		return 0
	case (sa > sb) == (order == Desc):
		return -1
	}
	return 1
}

func TestCodecRoundTripAndOrder(t *testing.T) {
	seed, rng := testseed.Rand(t)
	for range 300 {
		c := Codec{Order: Order(rng.IntN(2)), Tiebreak: Tiebreak(rng.IntN(3))}
		if c.Tiebreak != TieNone {
			c.TieBits = uint(rng.IntN(30))
		}
		c.ValueBits = 1 + uint(rng.IntN(int(53-c.TieBits)))
		multi := rng.IntN(4) == 0
		if multi {
			c.Order = Desc
			c.Sort = []SortField{{Name: "k", Bits: int(c.ValueBits)}}
		}
		lo := -c.MaxValue()
		if multi {
			lo = 0
		}
		// Draw values from a small pool so that equal values are frequent.
		vals := []int64{lo, c.MaxValue(), 0, 1, -1}
		for range 6 {
			vals = append(vals, lo+rng.Int64N(c.MaxValue()-lo+1))
		}
		ties := []int64{0, c.MaxTie(), rng.Int64N(c.MaxTie() + 1), rng.Int64N(c.MaxTie() + 1)}
		type pt struct {
			v, tie int64
			s      float64
		}
		var pts []pt
		for range 40 {
			v, tie := vals[rng.IntN(len(vals))], ties[rng.IntN(len(ties))]
			if v < lo || v > c.MaxValue() {
				continue
			}
			s, err := c.Encode(v, tie)
			if err != nil {
				t.Fatalf("seed %d: %+v Encode(%d, %d): %v", seed, c, v, tie, err)
			}
			wantTie := tie
			if c.Tiebreak == TieNone {
				wantTie = 0
			}
			if gv, gt := c.Decode(s); gv != v || gt != wantTie {
				t.Fatalf("seed %d: %+v Decode(Encode(%d, %d)) = (%d, %d)", seed, c, v, tie, gv, gt)
			}
			pts = append(pts, pt{v, tie, s})
		}
		for _, a := range pts {
			for _, b := range pts {
				want := ranksAbove(c.Order, c.Tiebreak, a.v, a.tie, b.v, b.tie)
				if got := rankOfScores(c.Order, a.s, b.s); got != want {
					t.Fatalf("seed %d: %+v: (%d,%d) vs (%d,%d): scores %v %v rank %d, want %d",
						seed, c, a.v, a.tie, b.v, b.tie, a.s, b.s, got, want)
				}
			}
		}
	}
}

func TestCodecTieOffset(t *testing.T) {
	base := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		unit time.Duration
		d    time.Duration
		want int64
	}{
		{"zero", time.Second, 0, 0},
		{"floor positive", time.Second, 1999 * time.Millisecond, 1},
		{"exact", time.Second, 2 * time.Second, 2},
		{"just before base", time.Second, -time.Millisecond, -1},
		{"exact negative", time.Second, -time.Second, -1},
		{"floor negative", time.Second, -1001 * time.Millisecond, -2},
		{"minutes", time.Minute, 90 * time.Minute, 90},
		{"millis", time.Millisecond, 1500 * time.Microsecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Codec{TieUnit: tt.unit}
			if got := c.TieOffset(base.Add(tt.d), base); got != tt.want {
				t.Errorf("TieOffset(base%+v) = %d, want %d", tt.d, got, tt.want)
			}
		})
	}
}

func TestPackSortRoundTripAndOrder(t *testing.T) {
	seed, rng := testseed.Rand(t)
	for range 500 {
		var fields []SortField
		total := 0
		for n := 1 + rng.IntN(4); n > 0 && total < 53; n-- {
			b := 1 + rng.IntN(min(20, 53-total))
			fields = append(fields, SortField{Order: Order(rng.IntN(2)), Bits: b})
			total += b
		}
		draw := func() []int64 {
			v := make([]int64, len(fields))
			for i, f := range fields {
				switch rng.IntN(4) {
				case 0:
					v[i] = 0
				case 1:
					v[i] = 1<<f.Bits - 1
				default:
					v[i] = rng.Int64N(1 << f.Bits)
				}
			}
			return v
		}
		// better: -1 when a ranks above b, field by field.
		better := func(a, b []int64) int {
			for i, f := range fields {
				if a[i] != b[i] {
					if (a[i] > b[i]) == (f.Order == Desc) {
						return -1
					}
					return 1
				}
			}
			return 0
		}
		a, b := draw(), draw()
		pa, err := PackSort(fields, a)
		if err != nil {
			t.Fatalf("seed %d: PackSort(%v, %v): %v", seed, fields, a, err)
		}
		pb, err := PackSort(fields, b)
		if err != nil {
			t.Fatalf("seed %d: PackSort(%v, %v): %v", seed, fields, b, err)
		}
		if pa < 0 || pa >= 1<<total {
			t.Fatalf("seed %d: packed %d outside [0, 2^%d)", seed, pa, total)
		}
		if got := UnpackSort(fields, pa); !slices.Equal(got, a) {
			t.Fatalf("seed %d: UnpackSort(PackSort(%v)) = %v", seed, a, got)
		}
		if got, want := rankOfScores(Desc, float64(pa), float64(pb)), better(a, b); got != want {
			t.Fatalf("seed %d: %v: %v vs %v packed %d %d: rank %d, want %d", seed, fields, a, b, pa, pb, got, want)
		}
	}
}

func TestPackSortErrors(t *testing.T) {
	f := []SortField{{Name: "time", Order: Asc, Bits: 8}, {Name: "vip", Bits: 4}}
	tests := []struct {
		name   string
		fields []SortField
		vals   []int64
	}{
		{"too few values", f, []int64{1}},
		{"negative", f, []int64{-1, 0}},
		{"too large", f, []int64{0, 16}},
		{"too wide", []SortField{{Bits: 40}, {Bits: 24}}, []int64{0, 0}},
		{"zero width", []SortField{{Bits: 0}}, []int64{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := PackSort(tt.fields, tt.vals); err == nil {
				t.Errorf("PackSort(%v) = %d, want error", tt.vals, p)
			}
		})
	}
	if p, err := PackSort(f, []int64{255, 15}); err != nil || p != 15 {
		t.Errorf("PackSort(worst time, best vip) = %d, %v; want 15", p, err)
	}
}
