package ranking

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestNewBoardDefaults(t *testing.T) {
	b := NewBoard("b")
	want := Board{Name: "b", Location: time.UTC, WeekStart: time.Monday, Aggregate: AggSum, Order: Desc,
		Tiebreak: TieNone, TieUnit: time.Second, Grace: 5 * time.Minute}
	if b.Name != want.Name || b.Location != want.Location || b.WeekStart != want.WeekStart || b.Aggregate != want.Aggregate ||
		b.Order != want.Order || b.Tiebreak != want.Tiebreak || b.TieUnit != want.TieUnit || b.Grace != want.Grace ||
		b.Window != WindowTotal || b.Retention != 0 || !b.TieEpoch.IsZero() || b.TieHorizon != 0 {
		t.Fatalf("NewBoard = %+v, want %+v", *b, want)
	}
	if err := b.Validate(); err != nil {
		t.Fatalf("NewBoard refused: %v", err)
	}
}

func TestNormalize(t *testing.T) {
	day := Unit{Kind: UnitDay}
	m30 := Unit{Kind: UnitMinutes, Minutes: 30}
	for _, tt := range []struct {
		name string
		b    Board
		want func(b *Board) bool
	}{
		{"periodic: 2 periods + grace", Board{Name: "p", Window: WindowPeriodic, Every: m30, Grace: 72 * time.Hour},
			func(b *Board) bool { return b.Retention == 73*time.Hour }},
		{"periodic 1d, grace 0: 2 × 25h", Board{Name: "p", Window: WindowPeriodic, Every: day},
			func(b *Board) bool { return b.Retention == 50*time.Hour }},
		{"rolling: (N+1) periods + grace", Board{Name: "r", Window: WindowRolling, Every: day, Periods: 7, Grace: 5 * time.Minute},
			func(b *Board) bool { return b.Retention == 8*25*time.Hour+5*time.Minute }},
		{"a retention given stays", Board{Name: "p", Window: WindowPeriodic, Every: day, Retention: 90 * 24 * time.Hour},
			func(b *Board) bool { return b.Retention == 90*24*time.Hour }},
		{"total: tie range, no retention", Board{Name: "t"},
			func(b *Board) bool {
				return b.Retention == 0 && b.TieEpoch.Equal(DefaultTieEpoch()) && b.TieHorizon == DefaultTieHorizon
			}},
		{"total: a tie range given stays", Board{Name: "t", TieEpoch: time.Unix(0, 0), TieHorizon: time.Hour},
			func(b *Board) bool { return b.TieEpoch.Equal(time.Unix(0, 0)) && b.TieHorizon == time.Hour }},
		{"location and tie unit", Board{Name: "p", Window: WindowPeriodic, Every: day},
			func(b *Board) bool { return b.Location == time.UTC && b.TieUnit == time.Second }},
		{"periodic: no tie range", Board{Name: "p", Window: WindowPeriodic, Every: day},
			func(b *Board) bool { return b.TieEpoch.IsZero() && b.TieHorizon == 0 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b
			b.Normalize()
			if !tt.want(&b) {
				t.Fatalf("Normalize: %+v", b)
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("the normalized board is refused: %v", err)
			}
			again := b
			again.Normalize()
			if !boardsEqual(again, b) {
				t.Fatalf("Normalize is not idempotent: %+v, then %+v", b, again)
			}
		})
	}
}

func boardsEqual(a, b Board) bool {
	return a.Retention == b.Retention && a.Location == b.Location && a.TieUnit == b.TieUnit &&
		a.TieEpoch.Equal(b.TieEpoch) && a.TieHorizon == b.TieHorizon
}

// problem is one expected BoardError.
type problem struct{ setting, msg string }

func problems(t *testing.T, err error) []problem {
	t.Helper()
	var out []problem
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %v is not joined", err)
	}
	for _, e := range j.Unwrap() {
		var be *BoardError
		if !errors.As(e, &be) {
			t.Fatalf("error %v (%T) is not a *BoardError", e, e)
		}
		if be.Error() != `board "`+be.Board+`": `+be.Err.Error() {
			t.Fatalf("Error() = %q", be.Error())
		}
		out = append(out, problem{be.Setting, be.Err.Error()})
	}
	return out
}

func TestValidate(t *testing.T) {
	day := Unit{Kind: UnitDay}
	per := func(edit func(b *Board)) Board {
		b := *NewBoard("b")
		b.Window, b.Every = WindowPeriodic, day
		edit(&b)
		return b
	}
	roll := func(edit func(b *Board)) Board {
		return per(func(b *Board) { b.Window, b.Periods = WindowRolling, 7; edit(b) })
	}
	total := func(edit func(b *Board)) Board {
		b := *NewBoard("b")
		edit(&b)
		return b
	}
	wide := []SortField{{Name: "a", Bits: 30}, {Name: "c", Bits: 30}}
	for _, tt := range []struct {
		name string
		b    Board
		want []problem
	}{
		{"periodic", per(func(b *Board) {}), nil},
		{"rolling", roll(func(b *Board) {}), nil},
		{"total", total(func(b *Board) {}), nil},
		{"missing name", per(func(b *Board) { b.Name = "" }), []problem{{"", "missing name"}}},
		{"bad name", per(func(b *Board) { b.Name = "Hot-B" }), []problem{{"name", `board name "Hot-B" must match [a-z0-9_]+`}}},
		{"rolling without periods", roll(func(b *Board) { b.Periods = 0 }),
			[]problem{{"periods", "a rolling board needs periods >= 1, got 0"}}},
		{"rolling without periods nor every", roll(func(b *Board) { b.Periods, b.Every = 0, Unit{} }), []problem{
			{"periods", "a rolling board needs periods >= 1, got 0"},
			{"every", "a rolling board needs every (30m, 1h, ..., 1d, 1w, 1mo)"}}},
		{"rolling max", roll(func(b *Board) { b.Aggregate = AggMax }),
			[]problem{{"aggregate", "a rolling board must use aggregate sum, got max"}}},
		{"rolling without periods, sort too wide", roll(func(b *Board) { b.Periods, b.Sort = 0, wide }), []problem{
			{"periods", "a rolling board needs periods >= 1, got 0"},
			{"sort", "multi-factor sort needs aggregate max, min or last, not sum"}}},
		{"periodic without every", per(func(b *Board) { b.Every = Unit{} }),
			[]problem{{"every", "a periodic board needs every (30m, 1h, ..., 1d, 1w, 1mo)"}}},
		{"total with every", total(func(b *Board) { b.Every = day }),
			[]problem{{"every", "every is only for periodic and rolling boards"}}},
		{"total with periods", total(func(b *Board) { b.Periods = 3 }),
			[]problem{{"periods", "periods is only for rolling boards"}}},
		{"periodic with periods", per(func(b *Board) { b.Periods = 3 }),
			[]problem{{"periods", "periods is only for rolling boards"}}},
		{"invalid unit", per(func(b *Board) { b.Every = Unit{Kind: UnitMinutes} }),
			[]problem{{"every", "invalid period unit (kind 1, 0 minutes)"}}},
		{"unknown window", per(func(b *Board) { b.Window = 7 }), []problem{{"window", "unknown window window(7)"}}},
		{"unknown aggregate", per(func(b *Board) { b.Aggregate = 9 }), []problem{{"aggregate", "unknown aggregate aggregate(9)"}}},
		{"unknown tiebreak", per(func(b *Board) { b.Tiebreak = 5 }), []problem{{"tiebreak", "unknown tiebreak 5"}}},
		{"unknown order", per(func(b *Board) { b.Order = 2 }), []problem{{"order", "unknown order order(2)"}}},
		{"bad week start", per(func(b *Board) { b.WeekStart = 8 }), []problem{{"week_start", "unknown weekday 8"}}},
		{"bad tie unit", per(func(b *Board) { b.TieUnit = 2 * time.Second }), []problem{{"tie_unit", "tie unit 2s: must be 1ms, 1s or 1m"}}},
		{"tie epoch on periodic", per(func(b *Board) { b.TieEpoch = DefaultTieEpoch() }),
			[]problem{{"tie_epoch", "tie_epoch is only for total boards"}}},
		{"tie horizon on rolling", roll(func(b *Board) { b.TieHorizon = time.Hour }),
			[]problem{{"tie_horizon", "tie_horizon is only for total boards"}}},
		{"negative tie horizon", total(func(b *Board) { b.TieHorizon = -time.Hour }),
			[]problem{{"tie_horizon", "must be positive, got -1h0m0s"}}},
		{"decimals", per(func(b *Board) { b.Decimals = 19 }), []problem{{"decimals", "must be in [0, 18], got 19"}}},
		{"negative grace", per(func(b *Board) { b.Grace = -time.Second }), []problem{{"grace", "must not be negative, got -1s"}}},
		{"negative keep_top", per(func(b *Board) { b.KeepTop = -1 }), []problem{{"keep_top", "must not be negative, got -1"}}},
		{"keep_top rolling", roll(func(b *Board) { b.KeepTop = 10 }),
			[]problem{{"keep_top", "keep_top does not work on rolling boards (members fall as periods leave the window)"}}},
		{"keep_top lowering", per(func(b *Board) { b.Aggregate, b.KeepTop = AggLast, 10 }), []problem{{"keep_top",
			"keep_top needs updates that never lower a member: aggregate sum or max with order desc, or min with order asc, " +
				"and tiebreak none or first (this board: aggregate last, order desc, tiebreak none)"}}},
		{"keep_top min asc first", per(func(b *Board) { b.Aggregate, b.Order, b.Tiebreak, b.KeepTop = AggMin, Asc, TieFirst, 10 }), nil},
		{"base on max", per(func(b *Board) { b.Aggregate, b.HasBase = AggMax, true }),
			[]problem{{"base", "base needs a periodic or total board with aggregate sum (this one is periodic with aggregate max)"}}},
		{"base on rolling", roll(func(b *Board) { b.HasBase = true }),
			[]problem{{"base", "base needs a periodic or total board with aggregate sum (this one is rolling with aggregate sum)"}}},
		{"sort names", per(func(b *Board) {
			b.Aggregate = AggMax
			b.Sort = []SortField{{Name: "a", Bits: 8}, {Name: "a", Bits: 8}, {Name: "1x", Bits: 8}, {Name: "", Bits: 8}}
		}), []problem{
			{"sort[1].field", `sort factor name "a" is empty, repeated or not an identifier`},
			{"sort[2].field", `sort factor name "1x" is empty, repeated or not an identifier`},
			{"sort[3].field", `sort factor name "" is empty, repeated or not an identifier`}}},
		{"sort factor bits", per(func(b *Board) { b.Aggregate, b.Sort = AggMax, []SortField{{Name: "a", Bits: 8}, {Name: "b", Bits: 0}} }),
			[]problem{{"sort[1].bits", `sort factor "b": bits 0 out of [1, 62]`}}},
		{"sort too wide", per(func(b *Board) { b.Aggregate, b.Tiebreak, b.Sort = AggMax, TieFirst, wide }),
			[]problem{{"sort", "sort key needs 30+30=60 bits plus 17 tie bits, only 53 fit in a double"}}},
		{"retention below grace", per(func(b *Board) { b.Grace, b.Retention = 10*time.Minute, 5*time.Minute }),
			[]problem{{"retention", "retention 5m0s is shorter than grace 10m0s"}}},
		{"rolling retention too short", roll(func(b *Board) { b.Retention = 7 * 24 * time.Hour }), []problem{{"retention",
			"a rolling board of 7 × 1d needs a retention of at least 200h0m0s (periods+1 of the longest period)"}}},
		{"rolling retention just long enough", roll(func(b *Board) { b.Retention = 200 * time.Hour }), nil},
		{"retention on total", total(func(b *Board) { b.Retention = time.Hour }),
			[]problem{{"retention", "total boards never expire: remove retention"}}},
		{"rolling window too long", roll(func(b *Board) {
			b.Every, b.Periods, b.Tiebreak, b.Retention = Unit{Kind: UnitMonth}, 1<<20, TieFirst, time.Duration(math.MaxInt64)
		}), []problem{{"periods", "rolling window of 1048576 periods is too long"}}},
		{"rolling window too long without a tie", roll(func(b *Board) { b.Every, b.Periods = Unit{Kind: UnitMonth}, 3437 }),
			[]problem{{"periods", "rolling window of 3437 periods is too long"}}},
		{"longest rolling window", roll(func(b *Board) { b.Every, b.Periods = Unit{Kind: UnitMonth}, 3436 }), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.b.Validate())
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Validate:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestValidateWritten checks that a setting written with its zero value is
// checked as written, where Validate reads it as not set.
func TestValidateWritten(t *testing.T) {
	day := Unit{Kind: UnitDay}
	for _, tt := range []struct {
		name    string
		b       Board
		written []string
		want    []problem
	}{
		{"retention 0 below the grace", Board{Name: "b", Window: WindowPeriodic, Every: day, Grace: time.Minute},
			[]string{"every", "retention"}, []problem{{"retention", "retention 0s is shorter than grace 1m0s"}}},
		{"periods 0 on a periodic board", Board{Name: "b", Window: WindowPeriodic, Every: day},
			[]string{"every", "periods"}, []problem{{"periods", "periods is only for rolling boards"}}},
		{"tie_horizon 0 on a total board", Board{Name: "b"},
			[]string{"tie_horizon"}, []problem{{"tie_horizon", "must be positive, got 0s"}}},
		{"retention 0 on a total board", Board{Name: "b"},
			[]string{"retention"}, []problem{{"retention", "total boards never expire: remove retention"}}},
		{"not written: the defaults", Board{Name: "b", Window: WindowPeriodic, Every: day, Grace: time.Minute},
			[]string{"every"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.b.Validate(); err != nil {
				t.Fatalf("Validate (zero: not set) = %v", err)
			}
			got := problems(t, tt.b.ValidateWritten(func(s string) bool { return slices.Contains(tt.written, s) }))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("ValidateWritten(%v):\n got %q\nwant %q", tt.written, got, tt.want)
			}
		})
	}
}

func TestWindowStart(t *testing.T) {
	shanghai := calLocation(t, "Asia/Shanghai")
	newYork := calLocation(t, "America/New_York")
	for _, tt := range []struct {
		name   string
		b      Board
		at     string
		wantID string
	}{
		{"rolling 7 × 1d", Board{Window: WindowRolling, Every: Unit{Kind: UnitDay}, Periods: 7, Location: shanghai},
			"2026-11-21T12:00:00+08:00", "20261115"},
		{"rolling 1 × 1d", Board{Window: WindowRolling, Every: Unit{Kind: UnitDay}, Periods: 1}, "2026-11-21T12:00:00Z", "20261121"},
		{"rolling 3 × 1h across fall back", Board{Window: WindowRolling, Every: Unit{Kind: UnitMinutes, Minutes: 60}, Periods: 3, Location: newYork},
			"2026-11-01T01:30:00-05:00", "20261101T0000"},
		{"rolling 2 × 1mo across a year", Board{Window: WindowRolling, Every: Unit{Kind: UnitMonth}, Periods: 2}, "2026-01-10T00:00:00Z", "202512"},
		{"periodic", Board{Window: WindowPeriodic, Every: Unit{Kind: UnitDay}, Periods: 0}, "2026-11-21T12:00:00Z", "20261121"},
		{"total", Board{}, "2026-11-21T12:00:00Z", "all"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cal := tt.b.Calendar()
			p := cal.At(calInstant(t, tt.at))
			got := tt.b.WindowStart(p)
			if got.ID != tt.wantID {
				t.Fatalf("WindowStart(%s) = %s, want %s", p.ID, got.ID, tt.wantID)
			}
			// The window is Periods consecutive periods ending with p.
			if tt.b.Window == WindowRolling {
				n := 1
				for q := got; q != p; q = cal.Next(q) {
					n++
				}
				if n != tt.b.Periods {
					t.Fatalf("window %s..%s holds %d periods, want %d", got.ID, p.ID, n, tt.b.Periods)
				}
			}
		})
	}
	c := Calendar{Unit: Unit{Kind: UnitDay}}
	p := c.At(calInstant(t, "2026-11-21T12:00:00Z"))
	for _, n := range []int{-1, 0, 1} {
		if got := c.WindowStart(p, n); got != p {
			t.Errorf("WindowStart(p, %d) = %s, want p", n, got.ID)
		}
	}
}

func TestFloorDiv(t *testing.T) {
	for _, tt := range []struct{ a, b, want int64 }{
		{7, 2, 3}, {-7, 2, -4}, {7, -2, -4}, {-7, -2, 3}, {6, 2, 3}, {-6, 2, -3}, {0, 5, 0}, {-1, 1000, -1},
		{math.MinInt64, 1, math.MinInt64}, {math.MaxInt64, 1000, math.MaxInt64 / 1000},
	} {
		if got := FloorDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestIsIdent(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "_": true, "coins": true, "news_ts": true, "A1_b2": true, "_9": true,
		"": false, "1x": false, "a-b": false, "a b": false, "é": false, "aé": false, "a.b": false,
	} {
		if got := IsIdent(s); got != want {
			t.Errorf("IsIdent(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{AggLast.String(), "last"}, {Aggregate(4).String(), "aggregate(4)"}, {Aggregate(-1).String(), "aggregate(-1)"},
		{TieLast.String(), "last"}, {Tiebreak(3).String(), "tiebreak(3)"},
		{Asc.String(), "asc"}, {Desc.String(), "desc"}, {Order(2).String(), "order(2)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}
