package store_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestDecidedEvents: a Decided event is applied without a dedupe lookup
// and leaves no dedupe key; RegisterIDs then holds its ID with its
// verdict, so that a later delivery is a duplicate repeating it, as if
// the event had been applied undecided.
func TestDecidedEvents(t *testing.T) {
	unit, _ := ranking.ParseUnit("1d")
	daily := &ranking.Board{Name: "daily", Window: ranking.WindowPeriodic, Every: unit, Grace: time.Hour}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{daily, dedupeBoard}, store.WithPrefix(prefix), store.WithDedupeMinSets(1024))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.LockReplay(ctx, "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	g, err := s.ReserveBuild(ctx, "tok", []string{"daily", "dd"})
	if err != nil {
		t.Fatal(err)
	}
	gen := s.Generation(g)
	gprefix := prefix + ":g" + strconv.Itoa(g)
	ev := func(id string, v int64, late bool) store.Event {
		st := day(21, 0)
		if late {
			st = day(23, 0) // the 21st ended a day and an hour before
		}
		return store.Event{ID: id, Updates: []ranking.Update{
			{Board: "dd", Member: "m", Value: v, Time: day(21, 11), MsgID: id, StreamTime: st},
			{Board: "daily", Member: "m", Value: v, Time: day(21, 11), MsgID: id, StreamTime: st},
		}}
	}
	decided := []store.Event{ev("a", 5, false), ev("b", 7, true), ev("c", 1, false)}
	for i := range decided {
		decided[i].Decided = true
	}
	res, err := gen.Apply(ctx, decided)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(res.Status), "[applied applied applied late applied applied]"; got != want {
		t.Fatalf("decided statuses = %s, want %s", got, want)
	}
	var calls []string
	for _, k := range dedupeKeys(t, rdb, gprefix) {
		if !strings.HasPrefix(k, gprefix+":d:c:") {
			t.Fatalf("decided events left the dedupe key %s", k)
		}
		calls = append(calls, k)
	}
	if len(calls) != 1 {
		t.Fatalf("decided call replies kept: %v, want one", calls)
	}
	held := []store.HeldBucket{{IDs: []store.IDKey{store.KeyOf("a"), store.KeyOf("b"), store.KeyOf("c")},
		Verdicts: map[store.IDKey][]ranking.Status{store.KeyOf("b"): res.Status[2:4]}}}
	if n, err := gen.RegisterIDs(ctx, held); err != nil || n != (store.Registered{Added: 3}) {
		t.Fatalf("RegisterIDs = %+v, %v; want 3 added", n, err)
	}
	if n, err := gen.RegisterIDs(ctx, held); err != nil || n != (store.Registered{}) {
		t.Fatalf("RegisterIDs again = %+v, %v; want 0 added (held already)", n, err)
	}
	res, err = gen.Apply(ctx, []store.Event{ev("a", 5, false), ev("b", 7, true), ev("d", 2, false)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(res.Status, res.Repeated),
		"[duplicate duplicate duplicate late applied applied] [false false false true false false]"; got != want {
		t.Fatalf("redelivered statuses, repeated = %s, want %s", got, want)
	}
	es, err := gen.Entries(ctx, "dd", nil, "all")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rows(es)), "[{m 15}]"; got != want {
		t.Fatalf("dd = %s, want %s (a, b, c and d once)", got, want)
	}
}

// TestRegisterIDs holds 100,000 IDs, grouped by set: every one is then a
// duplicate, a new one is not, and the bucket counts them all in one
// layer sized for them (12 a set at most, dedupe.go).
func TestRegisterIDs(t *testing.T) {
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{dedupeBoard}, store.WithPrefix(prefix), store.WithDedupeMinSets(1024))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const n = 100000
	ids := make([]store.IDKey, n)
	for i := range ids {
		ids[i] = store.KeyOf("id-" + strconv.Itoa(i))
	}
	if got, err := s.RegisterIDs(ctx, []store.HeldBucket{{IDs: ids}}); err != nil || got != (store.Registered{Added: n}) {
		t.Fatalf("RegisterIDs = %+v, %v; want %d added", got, err, n)
	}
	sets := dedupeKeys(t, rdb, prefix)
	if len(sets) > 16384 {
		t.Fatalf("%d sets for %d IDs, want at most 16,384 (the next power of two over %d/12)", len(sets), n, n)
	}
	// every set of the one bucket's first layer, named by 14 binary digits
	// (16,384 sets), as apply.lua names them
	setName := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `:d:\d+\.\d+\.1:[01]{14}$`)
	total := int64(0)
	for _, k := range sets {
		if !setName.MatchString(k) {
			t.Fatalf("set %s is not one of the first layer's 16,384", k)
		}
		total += rdb.SCard(ctx, k).Val()
	}
	if total != n {
		t.Fatalf("the sets hold %d IDs, want %d", total, n)
	}
	meta := rdb.HGetAll(ctx, prefix+":d:m").Val()
	found := false
	for f, v := range meta {
		if _, err := strconv.Atoi(f); err == nil {
			found = true
			if want := fmt.Sprintf(":16384:1:%d:%d", n, n); len(v) < len(want) || v[len(v)-len(want):] != want {
				t.Fatalf("bucket %s = %q, want inc%s", f, v, want)
			}
		}
	}
	if !found {
		t.Fatalf("no bucket in %v", meta)
	}
	probe := ddEvents("id-0", "id-4242", "id-99999", "new")
	res, err := s.Apply(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(res.Status), "[duplicate duplicate duplicate applied]"; got != want {
		t.Fatalf("after RegisterIDs: %s, want %s", got, want)
	}
}

// TestRegisterIDsByTime: an ID is held in the bucket of its message's
// time when that is the current or the previous one, in the current one
// when its bucket is later or unknown, and not at all when it is older:
// live consumption deleted that bucket, so a later delivery is new to it.
func TestRegisterIDsByTime(t *testing.T) {
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{dedupeBoard}, store.WithPrefix(prefix),
		store.WithDedupeTTL(time.Hour), store.WithDedupeMinSets(1024))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := rdb.Time(ctx).Val()
	if left := time.Hour - time.Duration(now.UnixMilli()%time.Hour.Milliseconds())*time.Millisecond; left < 30*time.Second {
		time.Sleep(left + time.Second) // not across a turn of the bucket
		now = rdb.Time(ctx).Val()
	}
	cur := s.DedupeBucket(now)
	if want := now.UnixMilli() / 3_600_000; cur != want {
		t.Fatalf("DedupeBucket(%v) = %d, want %d", now, cur, want)
	}
	held := func(b int64, ids ...string) store.HeldBucket {
		h := store.HeldBucket{Bucket: b}
		for _, id := range ids {
			h.IDs = append(h.IDs, store.KeyOf(id))
		}
		return h
	}
	ids := []store.HeldBucket{held(cur, "cur"), held(cur-2, "old"), held(cur-1, "prev", "prev2"), held(0, "unknown"),
		held(cur-50, "older"), held(cur+1, "later")}
	if got, err := s.RegisterIDs(ctx, ids); err != nil || got != (store.Registered{Added: 5, Expired: 2}) {
		t.Fatalf("RegisterIDs = %+v, %v; want 5 added, 2 expired", got, err)
	}
	meta := rdb.HGetAll(ctx, prefix+":d:m").Val()
	for b, want := range map[int64]string{cur - 1: ":1024:1:2:2", cur: ":1024:1:3:3"} {
		if v := meta[strconv.FormatInt(b, 10)]; !strings.HasSuffix(v, want) {
			t.Fatalf("bucket %d = %q, want inc%s (meta %v)", b, v, want, meta)
		}
	}
	if len(meta) != 3 { // the two buckets and the incarnation counter
		t.Fatalf("meta = %v, want the buckets %d and %d only", meta, cur-1, cur)
	}
	res, err := s.Apply(ctx, ddEvents("old", "prev", "cur", "unknown", "older", "later", "prev2"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(res.Status), "[applied duplicate duplicate duplicate applied duplicate duplicate]"; got != want {
		t.Fatalf("after RegisterIDs: %s, want %s", got, want)
	}
}

// TestDecidedCallOnce: a call with Decided events run a second time (as a
// client resending a pipeline after a lost reply would: the same call ID)
// returns its first reply and changes nothing; a new call applies.
func TestDecidedCallOnce(t *testing.T) {
	rdb := testenv.Redis(t).Client(t)
	s, err := store.New(rdb, []*ranking.Board{dedupeBoard}, store.WithPrefix(testenv.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	evs := []store.Event{
		{ID: "a", Decided: true, Updates: []ranking.Update{{Board: "dd", Member: "m", Value: 5, Time: day(21, 11), MsgID: "a"}}},
		{ID: "b", Decided: true, Updates: []ranking.Update{{Board: "dd", Member: "m", Value: 1 << 60, Time: day(21, 11), MsgID: "b"}}},
	}
	value := func() string {
		t.Helper()
		es, err := s.Entries(ctx, "dd", nil, "all")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows(es))
	}
	undo := store.SetNonce("fixed")
	for i := range 2 {
		res, err := s.Apply(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(res.Status); got != "[applied out_of_range]" {
			t.Fatalf("run %d: statuses %s, want [applied out_of_range]", i+1, got)
		}
		if got := value(); got != "[{m 5}]" {
			t.Fatalf("run %d: board %s, want [{m 5}] (applied once)", i+1, got)
		}
	}
	undo()
	if _, err := s.Apply(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if got := value(); got != "[{m 10}]" {
		t.Fatalf("a new call: board %s, want [{m 10}]", got)
	}
}
