package store

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rankd/rankd/ranking"
)

// The Go↔Lua contract of the scripts in lua/.
//
// Every number a script compares against is a named constant below. The
// scripts do not repeat them: each script is loaded behind a prelude that
// Go generates from these constants and field lists (luaPrelude) and that also holds the
// shared argument readers and the score codec (lua/prelude.lua). So a Go
// constant and its Lua name cannot disagree, and reordering a Go enum
// (ranking.Window, ranking.Aggregate) cannot change what a script sees:
// the mapping is the explicit switch of luaWindowOf / luaAggOf.
//
// The ARGV layouts are Go types whose fields, in order, are the order in
// which the script reads them (apply.lua: boardArgs for one board,
// groupArgs for one stream, eventArgs for the head of one event,
// updateArgs for one update; rolloverArgs for rollover.lua; denseArgs,
// gensArgs, lastMarkArgs, standingsArgs and unlockArgs for dense.lua,
// gens.lua, marks.lua, standings.lua and unlock.lua). Each type has one
// encoder (its add method) and a field list that TestLuaContract pins to
// the script's reading order; a script reads its KEYS into locals named as
// in the keys lists below (luaKeys), and TestLuaContract pins those too.

// luaWindow is a board window as the scripts number it.
type luaWindow int

const (
	luaWindowTotal    luaWindow = 0
	luaWindowPeriodic luaWindow = 1
	luaWindowRolling  luaWindow = 2
)

// luaAgg is an aggregate as the scripts number it.
type luaAgg int

const (
	luaAggSum  luaAgg = 0
	luaAggMax  luaAgg = 1
	luaAggMin  luaAgg = 2
	luaAggLast luaAgg = 3
)

// luaTie is how a score's low part holds the tie time (see ranking.Codec).
type luaTie int

const (
	luaTieNone luaTie = 0 // no tie part: the score is the value
	luaTieUp   luaTie = 1 // part = tie offset
	luaTieDown luaTie = 2 // part = max tie - tie offset
)

// luaStatus is an update's verdict as apply.lua returns it: one character
// per update.
type luaStatus byte

const (
	luaApplied     luaStatus = '0'
	luaDuplicate   luaStatus = '1'
	luaLate        luaStatus = '2'
	luaOutOfRange  luaStatus = '3'
	luaRepeatLate  luaStatus = '4' // a duplicate repeating its first delivery's late verdict
	luaRepeatRange luaStatus = '5' // ... its out-of-range verdict
	// luaByScript marks, in a packed call's verdict template, an update
	// the script judges (one sent to it); the template's other verdicts
	// are the caller's.
	luaByScript luaStatus = '?'
)

// luaRefusal is the first element of an apply call's reply when the call
// was refused before it changed anything: a number, where the verdicts of
// an accepted call are strings.
type luaRefusal int

const (
	// luaRefusedPosition: a partition's position record differs from the
	// one the call expects; the stored records of the call's spans follow
	// ("" for none), in span order.
	luaRefusedPosition luaRefusal = 1
	// luaRefusedGens: the gens hash's generation counter is gone or below
	// the last one seen; the counter and the last one seen follow ("0":
	// none).
	luaRefusedGens luaRefusal = 2
	// luaRefusedReplan: a packed call met a duplicate, or a folded member
	// whose sum could leave its range. It gave up before it changed
	// anything (the IDs it had added are removed again); the caller sends
	// it again per update.
	luaRefusedReplan luaRefusal = 3
)

// Key kinds: the part of a key after its hash tag (Key), the suffixes of
// a board key's side hashes, and the fields of a stream's meta hash. Go and
// the scripts build the same keys from these.
const (
	KindPeriod  = "p"    // P(j): a periodic board, a rolling board's period
	KindRolling = "r"    // S(k): a rolling board over the periods ending with k
	KindTotal   = "t"    // the total board, with PeriodAll
	KindMeta    = "meta" // a stream's meta hash (no period)
	KindLock    = "lock" // a stream's locks
	KindCount   = "n"    // a stream's updates applied per period (field: period id, "all" for a total board)
	PeriodAll   = "all"  // the one "period" of a total board

	suffixExact = ":h"  // keep_top boards: every member's exact score
	suffixLast  = ":lt" // last boards: "<event ms>|<message ID>" of the value
	suffixBase  = ":b"  // base boards: the greatest base of a member

	metaST         = "st"     // latest event time applied (ms)
	metaHead       = "head"   // rolling: the highest period whose S(k) is kept
	metaRolled     = "rolled" // rolling: the last period rolled over
	metaRollK      = "roll_k"
	metaRollCursor = "roll_cursor"
)

// The fields and ops of the gens hash (gens.lua).
const (
	gensNext   = "next" // the last generation number handed out
	gensLock   = "lock" // "<token>|<expires ms>" of the replay that builds
	gensActive = "a:"   // + board: its active generation
	gensBuild  = "b:"   // + board: the generation a replay builds
	gensDrop   = "d:"   // + board: generations left to delete

	gensOpRead    = "read"
	gensOpLock    = "lock"
	gensOpRenew   = "renew"
	gensOpUnlock  = "unlock"
	gensOpReserve = "reserve"
	gensOpBuild   = "build"
	gensOpSwitch  = "switch"
	gensOpPending = "pending"
	gensOpDropped = "dropped"
)

// Numbers the scripts share with Go.
const (
	luaHeadroom  = 1 << 52 // the codec keeps values below it: sums of magnitudes up to it are exact
	luaMaxUnpack = 4000    // most values handed to one command (Lua's unpack limit; even)
	luaMinTTLMs  = 1000    // the least a period key lives after its last write
)

// The fields and ops of a standings snapshot hash (standings.lua).
const (
	snapRev  = "rev"  // revision of json
	snapSum  = "sum"  // content digest
	snapGen  = "gen"  // the key generation it was read from
	snapPub  = "pub"  // the highest revision acknowledged by Kafka
	snapJSON = "json" // the payload of revision rev

	snapOpSeal   = "seal"
	snapOpRevise = "revise"
	snapOpPub    = "pub"
	snapOpLock   = "lock"
)

// gensNone is the gens hash's generation counter when it has none.
const gensNone = "0"

// posGens is the field of the position hash that keeps the last gens
// counter seen (not a partition: those are "<topic>|<partition>").
const posGens = "gens"

// luaLatePeriod is the period index of an update that Go judged late.
const luaLatePeriod = -1

// luaLateGP is the stream-period index of an update that Go judged late.
const luaLateGP = 0

func luaWindowOf(w ranking.Window) luaWindow {
	switch w {
	case ranking.WindowTotal:
		return luaWindowTotal
	case ranking.WindowPeriodic:
		return luaWindowPeriodic
	case ranking.WindowRolling:
		return luaWindowRolling
	}
	panic(fmt.Sprintf("store: window %v has no Lua number", w))
}

func luaAggOf(a ranking.Aggregate) luaAgg {
	switch a {
	case ranking.AggSum:
		return luaAggSum
	case ranking.AggMax:
		return luaAggMax
	case ranking.AggMin:
		return luaAggMin
	case ranking.AggLast:
		return luaAggLast
	}
	panic(fmt.Sprintf("store: aggregate %v has no Lua number", a))
}

// luaStatusOf is the verdict apply.lua keeps for a first delivery's st.
func luaStatusOf(st ranking.Status) luaStatus {
	switch st {
	case ranking.StatusApplied:
		return luaApplied
	case ranking.StatusDuplicate:
		return luaDuplicate
	case ranking.StatusLate:
		return luaLate
	case ranking.StatusOutOfRange:
		return luaOutOfRange
	}
	panic(fmt.Sprintf("store: status %v has no Lua verdict", st))
}

// status returns the ranking verdict of c and whether it repeats an
// earlier delivery's.
func (c luaStatus) status() (ranking.Status, bool, error) {
	switch c {
	case luaApplied:
		return ranking.StatusApplied, false, nil
	case luaDuplicate:
		return ranking.StatusDuplicate, false, nil
	case luaLate:
		return ranking.StatusLate, false, nil
	case luaOutOfRange:
		return ranking.StatusOutOfRange, false, nil
	case luaRepeatLate:
		return ranking.StatusLate, true, nil
	case luaRepeatRange:
		return ranking.StatusOutOfRange, true, nil
	}
	return 0, false, fmt.Errorf("unknown status %q from the apply script", byte(c))
}

// luaConst is a constant of the prelude: its Lua name and its value (an
// integer, a string or a luaStatus).
type luaConst struct {
	name  string
	value any
}

// luaConsts are the constants the prelude defines, by Lua name: first a
// WINDOW_<NAME> and an AGG_<NAME> for every window and aggregate of the
// model (luaEnums), then the others.
var luaConsts = append(luaEnums(), []luaConst{
	{"TIE_NONE", luaTieNone}, {"TIE_UP", luaTieUp}, {"TIE_DOWN", luaTieDown},
	{"ST_APPLIED", luaApplied}, {"ST_DUPLICATE", luaDuplicate}, {"ST_LATE", luaLate},
	{"ST_OUT_OF_RANGE", luaOutOfRange}, {"ST_REPEAT_LATE", luaRepeatLate}, {"ST_REPEAT_RANGE", luaRepeatRange},
	{"LATE_GP", luaLateGP},
	{"REFUSED_POSITION", luaRefusedPosition}, {"REFUSED_GENS", luaRefusedGens}, {"REFUSED_REPLAN", luaRefusedReplan},
	{"ST_BY_SCRIPT", luaByScript}, {"ARGS_MSGPACK", argsMsgpack}, {"ARGS_PLAIN", argsPlain},
	{"MARKS_KEPT", marksKept}, {"GENS_NONE", gensNone}, {"GENS_KEEP", posGensKeep}, {"POS_GENS", posGens},
	{"KIND_PERIOD", KindPeriod}, {"KIND_ROLLING", KindRolling}, {"KIND_TOTAL", KindTotal}, {"KIND_META", KindMeta}, {"KIND_COUNT", KindCount},
	{"PERIOD_ALL", PeriodAll}, {"SUFFIX_EXACT", suffixExact}, {"SUFFIX_LAST", suffixLast}, {"SUFFIX_BASE", suffixBase},
	{"META_ST", metaST}, {"META_HEAD", metaHead}, {"META_ROLLED", metaRolled}, {"META_ROLL_K", metaRollK}, {"META_ROLL_CURSOR", metaRollCursor},
	{"GENS_NEXT", gensNext}, {"GENS_LOCK", gensLock}, {"GENS_ACTIVE", gensActive}, {"GENS_BUILD", gensBuild}, {"GENS_DROP", gensDrop},
	{"GENS_OP_READ", gensOpRead}, {"GENS_OP_LOCK", gensOpLock}, {"GENS_OP_RENEW", gensOpRenew}, {"GENS_OP_UNLOCK", gensOpUnlock},
	{"REG_OP_OPEN", regOpOpen}, {"REG_OP_COUNT", regOpCount},
	{"GENS_OP_RESERVE", gensOpReserve}, {"GENS_OP_BUILD", gensOpBuild}, {"GENS_OP_SWITCH", gensOpSwitch}, {"GENS_OP_PENDING", gensOpPending}, {"GENS_OP_DROPPED", gensOpDropped},
	{"HEADROOM", luaHeadroom}, {"MAX_UNPACK", luaMaxUnpack}, {"MIN_TTL_MS", luaMinTTLMs},
	{"UPDATE_ARGS", len(updateFields)}, {"EVENT_ARGS", len(eventFields)}, {"SUM_ARGS", len(sumFields)}, {"PLAIN_ARGS", len(plainEventFields)},
	{"DD_META", ddMeta}, {"DD_CALLS", ddCalls}, {"DD_SWEEP", ddSweep}, {"DD_INC", ddInc}, {"DD_DYING", ddDying}, {"DD_VERDICTS", ddVerdicts},
	{"DD_FILL", ddFill}, {"DD_GROWTH", ddGrowth}, {"DD_GROWTH_BITS", ddGrowthBits}, {"DD_LAYER_AT", ddLayerAt},
	{"DD_SWEEP_KEYS", ddSweepKeys}, {"DD_SWEEP_MS", ddSweepMs},
	{"SNAP_REV", snapRev}, {"SNAP_SUM", snapSum}, {"SNAP_GEN", snapGen}, {"SNAP_PUB", snapPub}, {"SNAP_JSON", snapJSON},
	{"SNAP_OP_SEAL", snapOpSeal}, {"SNAP_OP_REVISE", snapOpRevise}, {"SNAP_OP_PUB", snapOpPub}, {"SNAP_OP_LOCK", snapOpLock},
}...)

// luaEnums names every window and aggregate of the model for the scripts,
// WINDOW_TOTAL, AGG_SUM and so on (the names config reads, upper case),
// with the numbers of luaWindowOf and luaAggOf: a new aggregate needs its
// number there, and nothing here (the package panics at init until it has
// one).
func luaEnums() []luaConst {
	var out []luaConst
	for _, w := range ranking.Windows() {
		out = append(out, luaConst{"WINDOW_" + strings.ToUpper(w.String()), luaWindowOf(w)})
	}
	for _, a := range ranking.Aggregates() {
		out = append(out, luaConst{"AGG_" + strings.ToUpper(a.String()), luaAggOf(a)})
	}
	return out
}

// luaKeys are the names each script gives its KEYS, in order
// (local <name> = KEYS[i]); apply.lua takes its keys in ARGV and has none.
var luaKeys = map[string][]string{
	"dense.lua":     denseKeys,
	"gens.lua":      gensKeys,
	"marks.lua":     marksKeys,
	"positions.lua": raiseKeys,
	"register.lua":  registerKeys,
	"rollover.lua":  {"meta"}, // the stream's meta hash
	"standings.lua": standingsKeys,
	"unlock.lua":    unlockKeys,
}

// luaPrelude returns the Lua source every script is loaded behind: the
// constants, then lua/prelude.lua.
func luaPrelude() string {
	var b strings.Builder
	b.WriteString("-- generated by ranking/store/contract.go\n")
	for i, f := range updateFields {
		fmt.Fprintf(&b, "local U_%s = %d\n", strings.ToUpper(f), i)
	}
	for _, c := range luaConsts {
		switch v := c.value.(type) {
		case luaStatus:
			fmt.Fprintf(&b, "local %s = %s\n", c.name, strconv.Quote(string(rune(v))))
		case string:
			fmt.Fprintf(&b, "local %s = %s\n", c.name, strconv.Quote(v))
		default:
			fmt.Fprintf(&b, "local %s = %d\n", c.name, v)
		}
	}
	src, err := luaFS.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(err)
	}
	b.Write(src)
	return b.String()
}

// boardArgs is the ARGV of one board of an apply call: what its streams
// share, sent once per call however many streams (dims) of it the call
// writes.
type boardArgs struct {
	window      luaWindow
	agg         luaAgg
	tie         luaTie
	tieBits     uint
	tieUnitMs   int64
	lo, hi      int64 // accepted value range
	keepTop     int
	asc         bool
	graceMs     int64
	periods     int   // N of a rolling board
	retentionMs int64 // 0: keys are kept
	metaTTLMs   int64 // 0: kept
	tieEpochMs  int64
	fast        bool // sum without keep_top or base: updates folded per member (apply.lua's fast path)
}

// boardFields are boardArgs' Lua names, in ARGV order.
var boardFields = []string{"window", "agg", "mode", "tbits", "unit", "lo", "hi", "keep", "asc",
	"grace", "n", "ret", "metattl", "epoch", "fast"}

func (b *boardArgs) add(args []any) []any {
	return append(args, int(b.window), int(b.agg), int(b.tie), b.tieBits, b.tieUnitMs,
		b.lo, b.hi, b.keepTop, b01(b.asc), b.graceMs, b.periods, b.retentionMs, b.metaTTLMs, b.tieEpochMs, b01(b.fast))
}

// groupArgs is the ARGV of one stream (board + dims) of an apply call.
type groupArgs struct {
	tag   string
	board int // 1-based index of its board in the call
}

// groupFields are groupArgs' Lua names, in ARGV order.
var groupFields = []string{"tag", "board"}

func (g *groupArgs) add(args []any) []any { return append(args, g.tag, g.board) }

// eventArgs is the ARGV head of one event of an apply call; the updates
// sent follow.
type eventArgs struct {
	id      string // its message ID as sent: a packed call sends "" unless a last board judges by it
	msgID   string // its message ID (not sent)
	n       int    // number of updates sent (a packed call sends only those of slow boards)
	idKey          // its ID's shard hash and fingerprint (dedupe.go); sh "": decided (Event.Decided)
	tmpl    string // packed calls: its verdicts, luaByScript for the updates sent; "": all applied
	decided bool   // not sent: sh is
}

// eventFields are the Lua names apply.lua reads an eventArgs into, in ARGV
// order.
var eventFields = []string{"id", "nu", "sh", "fp", "tm"}

// add appends pointers to e's fields (go-redis writes what they point
// to; a pointer costs no allocation): e must not change until the call
// has run.
func (e *eventArgs) add(args []any) []any {
	return append(args, &e.id, &e.n, &e.sh, (*decimal)(&e.fp), &e.tmpl)
}

// plainEventFields are the Lua names apply.lua reads a plain event of a
// packed call into (eventArgs.addPlain: one whose updates were all folded
// and applied by the caller, so that the script only dedupes it), in ARGV
// order.
var plainEventFields = []string{"sh", "fp"}

// addPlain appends pointers to e's shard hash and fingerprint, as add does.
func (e *eventArgs) addPlain(args []any) []any { return append(args, &e.sh, (*decimal)(&e.fp)) }

// foldArgs is the ARGV head of the folded updates of one (stream, period)
// of a packed apply call; nm sumArgs follow.
type foldArgs struct {
	gp  int   // as updateArgs.gp
	cnt int   // its updates applied (the standings' event count)
	t   int64 // the latest event time of its updates not judged late (ms): the stream time
	nm  int   // members
}

// foldFields are foldArgs' Lua names, in ARGV order.
var foldFields = []string{"gp", "cnt", "t", "nm"}

func (f *foldArgs) add(args []any) []any { return append(args, &f.gp, &f.cnt, &f.t, &f.nm) }

// sumArgs is one member's folded updates in a packed apply call.
type sumArgs struct {
	member string
	d      int64 // the sum of their values
	ab     int64 // the sum of their magnitudes (<= luaHeadroom): the range check
	tq     int64 // tie boards: the latest tie, floor(ms / tie unit); else 0
}

// sumFields are the Lua names apply.lua reads a sumArgs into, in ARGV
// order.
var sumFields = []string{"member", "d", "ab", "tq"}

func (m *sumArgs) add(args []any) []any { return append(args, &m.member, &m.d, &m.ab, &m.tq) }

// The ops of register.lua.
const (
	regOpOpen  = "open"
	regOpCount = "count"
)

// registerArgs is the ARGV of a register.lua call (Store.RegisterIDs) on a
// generation's dedupe meta hash (KEYS).
type registerArgs struct {
	meta    string // <dedupe prefix>m
	op      string // regOpOpen, regOpCount
	dprefix string
	ttlMs   int64 // as dedupeArgs
	minSets int
	n       int    // open: the IDs to hold, which a new bucket is sized for; count: the IDs added
	bucket  string // open: the bucket to open; count: the bucket, incarnation and layer open gave
	inc     string
	layer   string
}

var (
	registerKeys   = []string{"meta"}
	registerFields = []string{"op", "dprefix", "ttl", "min", "n", "bucket", "inc", "layer"}
)

func (r *registerArgs) keys() []string { return []string{r.meta} }

func (r *registerArgs) add(args []any) []any {
	return append(args, r.op, r.dprefix, r.ttlMs, r.minSets, r.n, r.bucket, r.inc, r.layer)
}

// dedupeArgs is the ARGV of an apply call's dedupe (dedupe.go).
type dedupeArgs struct {
	ttlMs   int64  // how long an ID is remembered at least (a bucket's width)
	minSets int    // sets of a new bucket's first layer, at least (a power of two)
	callID  string // a call with Decided events: its ID, under which its reply is kept ("": none)
}

// dedupeFields are dedupeArgs' Lua names, in ARGV order.
var dedupeFields = []string{"ttl", "min", "call"}

func (d *dedupeArgs) add(args []any) []any { return append(args, d.ttlMs, d.minSets, d.callID) }

// positionArgs is the ARGV head of an apply call that checks where the
// partitions of its batch stand (Store.ApplyFrom) or writes stream time
// marks; its spans (spanArgs) and marks (markArgs) follow it.
type positionArgs struct {
	posKey    string // <base>:pos, the partitions' position records
	gensKey   string // <base>:gens
	gensCheck bool   // refuse when Redis lost the gens hash (see apply.lua)
	nSpans    int
	lastKey   string // <base>:wm:last, the partitions' latest marks
	nMarks    int
}

// positionFields are positionArgs' Lua names, in ARGV order.
var positionFields = []string{"poskey", "gkey", "gcheck", "nspan", "lkey", "nmark"}

func (p *positionArgs) add(args []any) []any {
	return append(args, p.posKey, p.gensKey, b01(p.gensCheck), p.nSpans, p.lastKey, p.nMarks)
}

// spanArgs is one partition of a checked apply call: the record the call
// expects ("" for none) and the record it leaves.
type spanArgs struct {
	field  string // "<topic>|<partition>"
	expect string
	set    string
}

// spanFields are spanArgs' Lua names, in ARGV order.
var spanFields = []string{"f", "exp", "set"}

func (s *spanArgs) add(args []any) []any { return append(args, s.field, s.expect, s.set) }

// markArgs is one stream time mark written by an apply call, after its
// effects (see Mark).
type markArgs struct {
	zkey      string // the partition's marks (markKey)
	offset    int64
	value     string // "<offset>:<stream ms>"
	lastField string // "<topic>|<partition>" in lastKey
	lastValue string // lastMark: "<offset>:<stream ms>:<written ms>"; "": none (lastField "" too)
}

// markFields are markArgs' Lua names, in ARGV order.
var markFields = []string{"zkey", "off", "v", "lf", "lv"}

func (m *markArgs) add(args []any) []any {
	return append(args, m.zkey, m.offset, m.value, m.lastField, m.lastValue)
}

// updateArgs is one update of an apply call. group and period place it
// while the call is planned; its ARGV (add) carries gp instead, so the
// script parses one number to find both.
type updateArgs struct {
	group  int // 1-based index of its stream in the call (not sent)
	period int // 1-based index in its stream's periods; luaLatePeriod: judged late (not sent)
	// gp numbers the (stream, period) pairs of the call: the periods of the
	// streams' tables (apply.lua), stream after stream, from 1; luaLateGP:
	// judged late.
	gp     int
	member string
	value  int64
	timeMs int64
	base   string // "": the board has no base; else the update's base ("0" without one)
}

// updateFields are updateArgs' Lua names, in ARGV order.
var updateFields = []string{"gp", "member", "value", "time", "base"}

// add appends pointers to u's fields, as eventArgs.add does: u must not
// change until the call has run.
func (u *updateArgs) add(args []any) []any {
	return append(args, &u.gp, &u.member, &u.value, &u.timeMs, &u.base)
}

// rolloverArgs is the ARGV of one rollover.lua call.
type rolloverArgs struct {
	lockKey, token string
	lockTTLMs      int64
	raise          bool   // raise the head to kStart first
	count          int    // members of the chunk; 0: no chunk (raise only)
	kStartMs       int64  // start of period k
	kID            string // its ID
	cursor         string // "<score>:<member>" of S(k-1) the chunk starts after; "": from the start
	sPrev, sK      string // S(k-1), S(k)
	pOld, pNew     string // P(k-N), P(k)
	sTTLMs         int64  // TTL of S(k); 0: kept
	tie            luaTie
	tieBits        uint
	wbPrevQ, wbQ   int64 // window base (tie unit) of S(k-1) and S(k)
	pNewQ          int64 // base of P(k)
	mids           []string
}

// rolloverFields are rolloverArgs' Lua names, in ARGV order (mids is the
// count followed by the keys).
var rolloverFields = []string{"lock", "token", "lockttl", "raise", "count", "kstart", "kid", "cursor",
	"sprev", "sk", "pold", "pnew", "sttl", "mode", "tbits", "wbprev", "wb", "pnewq", "nmid"}

func (r *rolloverArgs) add(args []any) []any {
	args = append(args, r.lockKey, r.token, r.lockTTLMs, b01(r.raise), r.count, r.kStartMs, r.kID, r.cursor,
		r.sPrev, r.sK, r.pOld, r.pNew, r.sTTLMs, int(r.tie), r.tieBits, r.wbPrevQ, r.wbQ, r.pNewQ, len(r.mids))
	for _, m := range r.mids {
		args = append(args, m)
	}
	return args
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// denseArgs is one dense.lua call (dense ranks, rank.go): the sorted set
// walked (KEYS) and its ARGV head; the target values follow it, distinct,
// best first.
type denseArgs struct {
	key     string // the board's sorted set
	tieBits uint
	asc     bool
	cap     int64 // most steps of the walk
	values  []int64
}

var (
	denseKeys   = []string{"key"}
	denseFields = []string{"tbits", "asc", "cap"} // then the values
)

func (d *denseArgs) keys() []string { return []string{d.key} }

func (d *denseArgs) add(args []any) []any {
	args = append(args, d.tieBits, b01(d.asc), d.cap)
	for _, v := range d.values {
		args = append(args, v)
	}
	return args
}

// gensArgs is one gens.lua call on the gens hash (KEYS): an op (gensOp*)
// and its operands; what an op does not take is sent empty.
type gensArgs struct {
	key    string // <base>:gens
	op     string
	token  string // the replay lock's token (lock, renew, unlock, build, switch, dropped)
	ttlMs  int64  // the lock's TTL (lock, renew)
	gen    int    // the generation switched to (switch), deleted (dropped) or reserved (build; 0: a new one)
	boards []string
}

var (
	gensKeys   = []string{"key"}
	gensFields = []string{"op", "token", "ttl", "gen", "nb"} // then nb boards
)

func (g *gensArgs) keys() []string { return []string{g.key} }

func (g *gensArgs) add(args []any) []any {
	args = append(args, g.op, g.token, g.ttlMs, g.gen, len(g.boards))
	for _, b := range g.boards {
		args = append(args, b)
	}
	return args
}

// raiseHeadArgs is the head of a positions.lua call (Store.RaisePositions,
// and a cluster's live records, Store.writePositions): the gens counter as
// the caller read it (GENS_NONE: none; posGensKeep: leave the last one
// seen as it is). raiseArgs follow it, one per partition.
type raiseHeadArgs struct {
	gens string
}

// posGensKeep in raiseHeadArgs leaves the position hash's last gens
// counter seen (POS_GENS) as it is.
const posGensKeep = "keep"

// raiseArgs raises one partition's position record, when Redis has none
// or one that resumes below offset.
type raiseArgs struct {
	field  string // "<topic>|<partition>"
	offset int64
	record string // the record to set
}

var (
	raiseKeys       = []string{"key"}
	raiseHeadFields = []string{"gens"}
	raiseFields     = []string{"f", "off", "rec"}
)

func (h *raiseHeadArgs) add(args []any) []any { return append(args, h.gens) }

func (r *raiseArgs) add(args []any) []any { return append(args, r.field, r.offset, r.record) }

// lastMarkArgs is one partition's latest mark in a marks.lua call, which
// raises the marks in the hash of every partition's latest mark (KEYS:
// marksKeys); one follows another.
type lastMarkArgs struct {
	field  string // "<topic>|<partition>"
	offset int64
	value  string // lastMark: "<offset>:<stream ms>:<written ms>"
}

var (
	marksKeys      = []string{"key"}
	lastMarkFields = []string{"f", "off", "v"}
)

func (m *lastMarkArgs) add(args []any) []any { return append(args, m.field, m.offset, m.value) }

// standingsArgs is one standings.lua call on a snapshot hash, or on the
// publisher's lock for op lock (KEYS): an op (snapOp*) and its operands;
// what an op does not take is sent empty.
type standingsArgs struct {
	key   string
	op    string
	token string // lock: the publisher's token
	ttlMs int64  // seal, revise: the snapshot's TTL; lock: the lock's
	gen   int    // seal, revise: the key generation the standings were read from
	sum   string // seal, revise: the content digest
	json  []byte // seal, revise: the payload
	rev   int    // revise: the expected revision (-1: none); pub: the revision published
}

var (
	standingsKeys   = []string{"k"}
	standingsFields = []string{"op", "token", "ttl", "gen", "sum", "json", "rev"}
)

func (a *standingsArgs) keys() []string { return []string{a.key} }

func (a *standingsArgs) add(args []any) []any {
	return append(args, a.op, a.token, a.ttlMs, a.gen, a.sum, a.json, a.rev)
}

// unlockArgs is one unlock.lua call: release the lock key while it holds
// token.
type unlockArgs struct {
	key, token string
}

var (
	unlockKeys   = []string{"key"}
	unlockFields = []string{"token"}
)

func (u *unlockArgs) keys() []string { return []string{u.key} }

func (u *unlockArgs) add(args []any) []any { return append(args, u.token) }
