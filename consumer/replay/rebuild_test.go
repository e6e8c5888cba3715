package replay

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
	"github.com/rankd/rankd/ranking/store"
)

// recObserver records what a Rebuild tells its observer.
type recObserver struct {
	mu       sync.Mutex
	planned  map[string]int64 // messages per topic
	progress map[string]int64 // the last count per topic
	replayed []error
	sizes    []BoardSize
}

func (o *recObserver) Planned(ranges []Range) {
	o.planned, o.progress = map[string]int64{}, map[string]int64{}
	for _, r := range ranges {
		o.planned[r.Topic] += r.Total()
	}
}

func (o *recObserver) Progress(topic string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n < o.progress[topic] {
		panic(fmt.Sprintf("progress of %s went back from %d to %d", topic, o.progress[topic], n))
	}
	o.progress[topic] = n
}

func (o *recObserver) Replayed(err error)         { o.replayed = append(o.replayed, err) }
func (o *recObserver) Verified(sizes []BoardSize) { o.sizes = sizes }

// TestRebuild runs the rebuild of `rankd replay` on a log nothing consumed
// live: a dry run, a rebuild, one refused while another holds the lock,
// and a second rebuild that waits for the lock and deletes the first
// one's generation. Every rebuilt generation equals the oracle.
func TestRebuild(t *testing.T) {
	f := world.New(t, testenv.Redis(t), 3)
	ctx := t.Context()
	msgs := world.Workload(21, 600, "rbd")
	f.Produce(f.NewWriter(), msgs)
	want := f.FromLog()
	dups := len(msgs)
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[string(m.Value)] = true
	}
	dups -= len(seen)
	boards := boardNames(f)
	rebuild := func(obs *recObserver) *Rebuild {
		return &Rebuild{
			Replay:  Config{Brokers: f.Broker.Addrs(), Topics: f.Topics, BatchCount: 50, Parallel: 2},
			Schemas: f.Cfg.Schemas(), Router: f.Router, Boards: boards, Group: f.Group,
			LockTTL: 2 * time.Second, DropAfter: 10 * time.Millisecond,
			Registry: prometheus.NewRegistry(), Logger: testLogger(t), SinkOptions: []consumer.Option{consumer.WithTopicMap(f.TopicMap)},
			Observer: obs,
		}
	}
	checkObserved := func(what string, obs *recObserver) {
		t.Helper()
		var total int64
		for _, n := range obs.planned {
			total += n
		}
		if total != int64(len(msgs)) || !maps.Equal(obs.progress, obs.planned) {
			t.Errorf("%s: planned %v (%d messages), progress %v; want %d messages, all done", what, obs.planned, total, obs.progress, len(msgs))
		}
		if len(obs.replayed) != 1 || obs.replayed[0] != nil {
			t.Errorf("%s: Replayed(%v), want once with nil", what, obs.replayed)
		}
	}
	checkResult := func(what string, res Result) {
		t.Helper()
		if res.Stats.Messages != int64(len(msgs)) || res.Stats.Observed != 0 || len(res.Stats.DeadLetters) != 0 {
			t.Errorf("%s: stats %+v, want %d messages, none observed, no dead letters", what, res.Stats, len(msgs))
		}
		if res.Applied != int64(want.Applied) || res.Duplicates != int64(dups) {
			t.Errorf("%s: %d updates applied, %d duplicates; want %d (the oracle's) and %d", what, res.Applied, res.Duplicates, want.Applied, dups)
		}
	}

	// A dry run writes nothing.
	obs := &recObserver{}
	res, err := rebuild(obs).DryRun(ctx, f.Cfg.Boards())
	if err != nil {
		t.Fatal(err)
	}
	checkResult("dry run", res)
	checkObserved("dry run", obs)
	if res.Generation != 0 || obs.sizes != nil {
		t.Errorf("dry run: generation %d, verified %v; want neither", res.Generation, obs.sizes)
	}
	if keys := f.RDB.Keys(ctx, f.Prefix+":*").Val(); len(keys) != 0 {
		t.Fatalf("a dry run wrote %d keys, e.g. %s", len(keys), keys[0])
	}

	// The first rebuild.
	obs = &recObserver{}
	res, err = rebuild(obs).Run(ctx, f.Store)
	if err != nil {
		t.Fatal(err)
	}
	checkResult("rebuild", res)
	checkObserved("rebuild", obs)
	g1 := res.Generation
	if g1 < 1 || res.Deleted != 0 {
		t.Errorf("rebuild: generation %d, %d keys deleted; want a new generation, nothing to delete", g1, res.Deleted)
	}
	sizes := checkSizes(t, f, obs.sizes, boards, 0, g1, nil)
	if _, err := f.Store.Generations(ctx); err != nil { // refresh the active generations
		t.Fatal(err)
	}
	f.Compare(want.Oracle)

	// Refused while another replay holds the lock: nothing changes.
	if err := f.Store.LockReplay(ctx, "other", 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	before, _ := f.Store.Generations(ctx)
	obs = &recObserver{}
	if _, err := rebuild(obs).Run(ctx, f.Store); !errors.Is(err, store.ErrReplayLock) {
		t.Fatalf("rebuild while another holds the lock: %v, want ErrReplayLock", err)
	}
	if after, _ := f.Store.Generations(ctx); !maps.Equal(after, before) || obs.planned != nil {
		t.Fatalf("a refused rebuild changed the generations (%v -> %v) or replayed (%v)", before, after, obs.planned)
	}

	boardKeys := func() (keys []string) {
		for _, k := range f.RDB.Keys(ctx, f.Prefix+":g"+strconv.Itoa(g1)+":*").Val() {
			if strings.Contains(k, ":{") || strings.Contains(k, ":dims:") {
				keys = append(keys, k)
			}
		}
		return keys
	}
	if len(boardKeys()) == 0 {
		t.Fatalf("no board keys of generation %d found", g1)
	}
	idKeys := func() []string { return f.RDB.Keys(ctx, f.Prefix+":g"+strconv.Itoa(g1)+":d:*").Val() }
	if len(idKeys()) == 0 {
		t.Fatalf("no message IDs of generation %d found", g1)
	}

	// The second waits for that lock to expire, replaces the first and
	// deletes its keys.
	obs = &recObserver{}
	rb := rebuild(obs)
	rb.LockWait = 10 * time.Second
	res, err = rb.Run(ctx, f.Store)
	if err != nil {
		t.Fatal(err)
	}
	checkResult("second rebuild", res)
	checkObserved("second rebuild", obs)
	if res.Generation <= g1 || res.Deleted == 0 {
		t.Errorf("second rebuild: generation %d, %d keys deleted; want above %d and the first one's keys", res.Generation, res.Deleted, g1)
	}
	checkSizes(t, f, obs.sizes, boards, g1, res.Generation, sizes)
	// Its board keys, dims registries and message IDs are gone.
	if left := boardKeys(); len(left) != 0 {
		t.Errorf("%d board keys of generation %d left, e.g. %s", len(left), g1, left[0])
	}
	if left := idKeys(); len(left) != 0 {
		t.Errorf("%d message ID keys of generation %d left, e.g. %s", len(left), g1, left[0])
	}
	if _, err := f.Store.Generations(ctx); err != nil {
		t.Fatal(err)
	}
	f.Compare(want.Oracle)
}

// checkSizes checks the verification of a rebuild from generation oldGen
// to newGen: one size per board, in order, the new ones as the store
// counts them, the old ones those of the previous rebuild (oldSizes; nil:
// none). It returns the new sizes by board.
func checkSizes(t *testing.T, f *world.World, sizes []BoardSize, boards []string, oldGen, newGen int, oldSizes map[string]int64) map[string]int64 {
	t.Helper()
	if len(sizes) != len(boards) {
		t.Fatalf("verified %d boards, want %d", len(sizes), len(boards))
	}
	out := map[string]int64{}
	var total int64
	for i, s := range sizes {
		n, err := f.Store.Generation(newGen).DimsCount(t.Context(), s.Board)
		if err != nil {
			t.Fatal(err)
		}
		if s.Board != boards[i] || s.OldGen != oldGen || s.NewGen != newGen || s.Old != oldSizes[s.Board] || s.New != n {
			t.Errorf("verified %+v, want board %s g%d %d -> g%d %d", s, boards[i], oldGen, oldSizes[s.Board], newGen, n)
		}
		out[s.Board] = s.New
		total += s.New
	}
	if total == 0 {
		t.Error("no board has dims in the new generation")
	}
	return out
}
