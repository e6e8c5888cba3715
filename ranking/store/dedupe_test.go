package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
	"github.com/redis/go-redis/v9"
)

// dedupeBoard is a plain total sum board: every fresh event adds 1.
var dedupeBoard = &ranking.Board{Name: "dd", Window: ranking.WindowTotal}

func ddEvents(ids ...string) []store.Event {
	evs := make([]store.Event, len(ids))
	for i, id := range ids {
		evs[i] = store.Event{ID: id, Updates: []ranking.Update{{Board: "dd", Member: "m", Value: 1, Time: day(21, 11), MsgID: id}}}
	}
	return evs
}

// applied counts the applied verdicts of res.
func applied(res ranking.Result) int {
	n := 0
	for _, s := range res.Status {
		if s == ranking.StatusApplied {
			n++
		}
	}
	return n
}

// redisNow is Redis' clock, which places IDs in buckets.
func redisNow(t *testing.T, rdb redis.UniversalClient) time.Time {
	t.Helper()
	now, err := rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// dedupeKeys returns the keys under prefix's dedupe prefix, but the meta hash.
func dedupeKeys(t *testing.T, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(t.Context(), 0, prefix+":d:*", 1000).Iterator()
	for iter.Next(t.Context()) {
		if k := iter.Val(); k != prefix+":d:m" {
			out = append(out, k)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDedupeWindow: an ID is a duplicate for at least the TTL and at most
// two; the buckets before the previous one are deleted by later calls; the
// fingerprints are held in intsets.
func TestDedupeWindow(t *testing.T) {
	const ttl = time.Second
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	// first layers of 1,024 sets: the sweep below deletes 256 names a call
	s, err := store.New(rdb, []*ranking.Board{dedupeBoard}, store.WithPrefix(prefix), store.WithDedupeTTL(ttl),
		store.WithDedupeMinSets(1024))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	apply := func(ids ...string) int {
		t.Helper()
		res, err := s.Apply(ctx, ddEvents(ids...))
		if err != nil {
			t.Fatal(err)
		}
		return applied(res)
	}
	// start just after a bucket boundary, so the next steps are in known buckets
	for redisNow(t, rdb).UnixMilli()%ttl.Milliseconds() > 100 {
		time.Sleep(10 * time.Millisecond)
	}
	start := redisNow(t, rdb)
	if n := apply("a", "b", "a"); n != 2 {
		t.Fatalf("first delivery: %d applied, want 2 (a once, b)", n)
	}
	if n := apply("a", "b"); n != 0 {
		t.Fatalf("redelivery within the TTL: %d applied, want 0", n)
	}
	for _, k := range dedupeKeys(t, rdb, prefix) {
		if strings.HasSuffix(k, ":v") {
			continue
		}
		if enc, err := rdb.ObjectEncoding(ctx, k).Result(); err != nil || enc != "intset" {
			t.Fatalf("%s: encoding %q (%v), want intset", k, enc, err)
		}
	}
	// in the next bucket (the previous one is checked): still duplicates
	time.Sleep(time.Until(start.Add(ttl + 200*time.Millisecond)))
	if n := apply("a", "b", "c"); n != 1 {
		t.Fatalf("redelivery in the next bucket: %d applied, want 1 (c)", n)
	}
	// two buckets on, a and b are forgotten, c (added in the last bucket) is not
	time.Sleep(time.Until(start.Add(2*ttl + 200*time.Millisecond)))
	if n := apply("a", "c"); n != 1 {
		t.Fatalf("two TTLs on: %d applied, want 1 (a again, c a duplicate)", n)
	}
	// three buckets on, the sweep deletes the first two buckets' keys, at
	// most 256 (of their 2 x 1,025 sets and verdicts) per call: what is
	// left after 10 calls belongs to the last two buckets
	time.Sleep(time.Until(start.Add(3*ttl + 200*time.Millisecond)))
	for i := range 10 {
		apply(fmt.Sprint("d", i))
	}
	for _, b := range []int64{0, 1} {
		gone := fmt.Sprintf("%s:d:%d.", prefix, start.UnixMilli()/ttl.Milliseconds()+b)
		for _, k := range dedupeKeys(t, rdb, prefix) {
			if strings.HasPrefix(k, gone) {
				t.Errorf("key %s of bucket %d survived the sweep", k, b)
			}
		}
	}
	if v, err := s.Entries(ctx, "dd", nil, ""); err != nil || len(v) != 1 || v[0].Value != 14 {
		t.Fatalf("board %v (%v), want m=14 (a twice, b, c, d0-d9)", v, err)
	}
}

// TestDedupeLayers: a bucket that outgrows its sets gets a second layer,
// and IDs of both layers stay duplicates.
func TestDedupeLayers(t *testing.T) {
	testenv.Slow(t, "applies 140,000 events")
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{dedupeBoard}, store.WithPrefix(prefix), store.WithDedupeTTL(time.Hour),
		store.WithDedupeMinSets(1024))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const n = 70000 // over 64 per set of the first layer's 1024
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%d", i)
	}
	run := func(ids []string) int {
		total := 0
		for i := 0; i < len(ids); i += 2000 {
			res, err := s.Apply(ctx, ddEvents(ids[i:min(i+2000, len(ids))]...))
			if err != nil {
				t.Fatal(err)
			}
			total += applied(res)
		}
		return total
	}
	if got := run(ids); got != n {
		t.Fatalf("%d of %d new IDs applied", got, n)
	}
	meta, err := rdb.HGetAll(ctx, prefix+":d:m").Result()
	if err != nil {
		t.Fatal(err)
	}
	layers := 0
	for f, v := range meta {
		if f != "sw" && f != "inc" {
			parts := strings.Split(v, ":")
			if len(parts) != 5 || parts[4] != fmt.Sprint(n) {
				t.Fatalf("bucket %s: %q, want inc:s0:layers:n:%d", f, v, n)
			}
			fmt.Sscan(parts[2], &layers)
		}
	}
	if layers != 2 {
		t.Fatalf("%d layers after %d IDs, want 2 (meta %v)", layers, n, meta)
	}
	// the default first layer (16,384 sets) holds them in one
	if got := bucketLayers(t, rdb, prefix+"-default", ids, run2(t, rdb, prefix+"-default")); got != 1 {
		t.Fatalf("default first layer: %d layers after %d IDs, want 1", got, n)
	}
	more := append(ids[:0:0], ids...)
	for i := range 1000 {
		more = append(more, fmt.Sprintf("new-%d", i))
	}
	if got := run(more); got != 1000 {
		t.Fatalf("%d applied of %d old and 1000 new IDs, want 1000", got, n)
	}
	if v, err := s.Entries(context.Background(), "dd", nil, ""); err != nil || len(v) != 1 || v[0].Value != n+1000 {
		t.Fatalf("board %v (%v), want m=%d", v, err, n+1000)
	}
}

// run2 returns an apply of ids in batches of 2,000 on a store of
// dedupeBoard under prefix with the default dedupe sizing, which must
// apply every one.
func run2(t *testing.T, rdb redis.UniversalClient, prefix string) func([]string) {
	s, err := store.New(rdb, []*ranking.Board{dedupeBoard}, store.WithPrefix(prefix), store.WithDedupeTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return func(ids []string) {
		for i := 0; i < len(ids); i += 2000 {
			res, err := s.Apply(t.Context(), ddEvents(ids[i:min(i+2000, len(ids))]...))
			if err != nil {
				t.Fatal(err)
			}
			if n := applied(res); n != min(2000, len(ids)-i) {
				t.Fatalf("%d of %d new IDs applied", n, min(2000, len(ids)-i))
			}
		}
	}
}

// bucketLayers applies ids with apply and returns the layers of the
// single dedupe bucket under prefix.
func bucketLayers(t *testing.T, rdb redis.UniversalClient, prefix string, ids []string, apply func([]string)) int {
	apply(ids)
	meta, err := rdb.HGetAll(t.Context(), prefix+":d:m").Result()
	if err != nil {
		t.Fatal(err)
	}
	layers, buckets := 0, 0
	for f, v := range meta {
		if f != "sw" && f != "inc" {
			buckets++
			fmt.Sscan(strings.Split(v, ":")[2], &layers)
		}
	}
	if buckets != 1 {
		t.Fatalf("%d dedupe buckets (meta %v), want 1", buckets, meta)
	}
	return layers
}
