// Package oracle is a plain in-memory reference implementation of the board
// semantics written down in ranking/doc.go. Tests feed it the same updates
// as a store.Store and compare every board, member by member.
//
// It is deliberately naive and independent of the Lua scripts: it keeps every
// member's value and tie time per period in Go maps, computes rolling boards
// by summing the periods of their window on demand, and shares with the
// ranking package only the Board declaration, the Calendar and the
// Update/Status types (plus ranking.NewCodec, asked only for the bit widths).
// It never forgets a message ID and never expires a period.
package oracle

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// Oracle computes every board from a sequence of Apply calls. Apply must not
// run concurrently with any other method; the read methods (Board, Periods,
// Streams, StreamTime) may run concurrently with each other.
type Oracle struct {
	boards  map[string]*board
	events  map[string][]ranking.Status // MsgID -> statuses of its first delivery
	streams map[string]*stream          // by streamKey
	order   []*stream                   // streams in order of first applied update
}

// Entry is one member of a board in rank order.
type Entry struct {
	Member string
	Value  int64
	// Tie is the member's tie time as an offset in TieUnit from the board's
	// base: the period start (periodic), the start of the window's first
	// period (rolling) or TieEpoch (total). It is 0 on TieNone boards.
	Tie int64
}

// Stream identifies one board+dims: a family of sorted sets, one per period.
type Stream struct {
	Board string
	Dims  []string
}

// board is a declared board with its defaults resolved.
type board struct {
	b       *ranking.Board
	cal     ranking.Calendar
	unit    time.Duration // TieUnit
	epoch   time.Time     // total boards: origin of tie offsets
	tieBits uint          // total boards: ties must be below 2^tieBits
	lo, hi  int64         // allowed range of a member's value in one period
	desc    bool          // higher values rank first
}

// stream is the state of one board+dims.
type stream struct {
	b           *board
	dims        []string
	st          time.Time // stream time: latest Time of a non-duplicate, non-late update
	hasST       bool
	periods     map[string]*period // by period ID
	first, last ranking.Period     // lowest and highest period with data
}

// period is one sorted set: the members of one period of a stream.
type period struct {
	p      ranking.Period
	base   time.Time // origin of tie offsets
	cells  map[string]*cell
	events int64 // updates applied
}

// cell is one member of one period.
type cell struct {
	base  int64 // base boards: the greatest base of the member's events
	value int64
	q     int64  // tie: quantized time, offset in TieUnit from the period's base
	ms    int64  // last aggregate: exact Time (Unix ms) of the update that set value
	msg   string // last aggregate: MsgID of the update that set value
}

// totalEpoch is the default TieEpoch of total boards.
var totalEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// New returns an Oracle for boards. It panics when a board has no valid score
// layout (ranking.NewCodec fails): boards are expected to be validated.
func New(boards []*ranking.Board) *Oracle {
	o := &Oracle{
		boards:  map[string]*board{},
		events:  map[string][]ranking.Status{},
		streams: map[string]*stream{},
	}
	for _, b := range boards {
		c, err := ranking.NewCodec(b)
		if err != nil {
			panic(fmt.Sprintf("oracle: %v", err))
		}
		bd := &board{
			b:       b,
			cal:     b.Calendar(),
			unit:    b.TieUnit,
			epoch:   b.TieEpoch,
			tieBits: c.TieBits,
			hi:      c.MaxValue(), // only the number: 2^ValueBits - 1
			desc:    b.Order == ranking.Desc || len(b.Sort) > 0,
		}
		if bd.unit == 0 {
			bd.unit = time.Second
		}
		if bd.epoch.IsZero() {
			bd.epoch = totalEpoch
		}
		if b.Window == ranking.WindowRolling {
			bd.hi /= int64(b.Periods)
		}
		bd.lo = -bd.hi
		if len(b.Sort) > 0 {
			bd.lo = 0
		}
		o.boards[b.Name] = bd
	}
	return o
}

// Apply judges and applies ups exactly as Store.Apply does (ranking/doc.go)
// and returns their statuses, index for index. Consecutive updates with the
// same MsgID form one event. An event whose MsgID was seen in an earlier
// event (in this call or any before) is a duplicate: none of its updates is
// applied, and each reports the status of the same update at the first
// delivery when that was StatusLate or StatusOutOfRange (so that a
// redelivered rejected update is dead-lettered again), else
// StatusDuplicate. Apply panics on an unknown board or a wrong number of
// dims values.
func (o *Oracle) Apply(ups []ranking.Update) []ranking.Status {
	out := make([]ranking.Status, len(ups))
	for i := 0; i < len(ups); {
		j := i + 1
		for j < len(ups) && ups[j].MsgID == ups[i].MsgID {
			j++
		}
		if first, seen := o.events[ups[i].MsgID]; seen {
			for k := i; k < j; k++ {
				out[k] = ranking.StatusDuplicate
				if n := k - i; n < len(first) &&
					(first[n] == ranking.StatusLate || first[n] == ranking.StatusOutOfRange) {
					out[k] = first[n]
				}
			}
		} else {
			for k := i; k < j; k++ {
				out[k] = o.apply(&ups[k])
			}
			o.events[ups[i].MsgID] = append([]ranking.Status(nil), out[i:j]...)
		}
		i = j
	}
	return out
}

// apply judges one update of a new event and applies it when it is neither
// late nor out of range.
func (o *Oracle) apply(u *ranking.Update) ranking.Status {
	bd := o.boards[u.Board]
	if bd == nil {
		panic(fmt.Sprintf("oracle: unknown board %q", u.Board))
	}
	b := bd.b
	if len(u.Dims) != len(b.Dims) {
		panic(fmt.Sprintf("oracle: board %q: %d dims values, want %d", b.Name, len(u.Dims), len(b.Dims)))
	}
	s := o.stream(bd, u.Dims)

	// 1. Period.
	p := bd.period(u.Time)
	base := bd.base(p)
	q := floorDiv(u.Time.Sub(base), bd.unit)

	// 2. Late: judged on the stream time of the update's partition.
	if b.Window != ranking.WindowTotal && !u.StreamTime.IsZero() && !u.StreamTime.Before(p.End.Add(b.Grace)) {
		return ranking.StatusLate
	}
	// The board's stream time (for tests of expiry): the latest Time of
	// every update that is neither a duplicate nor late.
	if !s.hasST || u.Time.After(s.st) {
		s.st, s.hasST = u.Time, true
	}

	// 3. Range.
	if b.Window == ranking.WindowTotal && b.Tiebreak != ranking.TieNone &&
		(q < 0 || q >= int64(1)<<bd.tieBits) {
		return ranking.StatusOutOfRange
	}
	per := s.periods[p.ID]
	var c *cell
	if per != nil {
		c = per.cells[u.Member]
	}
	var sum, ub int64
	newBase := false
	if b.Aggregate == ranking.AggSum {
		if b.KeepTop > 0 && u.Value <= 0 {
			return ranking.StatusOutOfRange
		}
		// Base boards: a member's value is the greatest base of its events
		// (0 for an event without one) plus their deltas.
		var cur int64
		if b.HasBase && u.HasBase {
			ub = u.Base
		}
		switch {
		case c != nil && b.HasBase && ub > c.base:
			var ok bool
			if cur, ok = add(c.value, ub-c.base); !ok {
				return ranking.StatusOutOfRange
			}
			newBase = true
		case c != nil:
			cur = c.value
		case b.HasBase:
			cur, newBase = ub, true
		}
		var ok bool
		if sum, ok = add(cur, u.Value); !ok || sum < bd.lo || sum > bd.hi {
			return ranking.StatusOutOfRange
		}

	} else if u.Value < bd.lo || u.Value > bd.hi {
		return ranking.StatusOutOfRange
	}

	// 4. Apply.
	if per == nil {
		per = &period{p: p, base: base, cells: map[string]*cell{}}
		s.periods[p.ID] = per
		if len(s.periods) == 1 {
			o.order = append(o.order, s)
			s.first, s.last = p, p
		}
		if p.Start.Before(s.first.Start) {
			s.first = p
		}
		if p.Start.After(s.last.Start) {
			s.last = p
		}
	}
	if c == nil {
		c = &cell{value: u.Value, q: q, ms: u.Time.UnixMilli(), msg: u.MsgID}
		if b.Aggregate == ranking.AggSum {
			c.value = sum
		}
		per.cells[u.Member] = c
	} else {
		c.update(b.Aggregate, sum, u.Value, q, u.Time.UnixMilli(), u.MsgID)
	}
	if newBase {
		c.base = ub
	}
	per.events++
	return ranking.StatusApplied
}

// update folds one more update into an existing cell: sum is the new value
// of a sum board, v the candidate value of the others, q the update's
// quantized time, ms its exact time (Unix milliseconds).
func (c *cell) update(agg ranking.Aggregate, sum, v, q, ms int64, msg string) {
	switch agg {
	case ranking.AggSum:
		c.value = sum
		c.q = max(c.q, q)
	case ranking.AggMax, ranking.AggMin:
		better := v > c.value
		if agg == ranking.AggMin {
			better = v < c.value
		}
		switch {
		case better:
			c.value, c.q = v, q
		case v == c.value:
			c.q = min(c.q, q)
		}
	case ranking.AggLast:
		// The greatest (exact time in ms, MsgID) wins; an equal key (the
		// same event twice) keeps the first. The tie unit only rounds the
		// winner's tie time q.
		if ms > c.ms || (ms == c.ms && msg > c.msg) {
			c.value, c.q, c.ms, c.msg = v, q, ms, msg
		}
	}
}

// stream returns the state of board+dims, creating it.
func (o *Oracle) stream(bd *board, dims []string) *stream {
	k := streamKey(bd.b.Name, dims)
	s := o.streams[k]
	if s == nil {
		s = &stream{b: bd, dims: append([]string(nil), dims...), periods: map[string]*period{}}
		o.streams[k] = s
	}
	return s
}

// lookup returns the stream of board+dims, or nil when it has no data.
func (o *Oracle) lookup(board string, dims []string) *stream {
	s := o.streams[streamKey(board, dims)]
	if s == nil || len(s.periods) == 0 {
		return nil
	}
	return s
}

func streamKey(board string, dims []string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%q", board)
	for _, d := range dims {
		fmt.Fprintf(&sb, ",%q", d)
	}
	return sb.String()
}

// period returns the period of t: the calendar's, or "all" for total boards.
func (bd *board) period(t time.Time) ranking.Period {
	if bd.b.Window == ranking.WindowTotal {
		return ranking.Period{ID: "all", End: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}
	}
	return bd.cal.At(t)
}

// base returns the origin of tie offsets in period p.
func (bd *board) base(p ranking.Period) time.Time {
	if bd.b.Window == ranking.WindowTotal {
		return bd.epoch
	}
	return p.Start
}

// floorDiv returns floor(d / unit), rounding towards -inf for negative d.
func floorDiv(d, unit time.Duration) int64 {
	q := d / unit
	if d%unit != 0 && d < 0 {
		q--
	}
	return int64(q)
}

// add returns a+b and whether it did not overflow.
func add(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// Streams returns every board+dims that has at least one applied update, in
// the order of their first applied update.
func (o *Oracle) Streams() []Stream {
	out := make([]Stream, len(o.order))
	for i, s := range o.order {
		out[i] = Stream{Board: s.b.b.Name, Dims: append([]string(nil), s.dims...)}
	}
	return out
}

// StreamTime returns the stream time of board+dims (the latest Time of its
// applied updates) and whether it has one.
func (o *Oracle) StreamTime(board string, dims []string) (time.Time, bool) {
	s := o.lookup(board, dims)
	if s == nil {
		return time.Time{}, false
	}
	return s.st, s.hasST
}

// Periods returns, in time order, the ids of the visible boards of
// board+dims that must exist: "all" for a total board, each period with data
// for a periodic board, and for a rolling board every k from the lowest to
// the highest period with data (the S(k) that the store's head has reached,
// empty ones included).
func (o *Oracle) Periods(board string, dims []string) []string {
	s := o.lookup(board, dims)
	if s == nil {
		return nil
	}
	switch s.b.b.Window {
	case ranking.WindowTotal:
		return []string{"all"}
	case ranking.WindowPeriodic:
		ps := make([]ranking.Period, 0, len(s.periods))
		for _, p := range s.periods {
			ps = append(ps, p.p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Start.Before(ps[j].Start) })
		ids := make([]string, len(ps))
		for i, p := range ps {
			ids[i] = p.ID
		}
		return ids
	}
	var ids []string
	for p := s.first; !p.Start.After(s.last.Start); p = s.b.cal.Next(p) {
		ids = append(ids, p.ID)
	}
	return ids
}

// Board returns the visible board of board+dims in period periodID, in rank
// order: P(j) for periodic boards ("all" for total boards), S(k) for rolling
// boards; only the top KeepTop members on keep_top boards. It panics on an
// unknown board or an invalid period id.
func (o *Oracle) Board(board string, dims []string, periodID string) []Entry {
	bd := o.boards[board]
	if bd == nil {
		panic(fmt.Sprintf("oracle: unknown board %q", board))
	}
	var p ranking.Period
	if bd.b.Window == ranking.WindowTotal {
		if periodID != "all" {
			panic(fmt.Sprintf("oracle: board %q: total boards have period \"all\", not %q", board, periodID))
		}
	} else {
		var err error
		if p, err = bd.cal.Parse(periodID); err != nil {
			panic(fmt.Sprintf("oracle: board %q: %v", board, err))
		}
	}
	s := o.lookup(board, dims)
	if s == nil {
		return nil
	}
	var es []Entry
	if bd.b.Window == ranking.WindowRolling {
		es = s.window(p)
	} else if per := s.periods[periodID]; per != nil {
		for m, c := range per.cells {
			es = append(es, Entry{Member: m, Value: c.value, Tie: c.q})
		}
	}
	if bd.b.Tiebreak == ranking.TieNone {
		for i := range es {
			es[i].Tie = 0
		}
	}
	sort.Slice(es, func(i, j int) bool { return bd.less(es[i], es[j]) })
	if k := bd.b.KeepTop; k > 0 && len(es) > k {
		es = es[:k]
	}
	return es
}

// Events returns the updates applied to board+dims in period periodID (for
// a rolling board, to the periods of its window ending there): what a
// sealed snapshot's counts.events says.
func (o *Oracle) Events(board string, dims []string, periodID string) int64 {
	bd := o.boards[board]
	s := o.lookup(board, dims)
	if bd == nil || s == nil {
		return 0
	}
	if bd.b.Window != ranking.WindowRolling {
		if per := s.periods[periodID]; per != nil {
			return per.events
		}
		return 0
	}
	p, err := bd.cal.Parse(periodID)
	if err != nil {
		panic(fmt.Sprintf("oracle: board %q: %v", board, err))
	}
	var n int64
	for i := 0; i < bd.b.Periods; i++ {
		if per := s.periods[p.ID]; per != nil {
			n += per.events
		}
		p = bd.cal.Prev(p)
	}
	return n
}

// window returns S(k) unsorted: for each member present in any of P(k-N+1..k)
// the sum of its values and the latest of its tie times, as an offset from
// the start of P(k-N+1).
func (s *stream) window(k ranking.Period) []Entry {
	bd := s.b
	ps := []ranking.Period{k}
	for len(ps) < bd.b.Periods {
		ps = append(ps, bd.cal.Prev(ps[len(ps)-1]))
	}
	wbase := ps[len(ps)-1].Start
	type acc struct {
		value int64
		tie   time.Time
	}
	accs := map[string]*acc{}
	for _, p := range ps {
		per := s.periods[p.ID]
		if per == nil {
			continue
		}
		for m, c := range per.cells {
			t := per.base.Add(time.Duration(c.q) * bd.unit)
			a := accs[m]
			if a == nil {
				accs[m] = &acc{value: c.value, tie: t}
				continue
			}
			a.value += c.value
			if t.After(a.tie) {
				a.tie = t
			}
		}
	}
	es := make([]Entry, 0, len(accs))
	for m, a := range accs {
		es = append(es, Entry{Member: m, Value: a.value, Tie: floorDiv(a.tie.Sub(wbase), bd.unit)})
	}
	return es
}

// less reports whether a ranks above b: by value in the board's direction,
// then by tie time (TieFirst: earlier first; TieLast: later first), then by
// member bytes in Redis order for equal scores (descending on Desc boards,
// which are read with ZREVRANGE; ascending on Asc boards).
func (bd *board) less(a, b Entry) bool {
	if a.Value != b.Value {
		return (a.Value > b.Value) == bd.desc
	}
	if a.Tie != b.Tie {
		switch bd.b.Tiebreak {
		case ranking.TieFirst:
			return a.Tie < b.Tie
		case ranking.TieLast:
			return a.Tie > b.Tie
		}
	}
	return (a.Member > b.Member) == bd.desc
}

// Diff compares a board read from the store with the oracle's, row by row
// (member, value, tie, in order), and describes up to 10 differing rows; it
// returns "" when they are equal.
func Diff(got []store.Entry, want []Entry) string {
	var rows []string
	for i := range max(len(got), len(want)) {
		g, w := "-", "-"
		if i < len(got) {
			g = fmt.Sprintf("%q=%d@%d", got[i].Member, got[i].Value, got[i].Tie)
		}
		if i < len(want) {
			w = fmt.Sprintf("%q=%d@%d", want[i].Member, want[i].Value, want[i].Tie)
		}
		if g != w && len(rows) < 10 {
			rows = append(rows, fmt.Sprintf("  %4d got %-30s want %s", i+1, g, w))
		}
	}
	return strings.Join(rows, "\n")
}
