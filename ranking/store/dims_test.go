package store_test

import (
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestPruneDims: the dims registry loses the tags whose stream expired
// (no meta key, no event counts), keeps the live ones and those of total boards, and a
// process that writes a pruned tag again registers it again.
func TestPruneDims(t *testing.T) {
	unit, _ := ranking.ParseUnit("1h")
	h := &ranking.Board{Name: "h", Window: ranking.WindowPeriodic, Every: unit, Grace: time.Minute, Dims: []string{"room"}}
	tot := &ranking.Board{Name: "t", Window: ranking.WindowTotal, Dims: []string{"room"}}
	rdb := testenv.Redis(t).Client(t)
	prefix := testenv.Prefix(t)
	s, err := store.New(rdb, []*ranking.Board{h, tot}, store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var ups []ranking.Update
	for i, room := range []string{"r1", "r2", "r3"} {
		for _, b := range []string{"h", "t"} {
			ups = append(ups, ranking.Update{Board: b, Dims: []string{room}, Member: "m", Value: 1, Time: day(21, 10), MsgID: string(rune('a' + i))})
		}
	}
	if _, err := s.Apply(ctx, store.Group(ups)); err != nil {
		t.Fatal(err)
	}
	members := func(board string) int64 { return rdb.SCard(ctx, prefix+":dims:"+board).Val() }
	if members("h") != 3 || members("t") != 3 {
		t.Fatalf("registry sizes %d, %d; want 3, 3", members("h"), members("t"))
	}
	// a periodic board's stream keeps no meta: its event counts tell that
	// it lives
	if n := rdb.Exists(ctx, store.Key(prefix, store.Tag("h", []string{"r1"}), store.KindMeta, "")).Val(); n != 0 {
		t.Fatalf("a periodic board's stream has a meta key")
	}
	// r1 and r2 of board h expired (their event counts are gone). r3's
	// counts are gone too, but it has a meta key (as an older version
	// wrote for every stream): it still lives.
	count := func(room string) string {
		return store.Key(prefix, store.Tag("h", []string{room}), store.KindCount, "")
	}
	rdb.Del(ctx, count("r1"), count("r2"), count("r3"))
	rdb.HSet(ctx, store.Key(prefix, store.Tag("h", []string{"r3"}), store.KindMeta, ""), "st", 1)
	for _, b := range []string{"h", "t"} {
		n, err := s.PruneDims(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"h": 2, "t": 0}[b]; n != want {
			t.Fatalf("PruneDims(%s) = %d, want %d", b, n, want)
		}
	}
	if members("h") != 1 || members("t") != 3 {
		t.Fatalf("after pruning: %d, %d; want 1, 3", members("h"), members("t"))
	}
	// A new process (or this one after the re-registration interval)
	// writing r1 again registers it again.
	s2, err := store.New(rdb, []*ranking.Board{h, tot}, store.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Apply(ctx, store.Group([]ranking.Update{{Board: "h", Dims: []string{"r1"}, Member: "m", Value: 1, Time: day(21, 11), MsgID: "z"}})); err != nil {
		t.Fatal(err)
	}
	if members("h") != 2 {
		t.Fatalf("after a new write of r1: %d tags, want 2", members("h"))
	}
}
