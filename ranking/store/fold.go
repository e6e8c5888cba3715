package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

// Folder applies the updates of the boards it can fold (Foldable: sums
// over a total or periodic window, keep_top and base boards included) in
// memory,
// with the verdicts apply.lua would give them one by one in the order
// given, and then writes the final state once (Flush): one ZADD per period
// key for all its members, with the counts, stream times, expiries and
// dims registry the script would have left, and no script or read. Only a
// replay may fold, into a generation no one else writes yet
// (ReserveBuild), whose keys start empty, on a standalone Redis.
type Folder struct {
	s       *Store
	mu      sync.Mutex
	streams map[string]*foldStream // by tag
	order   []*foldStream
	last    map[string]*foldStream // by board: the stream of its last update (a tag costs an allocation to build)
}

// foldStream is one board+dims stream of a Folder.
type foldStream struct {
	st      *boardState
	board   string
	tag     string
	dims    []string
	stMs    int64 // the latest event time of its updates that were not late (ms)
	hasST   bool
	periods map[int64]*foldPeriod // by period start (ms)
	order   []*foldPeriod
	cur     *foldPeriod // the period of its last update
}

// foldPeriod is one period key of a stream.
type foldPeriod struct {
	p       ranking.Period
	members map[string]*foldMember
	applied int64 // updates applied: the standings' event count
}

// foldMember is one member's value and latest tie (floor(ms / tie unit))
// of its applied updates, and on a base board the greatest base of its
// events (hasB: one had a base and the script would keep it).
type foldMember struct {
	v, q, b int64
	hasB    bool
}

// NewFolder returns an empty Folder of this generation's store.
func (s *Store) NewFolder() *Folder {
	return &Folder{s: s, streams: map[string]*foldStream{}, last: map[string]*foldStream{}}
}

// Foldable reports whether the updates of board can be folded.
func (f *Folder) Foldable(board string) bool {
	st := f.s.boards[board]
	return st != nil && f.foldable(st)
}

// A sum board folds unless it is rolling: its members' final values are
// the same in any order of their updates. With keep_top (whose values must
// be positive, so a member's score only grows) the sorted set the script
// leaves is the top keep_top of the final scores: a member trimmed once
// stays out until an update of its own puts it back.
func (f *Folder) foldable(st *boardState) bool {
	b := st.b
	return !f.s.cluster && b.Aggregate == ranking.AggSum && b.Window != ranking.WindowRolling &&
		(b.KeepTop == 0 || b.Order == ranking.Desc)
}

// Fold applies ups, all of Foldable boards, in order, and writes their
// statuses to out (applied, late or out of range; they are new: the
// caller decided). It is safe for concurrent use.
func (f *Folder) Fold(ups []ranking.Update, out []ranking.Status) error {
	return f.fold(ups, nil, out, len(ups))
}

// FoldAt is Fold of ups[at[0]], ups[at[1]], ... in that order, the status
// of ups[at[j]] written to out[j]: a batch's updates are folded where they
// are, not copied (an Update is 144 bytes and holds pointers).
func (f *Folder) FoldAt(ups []ranking.Update, at []int, out []ranking.Status) error {
	return f.fold(ups, at, out, len(at))
}

// fold applies the n updates of ups that at picks (nil: the first n).
func (f *Folder) fold(ups []ranking.Update, at []int, out []ranking.Status, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range n {
		var u *ranking.Update
		if at != nil {
			u = &ups[at[i]]
		} else {
			u = &ups[i]
		}
		st, err := f.s.board(u.Board)
		if err != nil {
			return err
		}
		if !f.foldable(st) {
			return fmt.Errorf("store: board %q cannot be folded", u.Board)
		}
		if len(u.Dims) != len(st.b.Dims) {
			return fmt.Errorf("board %q: %d dims values, want %d", u.Board, len(u.Dims), len(st.b.Dims))
		}
		fs := f.last[u.Board]
		if fs == nil || !sameDims(fs.dims, u.Dims) {
			tag := st.tag
			if len(u.Dims) > 0 {
				tag = Tag(u.Board, u.Dims)
			}
			if fs = f.streams[tag]; fs == nil {
				fs = &foldStream{st: st, board: u.Board, tag: tag, dims: cloneStrings(u.Dims), periods: map[int64]*foldPeriod{}}
				f.streams[tag] = fs
			}
			f.last[u.Board] = fs
		}
		fp := fs.cur
		if fp == nil || u.Time.Before(fp.p.Start) || !u.Time.Before(fp.p.End) {
			p := st.cal.At(u.Time)
			if fp = fs.periods[p.Start.UnixMilli()]; fp == nil {
				fp = &foldPeriod{p: p, members: map[string]*foldMember{}}
			}
		}
		if st.late(fp.p, u.StreamTime) {
			out[i] = ranking.StatusLate
			continue
		}
		if len(fs.order) == 0 && !fs.hasST {
			f.order = append(f.order, fs) // its first update that is not late
		}
		if fs.periods[fp.p.Start.UnixMilli()] == nil {
			fs.periods[fp.p.Start.UnixMilli()] = fp
			fs.order = append(fs.order, fp)
		}
		fs.cur = fp
		t := u.Time.UnixMilli()
		if !fs.hasST || t > fs.stMs {
			fs.stMs, fs.hasST = t, true
		}
		q := ranking.FloorDiv(t, st.unitMs)
		if st.tieOutOfRange(q) {
			out[i] = ranking.StatusOutOfRange
			continue
		}
		if st.b.KeepTop > 0 && u.Value <= 0 {
			out[i] = ranking.StatusOutOfRange
			continue
		}
		m := fp.members[u.Member]
		// |old| <= hi: a value beyond 2*hi leaves the range whatever the
		// old one (and old + value cannot overflow below that)
		if u.Value > 2*st.hi || u.Value < 2*st.lo {
			out[i] = ranking.StatusOutOfRange
			continue
		}
		nv := u.Value
		if m != nil {
			nv += m.v
		}
		// a base board, as apply.lua: the value is the greatest base of the
		// member's events (0 for an event without one) plus their values
		withBase, nb := st.b.HasBase, int64(0)
		if withBase {
			if u.HasBase {
				nb = u.Base
			}
			var ok bool
			if m == nil {
				nv, ok = addInt(nv, nb)
			} else if nb > m.b {
				var d int64
				if d, ok = subInt(nb, m.b); ok {
					nv, ok = addInt(nv, d)
				}
			} else {
				ok, withBase = true, false // a base not greater changes nothing
			}
			if !ok {
				out[i] = ranking.StatusOutOfRange
				continue
			}
		}
		if nv > st.hi || nv < st.lo {
			out[i] = ranking.StatusOutOfRange
			continue
		}
		if m == nil {
			// a copy: u.Member is most often part of its message's
			// decoded value, which it would keep alive until the end
			m = &foldMember{v: nv, q: q}
			fp.members[strings.Clone(u.Member)] = m
		} else {
			m.v = nv
			m.q = max(m.q, q)
		}
		if withBase {
			m.b, m.hasB = nb, true
		}
		fp.applied++
		out[i] = ranking.StatusApplied
	}
	return nil
}

// foldFlushCmds is how many commands one pipeline of Flush holds, and
// foldZAddMembers the most members of one ZADD (about 1 ms of Redis).
const (
	foldFlushCmds   = 4096
	foldZAddMembers = 1000
)

// Flush writes what was folded: per period key one ZADD of its members
// (in slices of foldZAddMembers; on a keep_top board its top keep_top
// only, with every member's exact score in a hash beside it, and on a base
// board the bases in another: flushPeriod), its expiry and event count, and
// per board the dims registry, as apply.lua would have left them (the
// expiries count from the stream's latest event time at the end of the
// fold; a folded board is not rolling, so its streams keep no meta). It
// returns the members written. It writes absolute values only, so after
// an error it may be run again.
func (f *Folder) Flush(ctx context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.s
	pipe := s.rdb.Pipeline()
	n, members := 0, 0
	exec := func(force bool) error {
		if n == 0 || (!force && n < foldFlushCmds) {
			return nil
		}
		n = 0
		return execChecked(ctx, pipe, "writing folded boards")
	}
	tags := map[string][]any{}
	for _, fs := range f.order {
		st := fs.st
		minTTL := max(st.graceMs, luaMinTTLMs)
		counts := Key(s.prefix, fs.tag, KindCount, "")
		counted := false
		for _, fp := range fs.order {
			if len(fp.members) == 0 {
				continue // every update left the range: no key, as in the script
			}
			key, field, tbase := Key(s.prefix, fs.tag, KindPeriod, fp.p.ID), fp.p.ID, ranking.FloorDiv(fp.p.Start.UnixMilli(), st.unitMs)
			if st.b.Window == ranking.WindowTotal {
				key, field, tbase = Key(s.prefix, fs.tag, KindTotal, PeriodAll), PeriodAll, ranking.FloorDiv(st.epochMs, st.unitMs)
			}
			cmds, written, hashes, err := flushPeriod(ctx, pipe, key, st, fp, tbase)
			if err != nil {
				return members, err
			}
			members, n = members+written, n+cmds
			if st.retMs > 0 && fs.hasST {
				ttl := max(endMs(fp.p)+st.retMs-fs.stMs, minTTL)
				for _, k := range append(hashes, key) {
					pipe.PExpire(ctx, k, msDuration(ttl))
					n++
				}
			}
			pipe.HSet(ctx, counts, field, fp.applied) // the key starts empty: the script's HINCRBY, and Flush may run again
			counted = true
			n++
			if err := exec(false); err != nil {
				return members, err
			}
		}
		if counted && st.metaTTL > 0 {
			pipe.PExpire(ctx, counts, msDuration(st.metaTTL))
			n++
		}
		tags[fs.board] = append(tags[fs.board], fs.tag)
	}
	for board, ts := range tags {
		pipe.SAdd(ctx, s.dimsKey(board), ts...)
		n++
	}
	return members, exec(true)
}

// flushPeriod queues the writes of a folded period as apply.lua leaves
// it: the sorted set at key (on a keep_top board only the top keep_top, as
// its trims leave it: the greatest scores, and of equal ones the greatest
// members), and on a keep_top board every member's exact score in
// key+suffixExact, on a base board the greatest bases in key+suffixBase.
// It returns the commands and members queued and the hashes written
// beside key (they expire with it).
func flushPeriod(ctx context.Context, pipe redis.Pipeliner, key string, st *boardState, fp *foldPeriod, tbase int64) (cmds, written int, hashes []string, err error) {
	type scored struct {
		member string
		score  float64
	}
	all := make([]scored, 0, len(fp.members))
	var exact, bases []any
	for member, m := range fp.members {
		score, err := st.codec.Encode(m.v, m.q-tbase)
		if err != nil {
			return cmds, written, nil, fmt.Errorf("writing folded boards: %s %q: %w", key, member, err)
		}
		all = append(all, scored{member, score})
		if st.b.KeepTop > 0 {
			exact = append(exact, member, strconv.FormatInt(int64(score), 10))
		}
		if m.hasB {
			bases = append(bases, member, strconv.FormatInt(m.b, 10))
		}
	}
	for _, h := range []struct {
		key    string
		fields []any
	}{{key + suffixExact, exact}, {key + suffixBase, bases}} {
		if len(h.fields) == 0 {
			continue
		}
		hashes = append(hashes, h.key)
		for fs := h.fields; len(fs) > 0; {
			c := min(len(fs), 2*foldZAddMembers)
			pipe.HSet(ctx, h.key, fs[:c]...)
			cmds, fs = cmds+1, fs[c:]
		}
	}
	if k := st.b.KeepTop; k > 0 && len(all) > k {
		slices.SortFunc(all, func(a, b scored) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return strings.Compare(b.member, a.member)
		})
		all = all[:k]
	}
	for len(all) > 0 {
		c := min(len(all), foldZAddMembers)
		zs := make([]redis.Z, c)
		for i, e := range all[:c] {
			zs[i] = redis.Z{Score: e.score, Member: e.member}
		}
		pipe.ZAdd(ctx, key, zs...)
		cmds, written, all = cmds+1, written+c, all[c:]
	}
	return cmds, written, hashes, nil
}

// msDuration is ms milliseconds.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// execChecked runs pipe and returns the first error of the pipeline or of
// one of its commands, naming what it was doing.
func execChecked(ctx context.Context, pipe redis.Pipeliner, what string) error {
	cmds, err := pipe.Exec(ctx)
	for _, c := range cmds {
		if c.Err() != nil {
			return fmt.Errorf("%s: %w", what, c.Err())
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// cloneStrings returns a copy of ss whose strings are copies too (not
// parts of a message kept alive by them).
func cloneStrings(ss []string) []string {
	out := make([]string, len(ss))
	for i, x := range ss {
		out[i] = strings.Clone(x)
	}
	return out
}

// addInt is a + b, and whether it did not overflow.
func addInt(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

// subInt is a - b, and whether it did not overflow.
func subInt(a, b int64) (int64, bool) {
	c := a - b
	return c, (c < a) == (b > 0)
}
