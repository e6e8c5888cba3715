package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

// call is one script call under construction: events of one slot.
type call struct {
	slot    int
	groups  map[string]*callGroup // by tag
	gorder  []*callGroup
	events  [][]int      // per event: indexes of its updates in the Apply input
	evs     []eventArgs  // per event: its ID, where the ID is held (dedupe.go), its number of updates
	sh      []byte       // the events' shard hashes (idKey.sh), one after the other: args makes them strings
	ups     []updateArgs // the events' updates, in order
	nups    int
	view    *Store // the generation it writes
	part    int    // index of its genPart in the Apply (-1: none)
	decided bool   // it has Decided events
	callID  string // set when it has Decided events: see apply.lua
	argv    []any  // rendered (args), behind a place for the encoding (wire)
	blob    []byte // argv as msgpack (wire)

	// Rendering: the head, spans and marks it carries (kept to render it
	// again), and whether it is packed (see apply.lua): its fast boards'
	// updates folded per member (folds, sums; sumAt finds a member's sum),
	// with the verdict the caller gave each update (pre, in the order of
	// ups; luaByScript: the script judges it).
	head   positionArgs
	sp     []spanArgs
	mk     []markArgs
	packed bool
	folds  []foldArgs
	fsums  [][]int // per fold: its sums, in order of first update
	sums   []sumArgs
	sumAt  map[sumKey]int
	pre    []luaStatus
}

// sumKey finds a member's sum in a packed call: its gp and member.
type sumKey struct {
	gp     int
	member string
}

// callGroup is one stream (board+dims) inside a call.
type callGroup struct {
	idx     int // 1-based, as the script numbers groups
	tag     string
	st      *boardState
	periods []ranking.Period
	pidx    map[int64]int  // period start ms -> 1-based index in periods, once there are many
	last    ranking.Period // cache for At
}

// index returns the 1-based index of p in g.periods, adding it if new.
func (g *callGroup) index(p ranking.Period) int {
	ms := p.Start.UnixMilli()
	if g.pidx == nil {
		for i := range g.periods {
			if g.periods[i].Start.UnixMilli() == ms {
				return i + 1
			}
		}
		g.periods = append(g.periods, p)
		if len(g.periods) == 8 { // a linear search is not enough any more
			g.pidx = make(map[int64]int, 16)
			for i := range g.periods {
				g.pidx[g.periods[i].Start.UnixMilli()] = i + 1
			}
		}
		return len(g.periods)
	}
	pi, ok := g.pidx[ms]
	if !ok {
		g.periods = append(g.periods, p)
		pi = len(g.periods)
		g.pidx[ms] = pi
	}
	return pi
}

// callPool holds the calls of applies done, whose memory later calls
// reuse.
var callPool sync.Pool

// newCall returns an empty call of slot.
func newCall(slot int) *call {
	c, _ := callPool.Get().(*call)
	if c == nil {
		c = &call{groups: map[string]*callGroup{}}
	}
	c.slot = slot
	return c
}

// release gives the memory of c, a call nothing uses any more, to later
// calls; it clears it first, so that it holds nothing of the apply.
func (c *call) release() {
	clear(c.groups)
	clear(c.gorder)
	clear(c.events)
	clear(c.evs)
	clear(c.ups)
	clear(c.argv)
	clear(c.sp)
	clear(c.mk)
	clear(c.sums)
	clear(c.sumAt)
	for i := range c.fsums {
		c.fsums[i] = c.fsums[i][:0]
	}
	*c = call{groups: c.groups, gorder: c.gorder[:0], events: c.events[:0], evs: c.evs[:0], ups: c.ups[:0],
		sh: c.sh[:0], argv: c.argv[:0], sp: c.sp[:0], mk: c.mk[:0], folds: c.folds[:0], fsums: c.fsums[:0],
		sums: c.sums[:0], sumAt: c.sumAt, pre: c.pre[:0], blob: c.blob[:0]}
	callPool.Put(c)
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
	// Decided says that the caller has decided the event is new: the
	// script neither looks its ID up nor holds it. Only a replay writing a
	// generation no one else writes (ReserveBuild) can decide, from every
	// ID of what it read; it then holds them with RegisterIDs.
	Decided bool
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
// of the offset after the batch (see Mark); they are written after the
// effects (on a standalone Redis by the batch's last script call), so that
// a mark never describes writes that Redis does not hold.
//
// The store New returns writes every update into its board's active
// key generation and, while a replay builds one, into that one too; a store
// from Generation writes its generation only.
func (s *Store) Apply(ctx context.Context, evs []Event, marks ...Mark) (ranking.Result, error) {
	return s.applyAll(ctx, evs, nil, marks)
}

// ApplyFrom is Apply for live consumption, which owns its position in
// Redis (see the comment at the top of position.go): spans say, for each
// partition of the batch, where the batch runs and which position record
// Redis must hold. When Redis holds another record (it lost writes, or
// another consumer moved the partition on), or lost the boards'
// generation pointers, ApplyFrom returns a *PositionError and the call it
// refused changed nothing. The spans' end offsets and stream times are
// written as marks.
func (s *Store) ApplyFrom(ctx context.Context, evs []Event, spans []Span) (ranking.Result, error) {
	if s.root != nil {
		return ranking.Result{}, errors.New("store: ApplyFrom on a generation's store")
	}
	marks := make([]Mark, len(spans))
	for i, sp := range spans {
		marks[i] = Mark{Topic: sp.Topic, Partition: sp.Partition, Offset: sp.To, Time: sp.ToTime}
	}
	return s.applyAll(ctx, evs, spans, marks)
}

// nUpdates returns the number of updates of evs.
func nUpdates(evs []Event) int {
	n := 0
	for i := range evs {
		n += len(evs[i].Updates)
	}
	return n
}

// applyAll applies evs to the generations they go to (see Apply), checking
// spans (ApplyFrom) and writing marks, in one pipeline.
func (s *Store) applyAll(ctx context.Context, evs []Event, spans []Span, marks []Mark) (ranking.Result, error) {
	n := nUpdates(evs)
	res := ranking.Result{Status: make([]ranking.Status, n), Repeated: make([]bool, n)}
	if n == 0 && len(marks) == 0 && len(spans) == 0 {
		return res, nil
	}
	parts, err := s.parts(ctx, evs)
	if err != nil {
		return res, err
	}
	var calls []*call
	defer func() {
		// nothing holds the calls once the apply is done: not the result,
		// not an error
		for _, c := range calls {
			c.release()
		}
	}()
	for pi, p := range parts {
		cs, tags, err := p.view.plan(p.evs, nUpdates(p.evs))
		if err != nil {
			return res, err
		}
		p.tags, p.res = tags, ranking.Result{Status: make([]ranking.Status, len(p.idx)), Repeated: make([]bool, len(p.idx))}
		for _, c := range cs {
			c.view, c.part = p.view, pi
		}
		calls = append(calls, cs...)
	}
	root := s
	if s.root != nil {
		root = s.root
	}
	if !s.cluster && len(calls) == 0 {
		// nothing to apply: one call still checks the positions and
		// writes the marks
		v := s
		if len(parts) > 0 {
			v = parts[0].view
		}
		c := newCall(0)
		c.view, c.part = v, -1
		calls = append(calls, c)
	}
	nonce := newNonce()
	// Packed calls may give up and be sent again per update (exec): only
	// where nothing depends on their order but the position records they
	// check, or on a cluster, which writes marks and positions after every
	// call succeeded.
	pack := s.pack && (s.cluster || spans != nil) && time.Now().UnixNano() >= s.replanned.Load()+int64(replanPause)
	for k, c := range calls {
		head := positionArgs{}
		sp, mk := c.sp[:0], c.mk[:0]
		if !s.cluster {
			head.posKey, head.gensKey, head.lastKey = root.posKey(), root.gensKey(), root.lastMarksKey()
			if spans != nil {
				head.gensCheck = true
				for i := range spans {
					expect := spans[i].Expect
					if k > 0 {
						expect = spans[i].record(k, len(calls), nonce)
					}
					sp = append(sp, spanArgs{field: posField(spans[i].Topic, spans[i].Partition), expect: expect,
						set: spans[i].record(k+1, len(calls), nonce)})
				}
			}
			if k == len(calls)-1 {
				mk = root.markArgs(marks, s.root == nil)
			}
		}
		head.nSpans, head.nMarks = len(sp), len(mk)
		if c.decided {
			c.callID = nonce + "." + strconv.Itoa(k)
		}
		c.head, c.sp, c.mk = head, sp, mk
		c.packed = pack && !c.decided
		c.argv = c.args(c.view)
	}
	if err := s.exec(ctx, parts, calls, spans); err != nil {
		return res, err
	}
	for i := range spans {
		if s.cluster {
			spans[i].Left = spans[i].record(1, 1, clusterNonce)
		} else {
			spans[i].Left = spans[i].record(len(calls), len(calls), nonce)
		}
	}
	if s.cluster && (len(marks) > 0 || len(spans) > 0) {
		// after every call succeeded: the nodes of a cluster order nothing
		// between them
		pipe := s.rdb.Pipeline()
		cmds := root.writeMarks(ctx, pipe, marks, s.root == nil)
		written := root.writePositions(ctx, pipe, spans)
		_, _ = pipe.Exec(ctx)
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return res, fmt.Errorf("writing stream times: %w", err)
			}
		}
		if err := written(); err != nil {
			return res, fmt.Errorf("writing positions: %w", err)
		}
	}
	for _, p := range parts {
		p.view.knownMu.Lock()
		for board, tags := range p.tags {
			for _, tag := range tags {
				if k := (dimsKey{board, tag.(string)}); p.view.known[k].IsZero() {
					p.view.known[k] = time.Now()
				}
			}
		}
		p.view.knownMu.Unlock()
		if !p.building {
			for k, i := range p.idx {
				res.Status[i], res.Repeated[i] = p.res.Status[k], p.res.Repeated[k]
			}
		}
	}
	return res, nil
}

// exec runs calls in one pipeline and fills their parts' results. Calls
// that fail with NOSCRIPT are run again after SCRIPT LOAD, with the checked
// calls after them (refused: each expects the record of the one before).
func (s *Store) exec(ctx context.Context, parts []*genPart, calls []*call, spans []Span) error {
	mode, err := s.enc.get(ctx, s.rdb)
	if err != nil {
		return fmt.Errorf("applying batch: %w", err)
	}
	first, loaded := true, false
	for pending := calls; len(pending) > 0; first = false {
		pipe := s.rdb.Pipeline()
		if first {
			for _, p := range parts {
				for board, tags := range p.tags {
					pipe.SAdd(ctx, p.view.dimsKey(board), tags...)
				}
			}
		}
		cmds := make([]*redis.Cmd, len(pending))
		for i, c := range pending {
			argv, err := c.wire(mode)
			if err != nil {
				return fmt.Errorf("applying batch: %w", err)
			}
			cmds[i] = applyScript.EvalSha(ctx, pipe, []string{s.dedupePrefix(c.slot)}, argv...)
		}
		_, _ = pipe.Exec(ctx) // every command's error is checked below
		var failed []*call
		noScript := false
		for i, c := range pending {
			out, err := cmds[i].Slice()
			if isNoScript(err) {
				failed = append(failed, c)
				noScript = true
				continue
			}
			if err != nil {
				return fmt.Errorf("applying batch: %w", err)
			}
			if ref, ok := refusal(out); ok && ref == luaRefusedReplan && c.packed {
				// it met a duplicate (a redelivery) or a member near its
				// range: per update from now on, and for a while
				s.replanned.Store(time.Now().UnixNano())
				s.replans.Add(1)
				c.packed = false
				c.argv = c.args(c.view)
				failed = append(failed, c)
				continue
			} else if ok {
				if len(failed) > 0 {
					// a checked call after one that did not run expects the
					// record that one leaves: it runs again with it
					failed = append(failed, c)
					continue
				}
				s.forgetDims()
				return refusedErr(ref, out, spans, c.argv)
			}
			if err := c.verdicts(out, parts); err != nil {
				return err
			}
			if c.packed {
				s.packs.Add(1)
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if noScript {
			if loaded {
				return fmt.Errorf("applying batch: script still missing after SCRIPT LOAD")
			}
			if err := applyScript.Load(ctx, s.rdb).Err(); err != nil {
				return fmt.Errorf("loading apply script: %w", err)
			}
			loaded = true
		}
		pending = failed
	}
	return nil
}

// wire returns the call's ARGV in encoding mode (args.go): the encoding,
// then the rendered arguments as they are (argsPlain) or as one msgpack
// array (argsMsgpack).
func (c *call) wire(mode string) ([]any, error) {
	if mode == argsPlain {
		return c.argv, nil // args put argsPlain first
	}
	blob, err := packArgs(c.blob[:0], c.argv[1:])
	if err != nil {
		return nil, err
	}
	c.blob = blob
	return []any{argsMsgpack, blob}, nil
}

// refusal returns the refusal code of an apply call's reply, if it is one.
func refusal(out []any) (luaRefusal, bool) {
	if len(out) == 0 {
		return 0, false
	}
	n, ok := out[0].(int64)
	return luaRefusal(n), ok
}

// refusedErr renders a refused call's reply as a *PositionError.
func refusedErr(ref luaRefusal, out []any, spans []Span, argv []any) error {
	e := &PositionError{}
	switch ref {
	case luaRefusedGens:
		e.Gens, _ = out[1].(string)
		e.GensExpected, _ = out[2].(string)
		return e
	case luaRefusedPosition:
		if len(out) != len(spans)+1 {
			return fmt.Errorf("applying batch: refusal of %d positions for %d spans", len(out)-1, len(spans))
		}
		for i, sp := range spans {
			rec, _ := out[i+1].(string)
			p, err := parsePosition(sp.Topic, sp.Partition, rec)
			if err != nil {
				return fmt.Errorf("applying batch: %w", err)
			}
			e.Positions = append(e.Positions, p)
		}
		return e
	}
	return fmt.Errorf("applying batch: unknown refusal %d", ref)
}

// verdicts fills the call's part's result from the call's reply.
func (c *call) verdicts(out []any, parts []*genPart) error {
	if c.packed {
		return c.packedVerdicts(out, parts)
	}
	if len(out) != len(c.events) {
		return fmt.Errorf("applying batch: script returned %d events, want %d", len(out), len(c.events))
	}
	if c.part < 0 {
		return nil
	}
	res := &parts[c.part].res
	for e, o := range out {
		codes, _ := o.(string)
		idx := c.events[e]
		if len(codes) != len(idx) {
			return fmt.Errorf("applying batch: script returned %q for %d updates", codes, len(idx))
		}
		for k, u := range idx {
			var err error
			if res.Status[u], res.Repeated[u], err = luaStatus(codes[k]).status(); err != nil {
				return fmt.Errorf("applying batch: %w", err)
			}
		}
	}
	return nil
}

// packedVerdicts is verdicts for a packed call: its reply is the
// verdicts of the updates it was sent, the others are in c.pre.
func (c *call) packedVerdicts(out []any, parts []*genPart) error {
	if len(out) != 1 {
		return fmt.Errorf("applying batch: packed call returned %d values, want 1", len(out))
	}
	codes, _ := out[0].(string)
	if c.part < 0 {
		return nil
	}
	res := &parts[c.part].res
	j, k := 0, 0
	for _, idx := range c.events {
		for _, u := range idx {
			v := c.pre[k]
			k++
			if v == luaByScript {
				if j >= len(codes) {
					return fmt.Errorf("applying batch: packed call returned %d verdicts, want more", len(codes))
				}
				v = luaStatus(codes[j])
				j++
			}
			var err error
			if res.Status[u], res.Repeated[u], err = v.status(); err != nil {
				return fmt.Errorf("applying batch: %w", err)
			}
		}
	}
	if j != len(codes) {
		return fmt.Errorf("applying batch: packed call returned %d verdicts, want %d", len(codes), j)
	}
	return nil
}

// forgetDims drops what this store and its views know of the dims
// registry: Redis lost writes, possibly registrations among them.
func (s *Store) forgetDims() {
	root := s
	if s.root != nil {
		root = s.root
	}
	root.knownMu.Lock()
	clear(root.known)
	root.knownMu.Unlock()
	root.viewMu.Lock()
	views := make([]*Store, 0, len(root.views))
	for _, v := range root.views {
		views = append(views, v)
	}
	root.viewMu.Unlock()
	for _, v := range views {
		v.knownMu.Lock()
		clear(v.known)
		v.knownMu.Unlock()
	}
}

// markArgs renders marks for the apply script; latest tells whether they
// also raise the partitions' latest marks (not for a replay's generation:
// see lastMark).
func (s *Store) markArgs(marks []Mark, latest bool) []markArgs {
	if len(marks) == 0 {
		return nil
	}
	now := s.now().UnixMilli()
	out := make([]markArgs, len(marks))
	for i, m := range marks {
		v := markValue(m)
		out[i] = markArgs{zkey: s.markKey(m.Topic, m.Partition), offset: m.Offset, value: v}
		if latest {
			out[i].lastField, out[i].lastValue = posField(m.Topic, m.Partition), lastMark(v, now)
		}
	}
	return out
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
	seenTag := map[dimsKey]bool{}
	tags := make([]string, len(ups))
	slots := make([]int, len(ups))
	seq := make([]int, len(ups)) // seq[i] == i: the updates of an event in one slot
	for i, u := range ups {
		st, err := s.board(u.Board)
		if err != nil {
			return nil, nil, err
		}
		if len(u.Dims) != len(st.b.Dims) {
			return nil, nil, fmt.Errorf("board %q: %d dims values, want %d", u.Board, len(u.Dims), len(st.b.Dims))
		}
		seq[i] = i
		switch {
		case i > 0 && ups[i-1].Board == u.Board && sameDims(ups[i-1].Dims, u.Dims):
			tags[i], slots[i] = tags[i-1], slots[i-1]
		case len(u.Dims) == 0:
			tags[i] = st.tag
			if s.cluster {
				slots[i] = st.slot
			}
		default:
			tags[i] = Tag(u.Board, u.Dims)
			if s.cluster {
				slots[i] = Slot("{" + tags[i] + "}")
			}
		}
		k := dimsKey{u.Board, tags[i]}
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
	add := func(e int, slot int, idx []int) {
		c := open[slot]
		if c == nil || c.nups+len(idx) > s.maxCall {
			c = newCall(slot)
			open[slot] = c
			calls = append(calls, c)
		}
		c.addEvent(s, &evs[e], ups, tags, idx)
	}
	start := 0
	for e := range evs {
		end := start + len(evs[e].Updates)
		// one event: ups[start:end], split by slot
		if end > start && oneSlot(slots[start:end]) {
			add(e, slots[start], seq[start:end:end])
			start = end
			continue
		}
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
			add(e, slots[i], idx)
		}
		start = end
	}
	return calls, newTags, nil
}

// oneSlot reports whether every slot of slots is the first one.
func oneSlot(slots []int) bool {
	for _, sl := range slots[1:] {
		if sl != slots[0] {
			return false
		}
	}
	return true
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

func (c *call) addEvent(s *Store, ev *Event, ups []*ranking.Update, tags []string, idx []int) {
	c.events = append(c.events, idx)
	c.nups += len(idx)
	var sh [shDigits]byte
	var fp int64
	if !ev.Decided {
		fp = dedupeHash(ev.ID, &sh)
	}
	c.sh = append(c.sh, sh[:]...) // args() sends "" for a decided event
	c.decided = c.decided || ev.Decided
	c.evs = append(c.evs, eventArgs{msgID: ev.ID, n: len(idx), idKey: idKey{fp: fp}, decided: ev.Decided})
	for _, i := range idx {
		u := ups[i]
		g := c.groups[tags[i]]
		if g == nil {
			g = &callGroup{idx: len(c.gorder) + 1, tag: tags[i], st: s.boards[u.Board]}
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
		pi := g.index(p)
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

// args renders the call, packed or not (c.packed; a call that cannot be
// packed is rendered per update and c.packed cleared); rolling groups get
// a consecutive period table that covers N-1 periods on each side of the
// periods used.
func (c *call) args(s *Store) []any {
	head, spans, marks := c.head, c.sp, c.mk
	// The groups' period tables, and where their periods are in them.
	tables := make([][]ranking.Period, len(c.gorder))
	remap := make([][]int, len(c.gorder)) // group -> old index -> new index
	nperiods := 0
	for _, g := range c.gorder {
		nperiods += len(g.periods) + 1
	}
	remaps := make([]int, nperiods)
	rows := 0
	for gi, g := range c.gorder {
		b := g.st.b
		table := g.periods
		remap[gi], remaps = remaps[:len(g.periods)+1:len(g.periods)+1], remaps[len(g.periods)+1:]
		if b.Window == ranking.WindowRolling && len(g.periods) > 0 {
			table = rollingTable(g.st.cal, g.periods, b.Periods)
			for old, p := range g.periods {
				remap[gi][old+1] = 1 + slices.IndexFunc(table, func(q ranking.Period) bool { return q.Start.Equal(p.Start) })
			}
		} else {
			for i := range g.periods {
				remap[gi][i+1] = i + 1
			}
		}
		tables[gi] = table
		rows += len(table)
	}
	ms := make([]int64, 2*rows) // the periods' start and end: args point into it
	args := slices.Grow(c.argv[:0], 12+len(spanFields)*len(spans)+len(markFields)*len(marks)+len(dedupeFields)+
		1+len(c.gorder)*len(boardFields)+1+len(c.gorder)*(len(groupFields)+1)+3*rows+
		1+len(eventFields)*len(c.evs)+len(updateFields)*len(c.ups))
	args = append(args, argsPlain, s.prefix, s.dedupePrefix(c.slot)) // argsPlain: as sent plain; wire packs the rest otherwise
	args = head.add(args)
	for i := range spans {
		args = spans[i].add(args)
	}
	for i := range marks {
		args = marks[i].add(args)
	}
	dd := dedupeArgs{ttlMs: s.ttl.Milliseconds(), minSets: s.ddMinSets, callID: c.callID}
	args = dd.add(args)
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
		table := tables[gi]
		ga := groupArgs{tag: g.tag, board: bidx[g.st]}
		args = append(ga.add(args), len(table))
		gp0[gi] = ngp
		for i := range table {
			k := 2 * (ngp + i)
			ms[k], ms[k+1] = table[i].Start.UnixMilli(), endMs(table[i])
			args = append(args, &table[i].ID, &ms[k], &ms[k+1]) // pointers: no allocation
		}
		ngp += len(table)
	}
	for k := range c.ups {
		u := &c.ups[k]
		u.gp = luaLateGP
		if u.period > 0 {
			u.gp = gp0[u.group-1] + remap[u.group-1][u.period]
		}
	}
	if c.packed && !c.fold(ngp) {
		c.packed = false
	}
	args = append(args, len(c.events), b01(c.packed))
	shs := string(c.sh) // one allocation for the call's shard hashes
	for e := range c.evs {
		ev := &c.evs[e] // args point into c.evs and c.ups: they stay as they are until the call has run
		ev.sh = ""
		if !ev.decided {
			ev.sh = shs[e*shDigits : (e+1)*shDigits]
		}
	}
	if !c.packed {
		next := 0
		for e := range c.evs {
			ev, nu := &c.evs[e], len(c.events[e])
			ev.id, ev.n, ev.tmpl = ev.msgID, nu, ""
			args = ev.add(args)
			for k := next; k < next+nu; k++ {
				args = c.ups[k].add(args)
			}
			next += nu
		}
		return args
	}
	// packed: the plain events (every update folded and applied), then
	// the others with their verdict template and the updates sent
	plain, next := 0, 0
	for e := range c.evs {
		ev, nu := &c.evs[e], len(c.events[e])
		ev.id, ev.n, ev.tmpl = "", 0, ""
		all := true
		for k := next; k < next+nu; k++ {
			if c.pre[k] == luaByScript {
				ev.n++
				if c.gorder[c.ups[k].group-1].st.b.Aggregate == ranking.AggLast {
					ev.id = ev.msgID // the script compares it (apply.lua's judge)
				}
			}
			all = all && c.pre[k] == luaApplied
		}
		if all { // (an update the script judges is not applied by the caller)
			plain++
		} else {
			tmpl := make([]byte, nu)
			for i := range tmpl {
				tmpl[i] = byte(c.pre[next+i])
			}
			ev.tmpl = string(tmpl)
		}
		next += nu
	}
	args = append(args, plain)
	for e := range c.evs {
		if ev := &c.evs[e]; ev.tmpl == "" {
			args = ev.addPlain(args)
		}
	}
	next = 0
	for e := range c.evs {
		ev, nu := &c.evs[e], len(c.events[e])
		if ev.tmpl != "" {
			args = ev.add(args)
			for k := next; k < next+nu; k++ {
				if c.pre[k] == luaByScript {
					args = c.ups[k].add(args)
				}
			}
		}
		next += nu
	}
	args = append(args, len(c.folds))
	for f := range c.folds {
		args = c.folds[f].add(args)
		for _, m := range c.fsums[f] {
			args = c.sums[m].add(args)
		}
	}
	return args
}

// fold folds the updates of the call's fast boards per (stream, period,
// member) and gives every update the verdict the caller gives it (c.pre),
// for a packed call (ngp: the call's gp count). It reports false, and the
// call goes per update, when a magnitude or a sum of them reaches the
// headroom.
func (c *call) fold(ngp int) bool {
	c.pre = slices.Grow(c.pre[:0], len(c.ups))[:len(c.ups)]
	c.folds, c.sums = c.folds[:0], c.sums[:0]
	if c.sumAt == nil {
		c.sumAt = map[sumKey]int{}
	}
	clear(c.sumAt)
	foldOf := make([]int, ngp+1) // gp -> 1 + index in c.folds
	for k := range c.ups {
		u := &c.ups[k]
		if u.gp == luaLateGP {
			c.pre[k] = luaLate
			continue
		}
		st := c.gorder[u.group-1].st
		if !st.fast {
			c.pre[k] = luaByScript
			continue
		}
		fi := foldOf[u.gp] - 1
		if fi < 0 {
			fi = len(c.folds)
			foldOf[u.gp] = fi + 1
			c.folds = append(c.folds, foldArgs{gp: u.gp, t: u.timeMs})
			if fi == len(c.fsums) {
				c.fsums = append(c.fsums, nil)
			}
			c.fsums[fi] = c.fsums[fi][:0]
		}
		f := &c.folds[fi]
		f.t = max(f.t, u.timeMs)
		var tq int64
		if st.tieMode != luaTieNone {
			tq = ranking.FloorDiv(u.timeMs, st.unitMs)
			if st.tieOutOfRange(tq) {
				c.pre[k] = luaOutOfRange
				continue
			}
		}
		ab := u.value
		if ab < 0 {
			ab = -ab
		}
		if ab > luaHeadroom || ab < 0 {
			return false
		}
		c.pre[k] = luaApplied
		f.cnt++
		key := sumKey{u.gp, u.member}
		m, ok := c.sumAt[key]
		if !ok {
			m = len(c.sums)
			c.sumAt[key] = m
			c.sums = append(c.sums, sumArgs{member: u.member, tq: tq})
			c.fsums[fi] = append(c.fsums[fi], m)
			f.nm++
		}
		sm := &c.sums[m]
		sm.d += u.value
		if sm.ab += ab; sm.ab > luaHeadroom {
			return false
		}
		sm.tq = max(sm.tq, tq)
	}
	return true
}

// endMs caps far-future ends (total boards) to an exact double.
func endMs(p ranking.Period) int64 {
	if e := p.End.UnixMilli(); e < luaHeadroom {
		return e
	}
	return luaHeadroom
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
