package store_test

import (
	"context"
	"fmt"
	"strconv"
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
// and IDs of both layers stay duplicates; the default first layer (16,384
// sets) holds as many IDs in one.
func TestDedupeLayers(t *testing.T) {
	testenv.Slow(t, "applies 140,000 events")
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	const n = 70000 // over 64 per set of a first layer of 1024
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%d", i)
	}
	for _, c := range []struct {
		name   string
		opts   []store.Option
		layers int
	}{
		{"1024 sets", []store.Option{store.WithDedupeMinSets(1024)}, 2},
		{"default", nil, 1},
	} {
		p := prefix + "-" + strconv.Itoa(c.layers)
		s, err := store.New(rdb, []*ranking.Board{dedupeBoard},
			append([]store.Option{store.WithPrefix(p), store.WithDedupeTTL(time.Hour)}, c.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := applyAll(t, s, ids); got != n {
			t.Fatalf("%s: %d of %d new IDs applied", c.name, got, n)
		}
		if layers := bucketLayers(t, rdb, p, n); layers != c.layers {
			t.Fatalf("%s: %d layers after %d IDs, want %d", c.name, layers, n, c.layers)
		}
		more := append(ids[:0:0], ids...)
		for i := range 1000 {
			more = append(more, fmt.Sprintf("new-%d", i))
		}
		if got := applyAll(t, s, more); got != 1000 {
			t.Fatalf("%s: %d applied of %d old and 1000 new IDs, want 1000", c.name, got, n)
		}
		if v, err := s.Entries(context.Background(), "dd", nil, ""); err != nil || len(v) != 1 || v[0].Value != n+1000 {
			t.Fatalf("%s: board %v (%v), want m=%d", c.name, v, err, n+1000)
		}
	}
}

// applyAll applies ids in batches of 2,000 and returns how many were
// applied.
func applyAll(t *testing.T, s *store.Store, ids []string) int {
	t.Helper()
	total := 0
	for i := 0; i < len(ids); i += 2000 {
		res, err := s.Apply(t.Context(), ddEvents(ids[i:min(i+2000, len(ids))]...))
		if err != nil {
			t.Fatal(err)
		}
		total += applied(res)
	}
	return total
}

// bucketLayers returns the layers of the one dedupe bucket under prefix,
// which must hold n IDs.
func bucketLayers(t *testing.T, rdb redis.UniversalClient, prefix string, n int) int {
	t.Helper()
	meta, err := rdb.HGetAll(t.Context(), prefix+":d:m").Result()
	if err != nil {
		t.Fatal(err)
	}
	layers, buckets := 0, 0
	for f, v := range meta {
		if f != "sw" && f != "inc" {
			buckets++
			parts := strings.Split(v, ":")
			if len(parts) != 5 || parts[4] != fmt.Sprint(n) {
				t.Fatalf("bucket %s: %q, want inc:s0:layers:n:%d", f, v, n)
			}
			fmt.Sscan(parts[2], &layers)
		}
	}
	if buckets != 1 {
		t.Fatalf("%d dedupe buckets (meta %v), want 1", buckets, meta)
	}
	return layers
}
