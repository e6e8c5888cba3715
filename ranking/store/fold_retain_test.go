package store

import (
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/workload"
	"github.com/rankd/rankd/ranking"
)

// TestFolderKeepsNoMessage folds the updates of decoded messages, whose
// members and dims are parts of each message's decoded value, and checks
// that the folder keeps copies: a member held by the folder must not keep
// its whole message alive until the replay ends (in a 1M replay that was
// about 30 MB more to hold, each MB of it a page fault on some VMs).
func TestFolderKeepsNoMessage(t *testing.T) {
	cfg, router := LoadExample(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never called: Fold touches no server
	defer rdb.Close()
	s, err := New(rdb, cfg.Boards())
	if err != nil {
		t.Fatal(err)
	}
	f := s.NewFolder()
	g, err := workload.New(workload.Config{Seed: 1, Start: time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC), Step: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// the address ranges of the messages' decoded values: a string the
	// folder keeps must lie in none of them
	type span struct{ lo, hi uintptr }
	var values []span
	within := func(x string) bool {
		if len(x) == 0 {
			return false
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(x)))
		for _, v := range values {
			if p >= v.lo && p < v.hi {
				return true
			}
		}
		return false
	}
	parts := 0 // updates whose member is part of its message: what the test proves anything with
	for i := range 500 {
		ev := g.Next()
		e, err := cfg.Schemas()[ev.Topic].Decode(ev.Topic, 0, int64(i), ev.Value, nil, ev.Time)
		if err != nil {
			t.Fatal(err)
		}
		ups, err := router.AppendRoute(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		var fold []ranking.Update
		for _, u := range ups {
			if f.Foldable(u.Board) {
				u.StreamTime = u.Time
				fold = append(fold, u)
			}
		}
		if len(fold) == 0 {
			continue
		}
		// the decoded value the updates' strings point into (the
		// decoder copies a message's value once): the ID lies inside it,
		// so all of it lies within len(value) of the ID's bytes
		id := unsafe.Pointer(unsafe.StringData(e.ID))
		values = append(values, span{uintptr(id) - uintptr(len(ev.Value)), uintptr(id) + uintptr(len(ev.Value))})
		for _, u := range fold {
			if within(u.Member) {
				parts++
			}
		}
		if err := f.Fold(fold, make([]ranking.Status, len(fold))); err != nil {
			t.Fatal(err)
		}
	}
	if parts == 0 {
		t.Fatal("no member was part of its message's decoded value: the test proves nothing")
	}
	members := 0
	for _, fs := range f.streams {
		for _, d := range fs.dims {
			if within(d) {
				t.Errorf("stream %s keeps dims value %q, part of a message", fs.tag, d)
			}
		}
		for _, fp := range fs.periods {
			for m := range fp.members {
				members++
				if within(m) {
					t.Errorf("stream %s keeps member %q, part of a message", fs.tag, m)
				}
			}
		}
	}
	t.Logf("%d members folded; %d updates had a member inside its message", members, parts)
}
