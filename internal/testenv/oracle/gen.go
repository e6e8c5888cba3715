package oracle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
	_ "time/tzdata" // Boards needs its zones on machines without tzdata

	"github.com/rankd/rankd/ranking"
)

// GenOptions tunes Workload. The zero value gives the defaults.
type GenOptions struct {
	// Start is the time of the first event. Default 2026-03-06 12:00 UTC, so
	// that New York's switch to daylight saving time (2026-03-08) and its
	// 23-hour day fall inside the first days.
	Start time.Time
	// Span is how far event time advances over the n events, not counting
	// the occasional quiet gaps of hours to a day and a half. Default 4 days.
	Span time.Duration
	// MaxBatch is the largest number of events in one batch. Default 64.
	MaxBatch int
}

func (o GenOptions) withDefaults() GenOptions {
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	}
	if o.Span <= 0 {
		o.Span = 4 * 24 * time.Hour
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 64
	}
	return o
}

// Workload returns a seeded random sequence of Apply calls of about n fresh
// events over boards, for exactness tests: the same seed gives the same
// calls.
//
// Each event has a unique MsgID (of [0-9a-z] only, so that byte order and any
// collation agree) and feeds 1-5 distinct boards, one update each, all at the
// event's time. Members come from a small skewed pool (with bytes that need
// escaping or are not ASCII) and values are small, so repeats and equal
// values are common; sometimes events reuse a recent event's time exactly,
// so equal tie times are common too. Updates of base boards mostly carry a
// base: small, or a publish time in seconds (hot news). Sort boards get
// values packed from small factors. Sum deltas are sometimes zero or
// negative, except on keep_top boards where they are only rarely (then out
// of range); rarely a value sits at or beyond the board's range. Event time
// advances with jitter: most events lag the clock by less than any grace
// (shuffled), some by more than a short grace, some by hours, a few by days
// (far late), a few run ahead of it; some land exactly on or next to
// period boundaries and boundary+grace. Now and then the clock jumps hours
// ahead (gaps in rolling windows).
//
// Some events are re-sent later with the same MsgID and updates, in the same
// batch or a later one (never right after the original, which would make
// them one event). Batches have random sizes. A simulated crash sometimes
// applies a batch (whole, or a random subset of its events as when a
// pipeline fails midway) and then applies it again followed by the next
// batch, as a consumer does after a restart.
func Workload(seed int64, n int, boards []*ranking.Board, opts GenOptions) [][]ranking.Update {
	opts = opts.withDefaults()
	g := &gen{
		rng:  rand.New(rand.NewPCG(uint64(seed), 0x72616e6b64)),
		id:   strconv.FormatUint(uint64(seed), 36),
		opts: opts,
	}
	for _, b := range boards {
		g.boards = append(g.boards, newGenBoard(b))
	}
	if len(g.boards) == 0 {
		return nil
	}
	clock := opts.Start
	mean := float64(opts.Span) / float64(max(n, 1))
	var events [][]ranking.Update
	for i := 0; i < n; i++ {
		clock = clock.Add(time.Duration(g.rng.ExpFloat64() * mean))
		if g.chance(0.004) {
			clock = clock.Add(g.between(2*time.Hour, 36*time.Hour))
		}
		ev := g.event(i, g.eventTime(clock))
		events = append(events, ev)
		g.recent = append(g.recent, ev[0].Time)
		if len(g.recent) > 16 {
			g.recent = g.recent[1:]
		}
		if len(events) > 2 && g.chance(0.04) {
			// Re-send an earlier event, never the one just appended.
			var j int
			if g.chance(0.6) {
				j = len(events) - 2 - g.rng.IntN(min(20, len(events)-1))
			} else {
				j = g.rng.IntN(len(events) - 1)
			}
			events = append(events, events[j])
		}
	}
	g.streamTimes(events)
	return g.calls(g.batches(events))
}

// genPartitions is how many partitions Workload spreads events over.
const genPartitions = 3

// streamTimes places every event in one of a few partitions (a re-sent
// event in the partition of its original, as a producer retry with the same
// key does) and sets each update's StreamTime: the greatest event time of
// the earlier events of its partition. Re-sent events get their own copy of
// the updates.
func (g *gen) streamTimes(events [][]ranking.Update) {
	part := map[string]int{}
	var wm [genPartitions]time.Time
	seen := map[string]bool{}
	for i, ev := range events {
		id := ev[0].MsgID
		p, ok := part[id]
		if !ok {
			p = g.rng.IntN(genPartitions)
			part[id] = p
		}
		if seen[id] {
			ev = append([]ranking.Update(nil), ev...)
			events[i] = ev
		}
		seen[id] = true
		for k := range ev {
			ev[k].StreamTime = wm[p]
		}
		if t := ev[0].Time; t.After(wm[p]) {
			wm[p] = t
		}
	}
}

// gen is Workload's state.
type gen struct {
	rng    *rand.Rand
	id     string // seed in base 36, prefix of MsgIDs
	opts   GenOptions
	boards []genBoard
	recent []time.Time // times of the latest events
}

// genBoard is a board with the ranges Workload draws values from.
type genBoard struct {
	b     *ranking.Board
	bound int64 // largest valid |value| (in one period)
}

func newGenBoard(b *ranking.Board) genBoard {
	c, err := ranking.NewCodec(b)
	if err != nil {
		panic(fmt.Sprintf("oracle: %v", err))
	}
	bound := c.MaxValue()
	if b.Window == ranking.WindowRolling {
		bound /= int64(b.Periods)
	}
	return genBoard{b: b, bound: bound}
}

func (g *gen) chance(p float64) bool { return g.rng.Float64() < p }

// between returns a random duration in [lo, hi), in whole milliseconds.
func (g *gen) between(lo, hi time.Duration) time.Duration {
	ms := int64((hi - lo) / time.Millisecond)
	return lo + time.Duration(g.rng.Int64N(ms))*time.Millisecond
}

// skewed returns an index in [0, n), small ones much more often.
func (g *gen) skewed(n int) int {
	u := g.rng.Float64()
	return int(u * u * u * float64(n))
}

// eventTime returns an event's time given the clock: usually a little behind
// it, sometimes much, exactly on a boundary, or reused from a recent event.
func (g *gen) eventTime(clock time.Time) time.Time {
	var t time.Time
	switch r := g.rng.Float64(); {
	case r < 0.68:
		t = clock.Add(-g.between(0, 4*time.Minute)) // within every grace
	case r < 0.78:
		t = clock.Add(-g.between(4*time.Minute, 35*time.Minute)) // late for 5m grace
	case r < 0.83:
		t = clock.Add(-g.between(35*time.Minute, 8*time.Hour))
	case r < 0.85: // far late; rarely beyond a week (late on weekly boards)
		if g.chance(0.7) {
			t = clock.Add(-g.between(24*time.Hour, 3*24*time.Hour))
		} else {
			t = clock.Add(-g.between(3*24*time.Hour, 9*24*time.Hour))
		}
	case r < 0.87:
		t = clock.Add(g.between(0, 15*time.Minute)) // ahead of the clock
	case r < 0.92:
		// On or next to a boundary: slot and day boundaries of every zone
		// used are on the half-hour grid.
		b := clock.Truncate(30 * time.Minute)
		offs := []time.Duration{0, -time.Millisecond, -time.Second, 5 * time.Minute,
			5*time.Minute - time.Millisecond, 30 * time.Minute, -30 * time.Minute}
		t = b.Add(offs[g.rng.IntN(len(offs))])
	case len(g.recent) > 0:
		t = g.recent[g.rng.IntN(len(g.recent))] // same time as a recent event
	default:
		t = clock
	}
	t = t.Truncate(time.Millisecond)
	if g.chance(0.3) {
		t = t.Truncate(time.Second)
	}
	return t
}

var (
	genMembers = []string{
		"alice", "bob", "carol", "dave", "eve", "Bob", "frank", "grace", "m:1|{x},%",
		"用户7", "heidi", "a b", "ivan", "judy", "zoë", "mallory",
	}
	genZones = []string{"north", "south", "we{st}:1|x,%", "east", ""}
)

// event returns the updates of the i-th fresh event at time t.
func (g *gen) event(i int, t time.Time) []ranking.Update {
	msg := g.id + "e" + strconv.Itoa(i)
	k := 1
	for k < 5 && k < len(g.boards) && g.chance(0.5) {
		k++
	}
	picked := g.rng.Perm(len(g.boards))[:k]
	ups := make([]ranking.Update, 0, k)
	for _, bi := range picked {
		gb := g.boards[bi]
		u := ranking.Update{
			Board:  gb.b.Name,
			Member: genMembers[g.skewed(len(genMembers))],
			Value:  g.value(gb),
			Time:   t,
			MsgID:  msg,
		}
		if len(gb.b.Dims) > 0 {
			u.Dims = make([]string, len(gb.b.Dims))
			for d := range u.Dims {
				u.Dims[d] = genZones[g.skewed(len(genZones))]
			}
		}
		if gb.b.HasBase && g.chance(0.8) {
			u.Base, u.HasBase = 100+g.rng.Int64N(100), true
			if g.chance(0.25) {
				// hot news: the item's publish time in seconds, up to a day
				// before the event
				u.Base = t.Unix() - g.rng.Int64N(86400)
			}
		}
		ups = append(ups, u)
	}
	return ups
}

// value draws an update's value for board gb.
func (g *gen) value(gb genBoard) int64 {
	b := gb.b
	if len(b.Sort) > 0 {
		if g.chance(0.02) {
			return []int64{-1, gb.bound + 1, gb.bound}[g.rng.IntN(3)]
		}
		vals := make([]int64, len(b.Sort))
		for i, f := range b.Sort {
			vals[i] = g.rng.Int64N(min(int64(1)<<f.Bits, int64(4+8*i)))
		}
		v, err := ranking.PackSort(b.Sort, vals)
		if err != nil {
			panic(fmt.Sprintf("oracle: %v", err))
		}
		return v
	}
	if g.chance(0.006) {
		// At or past the edge of the range: later sums overflow it.
		return []int64{gb.bound, gb.bound - 2, -gb.bound, gb.bound + 1, -gb.bound - 1, math.MaxInt64}[g.rng.IntN(6)]
	}
	if b.Aggregate != ranking.AggSum {
		return g.rng.Int64N(12) - 3
	}
	if b.KeepTop > 0 {
		if g.chance(0.03) {
			return -g.rng.Int64N(3) // 0 or negative: out of range
		}
		return 1 + g.rng.Int64N(5)
	}
	switch r := g.rng.Float64(); {
	case r < 0.7:
		return 1 + g.rng.Int64N(5)
	case r < 0.8:
		return 0
	case r < 0.95:
		return -1 - g.rng.Int64N(3)
	default:
		return 10 + g.rng.Int64N(90)
	}
}

// batches cuts events into batches of random sizes.
func (g *gen) batches(events [][]ranking.Update) [][][]ranking.Update {
	var out [][][]ranking.Update
	for len(events) > 0 {
		size := 1 + g.rng.IntN(g.opts.MaxBatch)
		if g.chance(0.1) {
			size = 1
		}
		size = min(size, len(events))
		out = append(out, events[:size])
		events = events[size:]
	}
	return out
}

// calls turns batches into Apply calls, simulating crashes: a batch is
// applied (whole or in part) and then again together with the next batch.
func (g *gen) calls(batches [][][]ranking.Update) [][]ranking.Update {
	var out [][]ranking.Update
	for i := 0; i < len(batches); i++ {
		b := batches[i]
		r := g.rng.Float64()
		if i+1 >= len(batches) || r >= 0.09 {
			out = append(out, flatten(b))
			continue
		}
		if r < 0.05 {
			out = append(out, flatten(g.subset(b))) // pipeline failed midway
		} else {
			out = append(out, flatten(b)) // applied, offsets not committed
		}
		out = append(out, flatten(append(append([][]ranking.Update(nil), b...), batches[i+1]...)))
		i++
	}
	return out
}

// subset returns a random subsequence of events in which no two adjacent
// events share a MsgID (they would merge into one event).
func (g *gen) subset(events [][]ranking.Update) [][]ranking.Update {
	var out [][]ranking.Update
	for _, ev := range events {
		if !g.chance(0.5) {
			continue
		}
		if len(out) > 0 && out[len(out)-1][0].MsgID == ev[0].MsgID {
			continue
		}
		out = append(out, ev)
	}
	return out
}

func flatten(events [][]ranking.Update) []ranking.Update {
	var out []ranking.Update
	for _, ev := range events {
		out = append(out, ev...)
	}
	return out
}

// Boards returns a representative set of boards for exactness tests: every
// window, aggregate, order and tiebreak; dims; multi-factor sort keys (max
// on a periodic board, last on a total board); keep_top; base on a total
// board and on a periodic keep_top board with ties (hot news); 1ms, 1s and
// 1m tie units; zones UTC, Asia/Shanghai and America/New_York (with a DST
// switch in Workload's default span); grace 5m and 30m; a total board whose
// tie range ends inside the default span. Retention is long enough that no
// period expires during a test.
func Boards() []*ranking.Board {
	utc := time.UTC
	sh := mustZone("Asia/Shanghai")
	ny := mustZone("America/New_York")
	unit := func(s string) ranking.Unit {
		u, err := ranking.ParseUnit(s)
		if err != nil {
			panic(err)
		}
		return u
	}
	periodic := func(name, every string, loc *time.Location, grace time.Duration) *ranking.Board {
		return &ranking.Board{Name: name, Window: ranking.WindowPeriodic, Every: unit(every),
			Location: loc, WeekStart: time.Monday, Grace: grace, Retention: 90 * 24 * time.Hour}
	}
	rolling := func(name string, n int, every string, loc *time.Location, grace time.Duration) *ranking.Board {
		b := periodic(name, every, loc, grace)
		b.Window, b.Periods = ranking.WindowRolling, n
		return b
	}
	total := func(name string) *ranking.Board {
		return &ranking.Board{Name: name, Window: ranking.WindowTotal, Grace: 5 * time.Minute}
	}

	totalSum := total("total_sum")

	zone30 := periodic("zone_30m", "30m", utc, 5*time.Minute)
	zone30.Dims, zone30.Tiebreak = []string{"zone"}, ranking.TieFirst

	bestDay := periodic("best_day", "1d", sh, 30*time.Minute)
	bestDay.Aggregate, bestDay.Order, bestDay.Tiebreak = ranking.AggMax, ranking.Asc, ranking.TieLast

	fastDay := periodic("fast_day", "1d", ny, 30*time.Minute)
	fastDay.Aggregate, fastDay.Order, fastDay.Tiebreak = ranking.AggMin, ranking.Asc, ranking.TieFirst
	fastDay.TieUnit = time.Millisecond

	last1h := periodic("last_1h", "1h", ny, 5*time.Minute)
	last1h.Aggregate, last1h.Tiebreak, last1h.TieUnit = ranking.AggLast, ranking.TieFirst, time.Minute

	roll7d := rolling("roll_7d", 7, "1d", sh, 30*time.Minute)
	roll7d.Tiebreak = ranking.TieFirst

	roll90m := rolling("roll_90m", 3, "30m", utc, 5*time.Minute)
	roll90m.Dims = []string{"zone"}

	top5 := periodic("top5_day", "1d", ny, 5*time.Minute)
	top5.KeepTop, top5.Tiebreak = 5, ranking.TieFirst

	clearDay := periodic("clear_day", "1d", utc, 30*time.Minute)
	clearDay.Aggregate, clearDay.Tiebreak = ranking.AggMax, ranking.TieFirst
	clearDay.Sort = []ranking.SortField{
		{Name: "clear_time", Order: ranking.Asc, Bits: 20},
		{Name: "vip", Order: ranking.Desc, Bits: 8},
	}

	base := total("base_total")
	base.HasBase = true

	// Hot news per day: a member starts at its base the first time it
	// appears in each period; only the top 5 stay in the sorted set.
	hotDay := periodic("hot_day", "1d", sh, 5*time.Minute)
	hotDay.HasBase, hotDay.KeepTop, hotDay.Tiebreak = true, 5, ranking.TieFirst

	// The latest stats of a player, ranked by level, then fewest deaths.
	statsLast := total("stats_last")
	statsLast.Aggregate, statsLast.Tiebreak = ranking.AggLast, ranking.TieLast
	statsLast.Sort = []ranking.SortField{
		{Name: "level", Order: ranking.Desc, Bits: 6},
		{Name: "deaths", Order: ranking.Asc, Bits: 10},
	}

	// 1m ties over a 10-day horizon take 14 bits: offsets up to 16383
	// minutes, until 2026-03-12 09:03 UTC.
	firstTotal := total("first_total")
	firstTotal.Aggregate, firstTotal.Tiebreak, firstTotal.TieUnit = ranking.AggMax, ranking.TieFirst, time.Minute
	firstTotal.TieEpoch, firstTotal.TieHorizon = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 10*24*time.Hour

	// A sum with minute ties over the same horizon: updates after it are
	// out of range.
	tieTotal := total("tie_total")
	tieTotal.Tiebreak, tieTotal.TieUnit = ranking.TieFirst, time.Minute
	tieTotal.TieEpoch, tieTotal.TieHorizon = firstTotal.TieEpoch, firstTotal.TieHorizon

	week := periodic("week_sum", "1w", ny, 30*time.Minute)
	week.WeekStart, week.Tiebreak = time.Sunday, ranking.TieLast

	return []*ranking.Board{totalSum, zone30, bestDay, fastDay, last1h, roll7d, roll90m, top5, clearDay,
		base, firstTotal, tieTotal, week, hotDay, statsLast}
}

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(fmt.Sprintf("oracle: %v", err))
	}
	return loc
}
