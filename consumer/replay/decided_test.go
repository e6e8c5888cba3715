package replay

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// hookObserver runs planned when the rebuild planned (before its
// generation takes writes) and replanned when it planned the rest (the
// build began: live consumption writes it too).
type hookObserver struct {
	noObserver
	planned, replanned func()
	replans            int
}

func (o *hookObserver) Planned([]Range) {
	if o.planned != nil {
		o.planned()
	}
}

func (o *hookObserver) Replanned([]Range) {
	o.replans++
	if o.replanned != nil {
		o.replanned()
	}
}

// redelivered returns copies of every step-th message of msgs, with the
// key of another message (so another partition, mostly): the same ID and
// payload delivered again.
func redelivered(msgs []world.Msg, step int) []world.Msg {
	var out []world.Msg
	for i := 0; i+step < len(msgs); i += step {
		m := msgs[i]
		m.Key = msgs[i+step/2].Key
		out = append(out, m)
	}
	return out
}

// TestRebuildDecided: live consumption applies and commits the first part
// of the log, and keeps consuming while the rebuild runs. The rebuild
// decides duplicates in memory below the committed offsets (redeliveries
// there in other partitions included), then begins the build; meanwhile
// and afterwards live consumption receives redeliveries of those messages
// (applied to the old generation only, before the build; to both after
// it) and new messages. The new generation equals the oracle of the whole
// log: every redelivery is a duplicate in it too.
func TestRebuildDecided(t *testing.T) {
	f := world.New(t, testenv.Redis(t), 3)
	ctx := t.Context()
	msgs := world.Workload(31, 1500, "dc")
	head, tail := msgs[:900], msgs[900:]
	head = append(head, redelivered(head, 29)...) // across partitions, inside the decided range
	r := runConsumer(t, f, prometheus.NewRegistry())
	w := f.NewWriter()
	f.Produce(w, head)
	f.WaitCommitted(time.Minute, r.stopped)

	obs := &hookObserver{
		planned: func() { // after the cut: above it, consumed live into the old generation only
			f.Produce(w, redelivered(head, 13))
			f.WaitCommitted(time.Minute, r.stopped)
		},
		replanned: func() { // after the build began: consumed live into both generations
			f.Produce(w, redelivered(head, 7))
			f.Produce(w, tail)
			f.WaitCommitted(time.Minute, r.stopped)
		},
	}
	rb := testRebuild(f, 61, 3, testLogger(t))
	rb.Observer = obs
	res, err := rb.Run(ctx, f.Store)
	if err != nil {
		t.Fatal(err)
	}
	if obs.replans != 1 || res.Decided != int64(len(head)) {
		t.Fatalf("replanned %d times, %d messages decided in memory; want once, the %d below the committed offsets", obs.replans, res.Decided, len(head))
	}
	if _, err := f.Store.Generations(ctx); err != nil { // refresh the active generations
		t.Fatal(err)
	}
	want := f.FromLog()
	f.Compare(want.Oracle)
	// Live consumption goes on into the new generation.
	more := world.Workload(32, 200, "dd")
	f.Produce(w, append(more, redelivered(msgs, 11)...))
	f.WaitCommitted(time.Minute, r.stopped)
	f.Compare(f.FromLog().Oracle)
}

// TestRebuildDecidedExpiredIDs: a replay holds the IDs it decided in
// memory only as long as live consumption would have: the messages
// produced three dedupe TTLs ago (Kafka time) are applied, but their IDs
// are not held in the new generation, while every ID of the recent
// messages after them, in the same partitions, is.
func TestRebuildDecidedExpiredIDs(t *testing.T) {
	f := world.New(t, testenv.Redis(t), 3)
	ctx := t.Context()
	msgs := append(world.Workload(33, 300, "old"), world.Workload(34, 300, "new")...) // no ID in both
	// the old messages' events happened three TTLs before the others (an
	// event after its Kafka time would be dead-lettered as future)
	back := 3 * f.Store.DedupeTTL()
	old := time.Now().Add(-back)
	tsField := regexp.MustCompile(`"ts":(\d+)`)
	for i := range msgs[:300] {
		msgs[i].Time = old.Add(time.Duration(i) * time.Millisecond)
		msgs[i].Value = tsField.ReplaceAllFunc(msgs[i].Value, func(b []byte) []byte {
			ms, _ := strconv.ParseInt(string(tsField.FindSubmatch(b)[1]), 10, 64)
			return fmt.Appendf(nil, `"ts":%d`, ms-back.Milliseconds())
		})
	}
	r := runConsumer(t, f, prometheus.NewRegistry())
	w := f.NewWriter()
	f.Produce(w, msgs)
	f.WaitCommitted(time.Minute, r.stopped)
	var logs syncBuilder
	rb := testRebuild(f, 61, 3, textLogger(&logs))
	res, err := rb.Run(ctx, f.Store)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decided != int64(len(msgs)) {
		t.Fatalf("%d messages decided in memory, want %d", res.Decided, len(msgs))
	}
	if _, err := f.Store.Generations(ctx); err != nil {
		t.Fatal(err)
	}
	f.Compare(f.FromLog().Oracle)

	held := map[int64]bool{}
	var sets []string
	iter := f.RDB.Scan(ctx, 0, f.Prefix+":g"+strconv.Itoa(res.Generation)+":d:*.*.*:*", 1000).Iterator()
	for iter.Next(ctx) {
		sets = append(sets, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range sets {
		for _, m := range f.RDB.SMembers(ctx, k).Val() {
			fp, err := strconv.ParseInt(m, 10, 64)
			if err != nil {
				t.Fatalf("set %s holds %q", k, m)
			}
			held[fp] = true
		}
	}
	fpOf := func(m world.Msg) int64 {
		var ev struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		k := store.KeyOf(ev.ID)
		return int64(binary.BigEndian.Uint64(k[:8]))
	}
	oldHeld, oldIDs, recent := 0, map[int64]bool{}, map[int64]bool{}
	for i, m := range msgs {
		if i < 300 && held[fpOf(m)] {
			oldHeld++
		}
		if bytes.Contains(m.Value, []byte(`"news_id":""`)) {
			continue // a comment on no news routes nowhere: neither held nor expired
		}
		if i < 300 {
			oldIDs[fpOf(m)] = true
		} else {
			recent[fpOf(m)] = true
		}
	}
	if oldHeld > 0 || len(held) != len(recent) {
		t.Fatalf("the new generation holds %d IDs, %d of old messages; want the %d of the recent messages and none old",
			len(held), oldHeld, len(recent))
	}
	for fp := range recent {
		if !held[fp] {
			t.Fatalf("the ID with fingerprint %d of a recent message is not held", fp)
		}
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("ids_held=%d ids_expired=%d ", len(recent), len(oldIDs))) {
		t.Fatalf("the replay's log does not say %d IDs held and %d expired:\n%s", len(recent), len(oldIDs), logs.String())
	}
}

// failingStore fails the first Apply of decided events after it applied
// them, as a reply lost to a timeout would.
type failingStore struct {
	consumer.Store
	mu     sync.Mutex
	failed bool
}

func (s *failingStore) Apply(ctx context.Context, evs []store.Event, marks ...store.Mark) (res ranking.Result, err error) {
	res, err = s.Store.Apply(ctx, evs, marks...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !s.failed && len(evs) > 0 && evs[0].Decided {
		s.failed = true
		return res, errors.New("i/o timeout (injected, after the apply)")
	}
	return res, err
}

// TestRebuildDecidedStartsOver: an Apply error while deciding (here after
// the writes: a lost reply) cannot be retried, since the batch would count
// twice; the rebuild starts over with the dedupe in Redis in another
// generation, and still equals the oracle; the generation begun is deleted.
func TestRebuildDecidedStartsOver(t *testing.T) {
	f := world.New(t, testenv.Redis(t), 3)
	ctx := t.Context()
	msgs := world.Workload(33, 700, "so")
	f.Produce(f.NewWriter(), msgs)
	var logs syncBuilder
	var fs *failingStore
	rb := testRebuild(f, 50, 2, textLogger(&logs))
	rb.sinkStore = func(st *store.Store) consumer.Store {
		if fs == nil {
			fs = &failingStore{Store: st}
			return fs
		}
		return st
	}
	res, err := rb.Run(ctx, f.Store)
	if err != nil {
		t.Fatal(err)
	}
	if fs == nil || !fs.failed || res.Decided != 0 || res.Generation != 2 {
		t.Fatalf("injected %v, %d decided, generation %d; want the failure, none decided, generation 2 (1 begun and given up)", fs != nil && fs.failed, res.Decided, res.Generation)
	}
	if got := logs.String(); !strings.Contains(got, "replaying with the dedupe in redis from the start") {
		t.Errorf("no warning of the start over in the logs:\n%s", got)
	}
	if _, err := f.Store.Generations(ctx); err != nil {
		t.Fatal(err)
	}
	f.Compare(f.FromLog().Oracle)
	if keys := f.RDB.Keys(ctx, f.Prefix+":g1:*").Val(); len(keys) != 0 {
		t.Errorf("%d keys of the generation given up left, e.g. %s", len(keys), keys[0])
	}
	if p, err := f.Store.PendingDrops(ctx); err != nil || len(p) != 0 {
		t.Errorf("pending drops %v, %v; want none", p, err)
	}
}

// testRebuild returns a Rebuild of every board of f, in batches of batch
// messages, parallel partitions at once, deleting old generations after
// 10 ms.
func testRebuild(f *world.World, batch, parallel int, log *slog.Logger) *Rebuild {
	return &Rebuild{Replay: Config{Brokers: f.Broker.Addrs(), Topics: f.Topics, BatchCount: batch, Parallel: parallel},
		Schemas: f.Cfg.Schemas(), Router: f.Router, Boards: boardNames(f), Group: f.Group, DropAfter: 10 * time.Millisecond,
		Logger: log, SinkOptions: []consumer.Option{consumer.WithTopicMap(f.TopicMap)}}
}

// boardNames returns the names of f's boards.
func boardNames(f *world.World) []string {
	var out []string
	for _, b := range f.Cfg.Boards() {
		out = append(out, b.Name)
	}
	return out
}

// textLogger logs at info level and above to b.
func textLogger(b *syncBuilder) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// syncBuilder is a strings.Builder for concurrent loggers and readers.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// outageStore stops Redis (SIGTERM, its data on disk) before the first
// Apply of decided events, and starts it again once up() says so: an
// outage while the replay decides, as long as the test wants.
type outageStore struct {
	consumer.Store
	rsrv *testenv.RedisServer
	up   func() bool
	once sync.Once
	t    *testing.T
}

func (s *outageStore) Apply(ctx context.Context, evs []store.Event, marks ...store.Mark) (ranking.Result, error) {
	if len(evs) > 0 && evs[0].Decided {
		s.once.Do(func() {
			if err := s.rsrv.Stop(); err != nil {
				s.t.Error(err)
			}
			go func() {
				for deadline := time.Now().Add(time.Minute); !s.up() && time.Now().Before(deadline); {
					time.Sleep(50 * time.Millisecond)
				}
				if err := s.rsrv.Start(); err != nil {
					s.t.Error(err)
				}
			}()
		})
	}
	return s.Store.Apply(ctx, evs, marks...)
}

// TestRebuildDecidedOutage: Redis goes down while the replay decides, and
// stays down until the replay has given the decided part up. The replay
// does not fail: it waits for Redis to begin the build again, replays the
// classic way, and equals the oracle.
func TestRebuildDecidedOutage(t *testing.T) {
	rsrv := testenv.NewRedis(t, testenv.RedisOptions{Persist: true})
	f := world.New(t, rsrv, 3)
	ctx := t.Context()
	f.Produce(f.NewWriter(), world.Workload(34, 700, "ou"))
	var logs syncBuilder
	rb := testRebuild(f, 50, 2, textLogger(&logs))
	var os *outageStore
	rb.sinkStore = func(st *store.Store) consumer.Store {
		if os == nil {
			os = &outageStore{Store: st, rsrv: rsrv, t: t, up: func() bool {
				return strings.Contains(logs.String(), "beginning the build failed: redis is unavailable; retrying")
			}}
			return os
		}
		return st
	}
	res, err := rb.Run(ctx, f.Store)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	got := logs.String()
	if res.Decided != 0 || !strings.Contains(got, "replaying with the dedupe in redis from the start") ||
		!strings.Contains(got, "beginning the build failed: redis is unavailable; retrying") {
		t.Fatalf("%d decided; want 0, a start over and a wait for Redis in the logs:\n%s", res.Decided, got)
	}
	if _, err := f.Store.Generations(ctx); err != nil {
		t.Fatal(err)
	}
	f.Compare(f.FromLog().Oracle)
}
