package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

// call is one script call under construction: events of one slot.
type call struct {
	slot   int
	groups map[string]*callGroup // by tag
	gorder []*callGroup
	events [][]int      // per event: indexes of its updates in the Apply input
	ids    []string     // per event: its message ID
	ups    []updateArgs // the events' updates, in order
	nups   int
}

// callGroup is one stream (board+dims) inside a call.
type callGroup struct {
	idx     int // 1-based, as the script numbers groups
	tag     string
	st      *boardState
	periods []ranking.Period
	pidx    map[int64]int  // period start ms -> 1-based index in periods
	last    ranking.Period // cache for At
}

func (g *callGroup) period(t time.Time) ranking.Period {
	if !g.last.End.IsZero() && !t.Before(g.last.Start) && t.Before(g.last.End) {
		return g.last
	}
	g.last = g.st.cal.At(t)
	return g.last
}

// Event is one message's updates: they are applied atomically and
// deduplicated together by ID (see the package doc).
type Event struct {
	ID      string
	Updates []ranking.Update
}

// Group returns one Event for each run of consecutive updates with the same
// MsgID, for callers that hold a flat list (tests, tools).
func Group(ups []ranking.Update) []Event {
	var evs []Event
	for start := 0; start < len(ups); {
		end := start + 1
		for end < len(ups) && ups[end].MsgID == ups[start].MsgID {
			end++
		}
		evs = append(evs, Event{ID: ups[start].MsgID, Updates: ups[start:end:end]})
		start = end
	}
	return evs
}

// Apply applies events atomically per event and slot; see the package doc
// for semantics. The result has one verdict per update, in the order of
// the events and of their updates. A non-nil error is transient (Redis
// unreachable, timeout: IsUnavailable tells): the caller
// retries the same events, which is safe thanks to dedupe. Validation
// errors (unknown board, wrong number of dims) are returned before
// anything is written.
//
// marks are the stream times of the partitions the events came from, as
// of the offset after the batch (see Mark); they are written in the same
// pipeline, so that they are in Redis before the caller commits offsets.
//
// The store New returns writes every update into its board's active
// key generation and, while a replay builds one, into that one too; a store
// from Generation writes its generation only.
func (s *Store) Apply(ctx context.Context, evs []Event, marks ...Mark) (ranking.Result, error) {
	if s.root != nil {
		return s.apply(ctx, evs, marks)
	}
	return s.applyGens(ctx, evs, marks)
}

// nUpdates returns the number of updates of evs.
func nUpdates(evs []Event) int {
	n := 0
	for i := range evs {
		n += len(evs[i].Updates)
	}
	return n
}

// apply applies evs to this store's generation and writes marks.
func (s *Store) apply(ctx context.Context, evs []Event, marks []Mark) (ranking.Result, error) {
	n := nUpdates(evs)
	res := ranking.Result{Status: make([]ranking.Status, n), Repeated: make([]bool, n)}
	if n == 0 && len(marks) == 0 {
		return res, nil
	}
	calls, newTags, err := s.plan(evs, n)
	if err != nil {
		return res, err
	}
	pending := calls
	for attempt := 0; len(pending) > 0 || marks != nil; attempt++ {
		failed, err := s.exec(ctx, pending, newTags, marks, res.Status, res.Repeated)
		newTags, marks = nil, nil
		if err != nil {
			return res, err
		}
		if len(failed) > 0 {
			if attempt > 0 {
				return res, fmt.Errorf("applying batch: script still missing after SCRIPT LOAD")
			}
			if err := applyScript.Load(ctx, s.rdb).Err(); err != nil {
				return res, fmt.Errorf("loading apply script: %w", err)
			}
		}
		pending = failed
	}
	s.knownMu.Lock()
	for _, c := range calls {
		for tag, g := range c.groups {
			if k := g.st.b.Name + "\x00" + tag; s.known[k].IsZero() {
				s.known[k] = time.Now()
			}
		}
	}
	s.knownMu.Unlock()
	return res, nil
}

// exec runs calls in one pipeline and fills status. It returns the calls that
// failed with NOSCRIPT (not executed; to be retried after loading the script).
func (s *Store) exec(ctx context.Context, calls []*call, newTags map[string][]any, marks []Mark, status []ranking.Status, repeated []bool) ([]*call, error) {
	pipe := s.rdb.Pipeline()
	for board, tags := range newTags {
		pipe.SAdd(ctx, s.dimsKey(board), tags...)
	}
	markCmds := s.writeMarks(ctx, pipe, marks)
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = applyScript.EvalSha(ctx, pipe, []string{s.dedupePrefix(c.slot)}, c.args(s)...)
	}
	_, _ = pipe.Exec(ctx) // every command's error is checked below
	for _, c := range markCmds {
		if err := c.Err(); err != nil {
			return nil, fmt.Errorf("writing stream times: %w", err)
		}
	}
	var failed []*call
	for i, c := range calls {
		out, err := cmds[i].Slice()
		if isNoScript(err) {
			failed = append(failed, c)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("applying batch: %w", err)
		}
		if len(out) != len(c.events) {
			return nil, fmt.Errorf("applying batch: script returned %d events, want %d", len(out), len(c.events))
		}
		for e, o := range out {
			codes, _ := o.(string)
			idx := c.events[e]
			if len(codes) != len(idx) {
				return nil, fmt.Errorf("applying batch: script returned %q for %d updates", codes, len(idx))
			}
			for k, u := range idx {
				if status[u], repeated[u], err = luaStatus(codes[k]).status(); err != nil {
					return nil, fmt.Errorf("applying batch: %w", err)
				}
			}
		}
	}
	return failed, nil
}

func (s *Store) dedupePrefix(slot int) string {
	if !s.cluster {
		return s.prefix + ":d:"
	}
	return s.prefix + ":{" + SlotTag(slot) + "}:d:"
}

// plan splits events into per-slot script calls of bounded size, and
// collects dims tags not yet registered. Updates are numbered in the order
// of evs (n in all).
func (s *Store) plan(evs []Event, n int) ([]*call, map[string][]any, error) {
	ups := make([]*ranking.Update, 0, n) // the events' updates, numbered in order (not copied)
	for i := range evs {
		for k := range evs[i].Updates {
			ups = append(ups, &evs[i].Updates[k])
		}
	}
	var calls []*call
	open := map[int]*call{} // slot -> call being filled
	newTags := map[string][]any{}
	seenTag := map[string]bool{}
	tags := make([]string, len(ups))
	slots := make([]int, len(ups))
	for i, u := range ups {
		st, err := s.board(u.Board)
		if err != nil {
			return nil, nil, err
		}
		if len(u.Dims) != len(st.b.Dims) {
			return nil, nil, fmt.Errorf("board %q: %d dims values, want %d", u.Board, len(u.Dims), len(st.b.Dims))
		}
		if i > 0 && ups[i-1].Board == u.Board && sameDims(ups[i-1].Dims, u.Dims) {
			tags[i], slots[i] = tags[i-1], slots[i-1]
		} else {
			tags[i] = Tag(u.Board, u.Dims)
			if s.cluster {
				slots[i] = Slot("{" + tags[i] + "}")
			}
		}
		k := u.Board + "\x00" + tags[i]
		if !seenTag[k] {
			seenTag[k] = true
			s.knownMu.Lock()
			at := s.known[k]
			if !at.IsZero() && time.Since(at) > reregister {
				delete(s.known, k) // registered again below, in case PruneDims removed it meanwhile
				at = time.Time{}
			}
			s.knownMu.Unlock()
			if at.IsZero() {
				newTags[u.Board] = append(newTags[u.Board], tags[i])
			}
		}
	}
	start := 0
	for e := range evs {
		end := start + len(evs[e].Updates)
		// one event: ups[start:end], split by slot
		var bySlot map[int][]int
		for i := start; i < end; i++ {
			if bySlot == nil {
				bySlot = map[int][]int{}
			}
			bySlot[slots[i]] = append(bySlot[slots[i]], i)
		}
		for i := start; i < end; i++ {
			idx, ok := bySlot[slots[i]]
			if !ok {
				continue
			}
			delete(bySlot, slots[i])
			c := open[slots[i]]
			if c == nil || c.nups+len(idx) > s.maxCall {
				c = &call{slot: slots[i], groups: map[string]*callGroup{}}
				open[slots[i]] = c
				calls = append(calls, c)
			}
			c.addEvent(s, evs[e].ID, ups, tags, idx)
		}
		start = end
	}
	return calls, newTags, nil
}

func sameDims(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (c *call) addEvent(s *Store, id string, ups []*ranking.Update, tags []string, idx []int) {
	c.events = append(c.events, idx)
	c.nups += len(idx)
	c.ids = append(c.ids, id)
	for _, i := range idx {
		u := ups[i]
		g := c.groups[tags[i]]
		if g == nil {
			g = &callGroup{idx: len(c.gorder) + 1, tag: tags[i], st: s.boards[u.Board], pidx: map[int64]int{}}
			c.groups[tags[i]] = g
			c.gorder = append(c.gorder, g)
		}
		p := g.period(u.Time)
		if g.st.late(p, u.StreamTime) {
			// Judged here, from the update alone; the script still records
			// the verdict with the event's dedupe key.
			c.ups = append(c.ups, updateArgs{group: g.idx, period: luaLatePeriod, member: u.Member, value: u.Value, timeMs: u.Time.UnixMilli()})
			continue
		}
		pi, ok := g.pidx[p.Start.UnixMilli()]
		if !ok {
			g.periods = append(g.periods, p)
			pi = len(g.periods)
			g.pidx[p.Start.UnixMilli()] = pi
		}
		base := "" // the board has no base
		switch {
		case g.st.b.HasBase && u.HasBase:
			base = strconv.FormatInt(u.Base, 10)
		case g.st.b.HasBase:
			base = "0"
		}
		// period indexes are fixed up in args() once the table is final
		c.ups = append(c.ups, updateArgs{group: g.idx, period: pi, member: u.Member, value: u.Value, timeMs: u.Time.UnixMilli(), base: base})
	}
}

// args renders the call; rolling groups get a consecutive period table that
// covers N-1 periods on each side of the periods used.
func (c *call) args(s *Store) []any {
	remap := make([][]int, len(c.gorder)) // group -> old index -> new index
	args := make([]any, 0, 5+len(c.gorder)*8+2*len(c.ids)+len(updateFields)*len(c.ups))
	args = append(args, s.prefix, s.dedupePrefix(c.slot), s.ttl.Milliseconds())
	// the boards of the call, once each
	bidx := map[*boardState]int{}
	var boards []*boardState
	for _, g := range c.gorder {
		if bidx[g.st] == 0 {
			boards = append(boards, g.st)
			bidx[g.st] = len(boards)
		}
	}
	args = append(args, len(boards))
	for _, st := range boards {
		b := st.b
		ba := boardArgs{window: luaWindowOf(b.Window), agg: luaAggOf(b.Aggregate), tie: st.tieMode,
			tieBits: st.codec.TieBits, tieUnitMs: st.unitMs, lo: st.lo, hi: st.hi, keepTop: b.KeepTop,
			asc: b.Order == ranking.Asc, graceMs: st.graceMs, periods: b.Periods, retentionMs: st.retMs,
			metaTTLMs: st.metaTTL, tieEpochMs: st.epochMs, fast: st.fast}
		args = ba.add(args)
	}
	args = append(args, len(c.gorder))
	gp0 := make([]int, len(c.gorder)) // group -> its periods' gp offset
	ngp := 0
	for gi, g := range c.gorder {
		st := g.st
		b := st.b
		table := g.periods
		remap[gi] = make([]int, len(g.periods)+1)
		if b.Window == ranking.WindowRolling && len(g.periods) > 0 {
			table = rollingTable(st.cal, g.periods, b.Periods)
			at := map[int64]int{}
			for i, p := range table {
				at[p.Start.UnixMilli()] = i + 1
			}
			for old, p := range g.periods {
				remap[gi][old+1] = at[p.Start.UnixMilli()]
			}
		} else {
			for i := range g.periods {
				remap[gi][i+1] = i + 1
			}
		}
		ga := groupArgs{tag: g.tag, board: bidx[st]}
		args = append(ga.add(args), len(table))
		gp0[gi] = ngp
		ngp += len(table)
		for _, p := range table {
			args = append(args, p.ID, p.Start.UnixMilli(), endMs(p))
		}
	}
	args = append(args, len(c.events))
	next := 0
	dprefix := s.dedupePrefix(c.slot)
	for e, id := range c.ids {
		n := len(c.events[e])
		ev := eventArgs{key: dprefix + id, n: n}
		args = ev.add(args)
		for _, u := range c.ups[next : next+n] {
			u.gp = luaLateGP
			if u.period > 0 {
				u.gp = gp0[u.group-1] + remap[u.group-1][u.period]
			}
			args = u.add(args)
		}
		next += n
	}
	return args
}

// endMs caps far-future ends (total boards) to an exact double.
func endMs(p ranking.Period) int64 {
	const maxExact = 1 << 52
	if e := p.End.UnixMilli(); e < maxExact {
		return e
	}
	return maxExact
}

// rollingTable returns consecutive periods from N-1 before the first used
// period to N-1 after the last one.
func rollingTable(cal ranking.Calendar, used []ranking.Period, n int) []ranking.Period {
	lo, hi := used[0], used[0]
	for _, p := range used[1:] {
		if p.Start.Before(lo.Start) {
			lo = p
		}
		if p.Start.After(hi.Start) {
			hi = p
		}
	}
	lo = cal.WindowStart(lo, n)
	table := []ranking.Period{lo}
	for p := lo; p.Start.Before(hi.Start); {
		p = cal.Next(p)
		table = append(table, p)
	}
	for i := 1; i < n; i++ {
		table = append(table, cal.Next(table[len(table)-1]))
	}
	return table
}
