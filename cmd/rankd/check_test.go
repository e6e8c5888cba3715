package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/cmd/rankd/internal/produce"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// Checks of the subprocess tests: what was produced, committed,
// dead-lettered and stored.

// scrapeCounter returns the value of an unlabelled counter on a /metrics
// page, or 0 when it cannot be read (the process may be gone).
func scrapeCounter(url, name string) float64 {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil || mfs[name] == nil {
		return 0
	}
	for _, m := range mfs[name].GetMetric() {
		if len(m.GetLabel()) == 0 {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// recordingWriter writes messages and records those acknowledged.
type recordingWriter struct {
	w   produce.Writer
	mu  *sync.Mutex
	out *[]kafka.Message
}

func (r *recordingWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if err := r.w.WriteMessages(ctx, msgs...); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.out = append(*r.out, msgs...)
	return nil
}

// lagReader reads a group's committed and end offsets.
type lagReader struct {
	t      *testing.T
	client *kafka.Client
	group  string
	topics []string
}

func newLagReader(t *testing.T, brokers []string, group string, topics []string) *lagReader {
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &lagReader{t: t, client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second},
		group: group, topics: topics}
}

// totals returns the sum of committed offsets (0 where none) and of end
// offsets over every partition of the topics.
func (l *lagReader) totals() (committed, end int64) {
	l.t.Helper()
	lags, err := consumer.GroupLag(l.t.Context(), l.client, l.group, l.topics)
	if errors.Is(err, kafka.GroupIdNotFound) {
		return 0, 0 // nothing committed yet
	}
	if err != nil {
		l.t.Fatalf("group lag: %v", err)
	}
	for _, pl := range lags {
		end += pl.End
		committed += max(pl.Committed, 0)
	}
	return committed, end
}

// compareWithOracle routes msgs, in produce order, through the config's
// schemas and router into the oracle and fails the test unless every board
// of every stream and period equals the store's.
func compareWithOracle(t *testing.T, cfg *config.Config, rdb redis.UniversalClient, msgs []kafka.Message) {
	t.Helper()
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	orc := oracle.New(cfg.Boards())
	updates := 0
	for _, m := range msgs {
		ev, err := cfg.Schemas()[m.Topic].Decode(m.Topic, 0, 0, m.Value, nil, time.Now())
		if err != nil {
			t.Fatalf("produced event does not decode: %v: %s", err, m.Value)
		}
		ups, err := router.Route(ev)
		if err != nil {
			t.Fatalf("produced event does not route: %v: %s", err, m.Value)
		}
		for i, s := range orc.Apply(ups) {
			if s != ranking.StatusApplied {
				t.Fatalf("the oracle says %v for update %+v: the test's events must all apply", s, ups[i])
			}
		}
		updates += len(ups)
	}
	st, err := store.New(rdb, cfg.Boards(), store.WithPrefix(cfg.Redis.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	boards, rows := 0, 0
	var diffs []string
	for _, s := range orc.Streams() {
		for _, period := range orc.Periods(s.Board, s.Dims) {
			got, err := st.Entries(ctx, s.Board, s.Dims, period)
			if err != nil {
				t.Fatalf("entries %s %q %s: %v", s.Board, s.Dims, period, err)
			}
			want := orc.Board(s.Board, s.Dims, period)
			boards++
			rows += len(want)
			if d := oracle.Diff(got, want); d != "" && len(diffs) < 5 {
				diffs = append(diffs, fmt.Sprintf("%s %q %s (%d rows, want %d):\n%s", s.Board, s.Dims, period, len(got), len(want), d))
			}
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("boards differ from the oracle:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("%d events, %d updates: %d boards (stream × period), %d rows equal the oracle", len(msgs), updates, boards, rows)
}

// checkDeadLetters fails the test unless the dead-letter topic holds every
// message of crashBad and nothing else.
func checkDeadLetters(t *testing.T, brokers []string, topic string) {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	conn, err := kafka.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, pt := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: pt.ID, MaxWait: 100 * time.Millisecond})
		c, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, pt.ID)
		if err != nil {
			t.Fatal(err)
		}
		last, err := c.ReadLastOffset()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < last; off++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("reading %s/%d: %v", topic, pt.ID, err)
			}
			reason := ""
			for _, h := range m.Headers {
				if h.Key == consumer.HeaderReason {
					reason = string(h.Value)
				}
			}
			seen[string(m.Value)]++
			if !slices.ContainsFunc(crashBad, func(b kafka.Message) bool { return string(b.Value) == string(m.Value) }) {
				t.Errorf("unexpected dead letter (reason %s): %s", reason, m.Value)
			}
		}
		r.Close()
	}
	for _, b := range crashBad {
		if seen[string(b.Value)] == 0 {
			t.Errorf("bad message never dead-lettered: %s", b.Value)
		}
	}
	t.Logf("dead letters: %v", seen)
}

// TestScrapeCounter reads counters off a live /metrics page.
func TestScrapeCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	dups := prometheus.NewCounter(prometheus.CounterOpts{Name: "rankd_sink_duplicates_total", Help: "h"})
	byTopic := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rankd_consumer_messages_total", Help: "h"}, []string{"topic"})
	reg.MustRegister(dups, byTopic)
	dups.Add(7)
	byTopic.WithLabelValues("gift").Add(3)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	for name, want := range map[string]float64{
		"rankd_sink_duplicates_total":   7,
		"rankd_consumer_messages_total": 0, // labelled
		"rankd_nope_total":              0,
	} {
		if got := scrapeCounter(srv.URL, name); got != want {
			t.Errorf("scrapeCounter(%s) = %v, want %v", name, got, want)
		}
	}
	if got := scrapeCounter("http://127.0.0.1:1/metrics", "rankd_sink_duplicates_total"); got != 0 {
		t.Errorf("scrapeCounter of nothing = %v, want 0", got)
	}
}
