package consumer

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestDeciderMemory holds the Decider to the memory its docs and rankd
// replay --decide-max state: 32 bytes per message ID for 2^20 IDs (a
// table of 2^21 16-byte slots), and Held hands them over (12 bytes each)
// without keeping the table.
func TestDeciderMemory(t *testing.T) {
	const n = 1 << 20
	keys := make([]store.IDKey, n)
	for i := range keys {
		keys[i] = store.KeyOf("id-" + strconv.Itoa(i))
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	h0 := heap()
	d := NewDecider(nil, n)
	b := &claimBatch{done: make(chan struct{})}
	for _, k := range keys {
		if _, fresh := d.claim(k, d.part(partitionKey{"t", 0}), time.Time{}, b); !fresh {
			t.Fatal("a fresh key was claimed before")
		}
	}
	h1 := heap()
	held, err := d.Held(time.Now())
	if err != nil || len(held) != 1 || len(held[0].IDs) != n || held[0].Bucket != 0 {
		t.Fatalf("Held = %d buckets, %v; want %d IDs in bucket 0", len(held), err, n)
	}
	h2 := heap()
	perID, after := float64(h1-h0)/n, float64(h2-h0)/n
	t.Logf("%.1f bytes per ID while deciding, %.1f once handed over", perID, after)
	if perID > 33 || after > 13 {
		t.Errorf("%.1f bytes per ID while deciding, %.1f once handed over; want 32 and 12 (at most 33 and 13)", perID, after)
	}
	runtime.KeepAlive(held)
	runtime.KeepAlive(d)
	runtime.KeepAlive(keys) // (not counted: allocated before h0)
}

// TestDeciderBuckets: Held groups the IDs by the dedupe bucket live
// consumption would hold them in, running as far behind as it is: the
// bucket of the first delivery's Kafka time plus its partition's lag (now
// minus the latest Kafka time of the partition), the time rounded up to a
// sixteenth of a bucket. A message without a time (or before 1970) is in
// bucket 0, unknown.
func TestDeciderBuckets(t *testing.T) {
	d := NewDecider(nil, 8)
	d.BucketBy(time.Hour)
	b1, b2 := &claimBatch{done: make(chan struct{})}, &claimBatch{done: make(chan struct{})}
	at := func(h, s int) time.Time { return time.Unix(int64(h)*3600+int64(s), 0) }
	p := func(i int) partitionKey { return partitionKey{"t", i} }
	for _, c := range []struct {
		id    string
		p     partitionKey
		t     time.Time
		batch *claimBatch
		fresh bool
	}{
		// p0 and p1 are an hour behind (their latest: 11:00:05), p2 four
		// hours (an idle partition: its last message was at 8)
		{"a", p(0), at(10, 5), b1, true},
		{"b", p(0), at(11, 5), b1, true},
		{"c", p(1), at(10, 5), b2, true},
		{"a", p(1), at(11, 5), b2, false}, // a duplicate still moves p1's latest time
		{"d", p(1), time.Time{}, b2, true},
		{"e", p(0), time.Unix(-5, 0), b1, true},
		{"f", p(0), at(10, 3375), b2, true}, // 10:56:15, a step's start: 11:59:59.999 once an hour later
		{"g", p(2), at(8, 5), b2, true},
		{"h", p(2), at(6, 5), b1, true},
		{"i", p(0), at(9, 3600-224), b1, true}, // 9:56:16, in the step that ends 9:59:59.999: bucket 10
		{"j", p(0), at(9, 3600-226), b1, true}, // 9:56:14, in the one before: 10:56:14.999
	} {
		first, fresh := d.claim(store.KeyOf(c.id), d.part(c.p), c.t, c.batch)
		if fresh != c.fresh || (fresh && first != c.batch) || (!fresh && first != b1) {
			t.Fatalf("claim %s: fresh %v, want %v", c.id, fresh, c.fresh)
		}
	}
	// the statuses of b and h (not all applied) go with their buckets
	d.resolve(b1, []store.IDKey{store.KeyOf("b"), store.KeyOf("h"), store.KeyOf("a")},
		[][]ranking.Status{{ranking.StatusLate, ranking.StatusApplied}, {ranking.StatusOutOfRange}, nil})
	held, err := d.Held(at(12, 5))
	if err != nil {
		t.Fatal(err)
	}
	name := map[store.IDKey]string{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		name[store.KeyOf(id)] = id
	}
	var got []string
	for _, h := range held {
		var ids []string
		for _, id := range h.IDs {
			ids = append(ids, name[id])
		}
		slices.Sort(ids)
		var vs []string
		for id, st := range h.Verdicts {
			vs = append(vs, fmt.Sprint(name[id], st))
		}
		slices.Sort(vs)
		got = append(got, fmt.Sprint(h.Bucket, ids, vs))
	}
	slices.Sort(got)
	if want := "[0 [d e] [] 10 [h i j] [h[out_of_range]] 11 [a c f] [] 12 [b g] [b[late applied]]]"; fmt.Sprint(got) != want {
		t.Fatalf("Held = %v, want %s", got, want)
	}
}

// BenchmarkDeciderClaim claims 1M distinct IDs, then an eighth of them
// again (duplicates), in a Decider made for 1M: ns per claim.
func BenchmarkDeciderClaim(b *testing.B) {
	const n = 1 << 20
	keys := make([]store.IDKey, n)
	for i := range keys {
		keys[i] = store.KeyOf("id-" + strconv.Itoa(i))
	}
	b.ResetTimer()
	for range b.N {
		d := NewDecider(nil, n)
		batch := &claimBatch{done: make(chan struct{})}
		part := d.part(partitionKey{"t", 0})
		for _, k := range keys {
			d.claim(k, part, time.Time{}, batch)
		}
		for _, k := range keys[:n/8] {
			if _, fresh := d.claim(k, part, time.Time{}, batch); fresh {
				b.Fatal("a claimed key is fresh")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n+n/8), "ns/claim")
}

// TestDeciderGrows: a Decider told to expect fewer IDs than it gets grows
// its table, and still finds every ID claimed and hands each over once.
func TestDeciderGrows(t *testing.T) {
	const n = 5000
	d := NewDecider(nil, 10)
	b := &claimBatch{done: make(chan struct{})}
	part := d.part(partitionKey{"t", 0})
	for i := range n {
		if _, fresh := d.claim(store.KeyOf(strconv.Itoa(i)), part, time.Time{}, b); !fresh {
			t.Fatalf("ID %d: claimed before", i)
		}
	}
	if got := len(d.claims.slots); got != 8192 {
		t.Errorf("%d slots for %d IDs; want 8192 (at most three quarters full)", got, n)
	}
	for i := range n {
		if first, fresh := d.claim(store.KeyOf(strconv.Itoa(i)), part, time.Time{}, b); fresh || first != b {
			t.Fatalf("ID %d again: fresh %v; want the batch that claimed it", i, fresh)
		}
	}
	held, err := d.Held(time.Now())
	if err != nil || len(held) != 1 {
		t.Fatalf("Held = %d buckets, %v; want 1", len(held), err)
	}
	seen := map[store.IDKey]bool{}
	for _, h := range held[0].IDs {
		seen[h] = true
	}
	if len(held[0].IDs) != n || len(seen) != n {
		t.Fatalf("Held gave %d IDs, %d distinct; want %d", len(held[0].IDs), len(seen), n)
	}
}
