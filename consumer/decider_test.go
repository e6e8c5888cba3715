package consumer

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/rankd/rankd/ranking/store"
)

// TestDeciderMemory holds the Decider to the memory its docs and rankd
// replay --decide-max state: about 40 bytes per message ID (at most 48),
// and Held hands them over without keeping the map.
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
		if _, fresh := d.claim(k, b); !fresh {
			t.Fatal("a fresh key was claimed before")
		}
	}
	h1 := heap()
	held, err := d.Held()
	if err != nil || len(held) != n {
		t.Fatalf("Held = %d IDs, %v; want %d", len(held), err, n)
	}
	h2 := heap()
	perID, after := float64(h1-h0)/n, float64(h2-h0)/n
	t.Logf("%.1f bytes per ID while deciding, %.1f once handed over", perID, after)
	if perID > 48 || after > 48 {
		t.Errorf("%.1f bytes per ID while deciding, %.1f once handed over; want about 40 (at most 48)", perID, after)
	}
	runtime.KeepAlive(held)
	runtime.KeepAlive(d)
}
