package consumer

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
	"github.com/rankd/rankd/ranking/store"
	"github.com/segmentio/kafka-go"
)

// heldNotices is the fixture's store with every PUBLISH of change notices
// held until release is closed (as a Redis that stops answering would
// hold it); it records the boards of each.
type heldNotices struct {
	*store.Store
	entered chan struct{} // a PUBLISH is being held
	release chan struct{}
	mu      sync.Mutex
	boards  [][]string
}

func (h *heldNotices) PublishChanges(ctx context.Context, boards []string) error {
	h.entered <- struct{}{}
	<-h.release
	h.mu.Lock()
	h.boards = append(h.boards, slices.Sorted(slices.Values(boards)))
	h.mu.Unlock()
	return h.Store.PublishChanges(ctx, boards)
}

// TestNoticesOffApplyPath checks that a change notice never holds up a
// batch: with the PUBLISH of the first batch's notice held, Apply of that
// batch and of two more returns, and once the PUBLISH is let go, the
// second and third batches' boards go out together in one more notice.
func TestNoticesOffApplyPath(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 1)
	held := &heldNotices{Store: f.Store, entered: make(chan struct{}, 10), release: make(chan struct{})}
	sink, err := NewRankingSink(f.Cfg.Schemas(), f.Router, held, WithTopicMap(f.TopicMap), WithRegisterer(f.reg))
	if err != nil {
		t.Fatal(err)
	}
	// the first like, gift and comment of a workload: one batch each
	batches := map[string][]kafka.Message{}
	for _, m := range world.Workload(1, 200, "notices") {
		if batches[m.Topic] == nil {
			batches[m.Topic] = []kafka.Message{{Topic: f.KafkaOf[m.Topic], Key: []byte(m.Key), Value: m.Value, Headers: m.Headers, Time: time.Now()}}
		}
	}
	m := f.metrics()
	// updated returns the boards whose applied updates grew since was
	// (nil: since the start) and the counts now.
	updated := func(was map[string]float64) ([]string, map[string]float64) {
		now := map[string]float64{}
		var grew []string
		for _, b := range f.Cfg.Boards() {
			now[b.Name] = testutil.ToFloat64(m.sinkUpdates.WithLabelValues(b.Name))
			if now[b.Name] > was[b.Name] {
				grew = append(grew, b.Name)
			}
		}
		return slices.Sorted(slices.Values(grew)), now
	}
	apply := func(topic string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := sink.Apply(t.Context(), batches[topic])
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("applying the %s batch: %v", topic, err)
			}
		case <-time.After(10 * time.Second):
			close(held.release)
			t.Fatalf("Apply of the %s batch waited 10 s for its change notice", topic)
		}
	}
	apply("like")
	first, counts := updated(nil)
	select { // the publisher has taken the first notice: later boards wait
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first batch's notice not published within 10 s")
	}
	apply("gift")
	apply("comment")
	rest, _ := updated(counts)
	if len(first) == 0 || len(rest) == 0 {
		t.Fatalf("boards updated: %q by the first batch, %q by the others; want some by each", first, rest)
	}
	close(held.release)
	waitNoticesPublished(t, sink)
	held.mu.Lock()
	defer held.mu.Unlock()
	if want := [][]string{first, rest}; !slices.EqualFunc(held.boards, want, slices.Equal[[]string]) {
		t.Errorf("notices published %q, want %q (the first batch's, then the two held back together)", held.boards, want)
	}
	if n := testutil.ToFloat64(m.noticeErrors); n != 0 {
		t.Errorf("rankd_sink_change_notice_errors_total = %v, want 0", n)
	}
}

// waitNoticesPublished waits until sink's notice publisher has published
// (or failed) every notice handed to it, or fails the test after 10 s.
func waitNoticesPublished(t *testing.T, sink *RankingSink) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		sink.notices.mu.Lock()
		running := sink.notices.running
		sink.notices.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("change notices still being published after 10 s")
		}
	}
}
