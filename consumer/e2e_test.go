package consumer

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
)

// TestEndToEnd produces the example workload with kafka-go and with kcat (a
// real third-party client, librdkafka) into three topics of three
// partitions, half before and half while two workers consume, waits until
// the group has committed everything, and compares every board with the
// oracle. It also checks readiness and the loop's metrics, and that the
// change notices (store.WatchChanges) named exactly the boards it applied
// updates to.
func TestEndToEnd(t *testing.T) {
	kcat := world.RequireKcat(t)
	f := newFixture(t, testenv.Redis(t), 3)
	msgs := world.Workload(1, 3000, "e2e")
	viaGo, viaKcat := msgs[:2600], msgs[2600:]

	// One message whose ID is only in a Kafka header (kcat -H).
	var hdrMsg world.Msg
	for _, m := range msgs {
		if m.Topic == "like" {
			hdrMsg = m
			break
		}
	}
	hdrMsg.Value = regexp.MustCompile(`"id":"[^"]*",`).ReplaceAll(hdrMsg.Value, nil)
	hdrMsg.Headers = []kafka.Header{{Key: "id", Value: []byte("kcat-header-id")}}

	// the change notices, from before the first batch
	noticed := map[string]bool{}
	var noticedMu sync.Mutex
	subscribed, ended := make(chan struct{}), make(chan struct{})
	var subOnce, endOnce sync.Once
	wctx, wcancel := context.WithCancel(t.Context())
	wdone := make(chan error, 1)
	go func() {
		wdone <- f.Store.WatchChanges(wctx, func(boards []string) {
			if boards == nil {
				subOnce.Do(func() { close(subscribed) })
				return
			}
			noticedMu.Lock()
			defer noticedMu.Unlock()
			for _, b := range boards {
				if b == "~end" {
					endOnce.Do(func() { close(ended) })
				} else {
					noticed[b] = true
				}
			}
		})
	}()
	defer func() {
		wcancel()
		if err := <-wdone; err != nil {
			t.Errorf("WatchChanges: %v", err)
		}
	}()
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("not subscribed to the change notices within 10s")
	}

	w := f.NewWriter()
	f.Produce(w, viaGo[:1300])
	notRunning := &Consumer{}
	if notRunning.Ready() {
		t.Error("a consumer that never ran is ready")
	}
	sink := f.sink()
	r := f.start(f.consumerConfig(), sink)
	f.Produce(w, viaGo[1300:])
	for _, topic := range world.SchemaTopics {
		var part []world.Msg
		for _, m := range viaKcat {
			if m.Topic == topic {
				part = append(part, m)
			}
		}
		f.KcatProduce(kcat, topic, part)
	}
	f.KcatProduce(kcat, "like", []world.Msg{hdrMsg}, "id=kcat-header-id")
	all := append(append([]world.Msg(nil), msgs...), hdrMsg)

	f.waitCommitted(2*time.Minute, r)

	// The second worker may still be joining when the first has committed
	// everything: readiness must come within the join, not at once.
	f.waitReady(r)
	// /readyz (assembly.ReadyHandler, tested there) is 200 exactly when
	// NotReady is nil and Redis answers its ping.
	if err := r.c.NotReady(); err != nil {
		t.Errorf("NotReady() = %v while consuming, want nil (/readyz 200)", err)
	}
	if err := f.Store.Ping(t.Context()); err != nil {
		t.Errorf("store Ping = %v with Redis up, want nil (/readyz 200)", err)
	}
	batches := total(f.metrics().batchSize) // any batches at all
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.c.Ready() {
		t.Error("Ready() = true after Run returned")
	}
	if err := r.c.NotReady(); err == nil {
		t.Error("NotReady() = nil after Run returned, want a reason (/readyz 503)")
	}

	o, applied := f.Reference(all)
	f.Compare(o)

	m := f.metrics()
	if got := total(m.sinkUpdates); got != float64(applied) {
		t.Errorf("rankd_sink_updates_applied_total = %v, want %d (the oracle's applied updates)", got, applied)
	}
	if got := total(m.messages); got < float64(len(all)) {
		t.Errorf("rankd_consumer_messages_total = %v, want >= %d", got, len(all))
	}
	for _, topic := range f.Topics {
		if testutil.ToFloat64(m.messages.WithLabelValues(topic)) == 0 {
			t.Errorf("no messages counted for topic %s", topic)
		}
	}
	if got := testutil.ToFloat64(m.duplicates); got == 0 {
		t.Error("rankd_sink_duplicates_total = 0; the workload re-sends about 2% of its messages")
	}
	if got := total(m.deadLetters); got != 0 {
		t.Errorf("rankd_consumer_dead_letters_total = %v, want 0", got)
	}
	if batches == 0 || total(m.applyDur) == 0 || total(m.eventLag) == 0 {
		t.Error("batch size, apply duration or event lag histograms are empty")
	}
	if partitions := testutil.CollectAndCount(m.lag); partitions != 9 {
		t.Errorf("rankd_consumer_lag_messages has %d series, want 9 (3 topics x 3 partitions)", partitions)
	}

	// the sink publishes its notices off the apply path: once it has
	// published them all, each is delivered before this one
	waitNoticesPublished(t, sink)
	if err := f.Store.PublishChanges(t.Context(), []string{"~end"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the last notice not delivered within 10s")
	}
	var want, got []string
	for _, b := range f.Cfg.Boards() {
		if testutil.ToFloat64(m.sinkUpdates.WithLabelValues(b.Name)) > 0 {
			want = append(want, b.Name)
		}
	}
	noticedMu.Lock()
	for b := range noticed {
		got = append(got, b)
	}
	noticedMu.Unlock()
	sort.Strings(want)
	sort.Strings(got)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("change notices named %q, want the boards updates were applied to: %q", got, want)
	}
	if n := testutil.ToFloat64(m.noticeErrors); n != 0 {
		t.Errorf("rankd_sink_change_notice_errors_total = %v, want 0", n)
	}
}
