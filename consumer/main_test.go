package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/oracle"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// schemaTopics are the topics of the example config.
var schemaTopics = []string{"gift", "like", "comment"}

// fixture is one test's world: the example config's boards and routes, its
// own Kafka topics (named after the test, mapped to the schema topics), its
// own group, dead-letter topic and Redis key prefix.
type fixture struct {
	t        *testing.T
	broker   *testenv.Broker
	cfg      *config.Config
	router   *ingest.Router
	kafkaOf  map[string]string // schema topic -> Kafka topic
	topicMap map[string]string // Kafka topic -> schema topic
	topics   []string          // Kafka topics, in schemaTopics order
	dlq      string
	group    string
	rdb      *redis.Client
	store    *store.Store
	prefix   string // of the store's keys
	reg      *prometheus.Registry
}

// newFixture creates the topics (partitions each, messages up to 4 MiB; the
// dead-letter topic has one partition so its order is the order of writes)
// and a store on rsrv.
func newFixture(t *testing.T, rsrv *testenv.RedisServer, partitions int) *fixture {
	t.Helper()
	cfg := loadExample(t)
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, broker: testenv.Kafka(t), cfg: cfg, router: router,
		kafkaOf: map[string]string{}, topicMap: map[string]string{}, reg: prometheus.NewRegistry()}
	for _, st := range schemaTopics {
		kt := f.broker.Topic(t, st)
		f.kafkaOf[st], f.topicMap[kt] = kt, st
		f.topics = append(f.topics, kt)
		createTopic(t, f.broker.Addrs(), kt, partitions, 4<<20)
	}
	f.dlq = f.broker.Topic(t, "dlq")
	createTopic(t, f.broker.Addrs(), f.dlq, 1, 4<<20)
	f.group = f.broker.Topic(t, "group")
	f.rdb = rsrv.Client(t)
	f.prefix = testenv.Prefix(t)
	f.store, err = store.New(f.rdb, cfg.Boards(), store.WithPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// createTopic creates a topic through its own client (so no shared metadata
// cache has seen it missing) and waits until every partition has a leader.
// maxMessageBytes > 0 sets the topic's max.message.bytes.
func createTopic(t *testing.T, addrs []string, name string, partitions, maxMessageBytes int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(addrs...), Transport: tr}
	tc := kafka.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}
	if maxMessageBytes > 0 {
		tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(maxMessageBytes)}}
	}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = resp.Errors[name]
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
	for {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{name}})
		if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil && len(md.Topics[0].Partitions) == partitions {
			ok := true
			for _, p := range md.Topics[0].Partitions {
				ok = ok && p.Error == nil && p.Leader.Host != ""
			}
			if ok {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not ready: %v", name, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sink returns a RankingSink of the fixture on its registry.
func (f *fixture) sink() *RankingSink {
	f.t.Helper()
	s, err := NewRankingSink(f.cfg.Schemas(), f.router, f.store, WithTopicMap(f.topicMap), WithRegisterer(f.reg))
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// consumerConfig returns a Config tuned for fast tests: short group timers,
// small batches, fast retries.
func (f *fixture) consumerConfig() Config {
	return Config{
		Brokers:           f.broker.Addrs(),
		Group:             f.group,
		Topics:            f.topics,
		Workers:           2,
		BatchCount:        200,
		Linger:            10 * time.Millisecond,
		DeadLetterTopic:   f.dlq,
		ShutdownTimeout:   5 * time.Second,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 250 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		RebalanceTimeout:  6 * time.Second,
		RetryMin:          20 * time.Millisecond,
		RetryMax:          400 * time.Millisecond,
		CommitTimeout:     5 * time.Second,
		LagInterval:       200 * time.Millisecond,
	}
}

// testLogger logs warnings and errors to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// running is a Consumer running in the background.
type running struct {
	c      *Consumer
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs a Consumer of cfg until stop (or the test's end).
func (f *fixture) start(cfg Config, sink Sink, opts ...Option) *running {
	f.t.Helper()
	opts = append([]Option{WithRegisterer(f.reg), WithLogger(testLogger(f.t))}, opts...)
	c, err := New(cfg, sink, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = c.Run(ctx)
	}()
	f.t.Cleanup(func() { r.stop() })
	return r
}

// waitReady waits until every worker of r has joined the group, so that
// nothing produced afterwards is fetched across the workers' joining
// rebalance (which redelivers an in-flight batch: exact on the boards thanks
// to dedupe, but its dead letters would be written twice).
func (f *fixture) waitReady(r *running) {
	f.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !r.c.Ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || r.exited() {
			f.t.Fatal("consumer did not join its group within 30 s")
		}
	}
}

// stop cancels the consumer and waits for Run; it returns Run's error.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// exited reports whether Run has returned.
func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// msg is one produced message, by schema topic.
type msg struct {
	topic   string // schema topic
	key     string
	value   []byte
	headers []kafka.Header
}

// newWriter returns a tuned kafka-go Writer (keyed partitioning).
func (f *fixture) newWriter() *kafka.Writer {
	tr := &kafka.Transport{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(f.broker.Addrs()...),
		Balancer:     &kafka.Hash{},
		BatchSize:    1000,
		BatchBytes:   8 << 20,
		BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll,
		Transport:    tr,
	}
	f.t.Cleanup(func() { _ = w.Close(); tr.CloseIdleConnections() })
	return w
}

// produce writes msgs with a kafka-go Writer, in order.
func (f *fixture) produce(w *kafka.Writer, msgs []msg) {
	f.t.Helper()
	kms := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		kms[i] = kafka.Message{Topic: f.kafkaOf[m.topic], Key: []byte(m.key), Value: m.value, Headers: m.headers}
	}
	ctx, cancel := context.WithTimeout(f.t.Context(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, kms...); err != nil {
		f.t.Fatalf("producing %d messages: %v", len(kms), err)
	}
}

// requireKcat returns kcat's path, or skips the test (fails it under
// CI=true, like testenv's helpers) when kcat is not installed.
func requireKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err == nil {
		return path
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("kcat not found in PATH (apt-get install kcat) (CI=true: not skipping)")
	}
	t.Skip("kcat not found in PATH: apt-get install kcat")
	return ""
}

// kcatProduce writes msgs of one schema topic with kcat (librdkafka):
// "key<TAB>value" lines, headers given to every message of the call.
func (f *fixture) kcatProduce(kcat, topic string, msgs []msg, headers ...string) {
	f.t.Helper()
	var in strings.Builder
	for _, m := range msgs {
		if strings.ContainsAny(m.key, "\t\n") || strings.Contains(string(m.value), "\n") {
			f.t.Fatalf("kcat message %q cannot be a line", m.value)
		}
		fmt.Fprintf(&in, "%s\t%s\n", m.key, m.value)
	}
	args := []string{"-P", "-b", strings.Join(f.broker.Addrs(), ","), "-t", f.kafkaOf[topic], "-K", "\t",
		"-X", "acks=all"}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	ctx, cancel := context.WithTimeout(f.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// lagClient returns a Kafka client for GroupLag.
func (f *fixture) lagClient() *kafka.Client {
	tr := &kafka.Transport{}
	f.t.Cleanup(tr.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(f.broker.Addrs()...), Transport: tr, Timeout: 10 * time.Second}
}

// waitCommitted waits until the group has committed every message of its
// topics (ListOffsets vs OffsetFetch), failing the test after timeout or
// when a consumer's Run returned early.
func (f *fixture) waitCommitted(timeout time.Duration, rs ...*running) {
	f.t.Helper()
	client := f.lagClient()
	deadline := time.Now().Add(timeout)
	var last []PartitionLag
	for {
		lags, err := GroupLag(f.t.Context(), client, f.group, f.topics)
		if err == nil {
			last = lags
			var total int64
			for _, l := range lags {
				total += l.Lag
			}
			if total == 0 && len(lags) > 0 {
				return
			}
		}
		for _, r := range rs {
			if r.exited() {
				f.t.Fatalf("consumer exited early: %v", r.err)
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("group %s not caught up after %v (last error %v): %+v", f.group, timeout, err, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reference recomputes every board from the log: it reads the fixture's
// topics back from Kafka (every partition, every offset) and feeds them to
// the oracle, which judges lateness per partition on its own. msgs are the
// messages the test produced: the log must hold exactly that many.
func (f *fixture) reference(msgs []msg) (*oracle.Oracle, int) {
	f.t.Helper()
	res := f.fromLog()
	if res.Messages != len(msgs) {
		f.t.Fatalf("the log holds %d messages, the test produced %d", res.Messages, len(msgs))
	}
	return res.Oracle, res.Applied
}

// fromLog recomputes every board from the fixture's topics.
func (f *fixture) fromLog() oracle.LogResult {
	f.t.Helper()
	log := testenv.ReadLog(f.t, f.broker.Addrs(), f.topics...)
	return oracle.Log{Schemas: f.cfg.Schemas(), TopicMap: f.topicMap, Router: f.router}.FromLog(f.cfg.Boards(), log)
}

// compare fails the test unless every board the oracle knows of (every
// stream and period with data) equals the store's, member by member.
func (f *fixture) compare(o *oracle.Oracle) {
	f.t.Helper()
	ctx := f.t.Context()
	var diffs []string
	boards := 0
	for _, s := range o.Streams() {
		for _, p := range o.Periods(s.Board, s.Dims) {
			boards++
			got, err := f.store.Entries(ctx, s.Board, s.Dims, p)
			if err != nil {
				f.t.Fatalf("entries %s %v %s: %v", s.Board, s.Dims, p, err)
			}
			want := o.Board(s.Board, s.Dims, p)
			if d := oracle.Diff(got, want); d != "" && len(diffs) < 5 {
				diffs = append(diffs, fmt.Sprintf("%s %v %s:\n%s", s.Board, s.Dims, p, d))
			}
		}
	}
	if boards == 0 {
		f.t.Fatal("the oracle has no boards: nothing was routed")
	}
	if len(diffs) > 0 {
		f.t.Fatalf("boards differ from the oracle (of %d compared):\n%s", boards, strings.Join(diffs, "\n"))
	}
	f.t.Logf("%d boards (stream x period) equal the oracle", boards)
}

// metrics returns the collectors the fixture's sinks and consumers share
// on f.reg (newMetrics hands out the ones registered there), to read with
// testutil.ToFloat64 (one series), testutil.CollectAndCount (how many
// series) or total.
func (f *fixture) metrics() *metrics {
	f.t.Helper()
	m, err := newMetrics(f.reg)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// total is what testutil.ToFloat64 reads of one series, summed over every
// series of c: counter and gauge values, histogram observation counts.
func total(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			panic(err)
		}
		switch {
		case pb.Counter != nil:
			sum += pb.Counter.GetValue()
		case pb.Gauge != nil:
			sum += pb.Gauge.GetValue()
		case pb.Histogram != nil:
			sum += float64(pb.Histogram.GetSampleCount())
		default:
			panic(fmt.Sprintf("total: a metric of another type: %v", &pb))
		}
	}
	return sum
}

// workload returns n example events (gift, like, comment JSON of the example config)
// whose event times all lie within 4 minutes around the latest Shanghai
// midnight that is safely in the past: every 30m, day and rolling board gets
// two periods, and since the span is below the 5m grace no event can be
// late whatever order the partitions are consumed in (so the oracle, fed in
// produce order, is exact). About 2% are re-sent duplicates (same id and
// payload).
func workload(seed uint64, n int, idPrefix string) []msg {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	now := time.Now().In(sh)
	mid := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, sh)
	if now.Sub(mid) < 5*time.Minute {
		mid = mid.AddDate(0, 0, -1)
	}
	start := mid.Add(-2 * time.Minute)
	pick := func(n int) int { // skewed towards small numbers
		return int(float64(n) * rng.Float64() * rng.Float64())
	}
	var out []msg
	for i := 0; len(out) < n; i++ {
		if len(out) > 10 && rng.IntN(50) == 0 {
			out = append(out, out[rng.IntN(len(out))])
			continue
		}
		ts := start.Add(time.Duration(rng.Int64N(int64(4 * time.Minute)))).UnixMilli()
		anchor := fmt.Sprintf("a%d", pick(60))
		common := fmt.Sprintf(`"id":"%s-%d","ts":%d,"user_id":"u%d","anchor_id":"%s","room_id":"r%d","zone":"z%d"`,
			idPrefix, i, ts, pick(200), anchor, rng.IntN(8), rng.IntN(4))
		var m msg
		switch r := rng.IntN(10); {
		case r < 4:
			gift := []string{"rose", "ice_castle", "rocket"}[rng.IntN(3)]
			m = msg{topic: "gift", value: fmt.Appendf(nil, `{%s,"gift_id":"%s","count":%d,"coins":%d}`,
				common, gift, 1+rng.IntN(10), 1+rng.IntN(1000))}
		case r < 8:
			if rng.IntN(3) == 0 { // count defaults to 1
				m = msg{topic: "like", value: fmt.Appendf(nil, `{%s}`, common)}
			} else {
				m = msg{topic: "like", value: fmt.Appendf(nil, `{%s,"count":%d}`, common, 1+rng.IntN(5))}
			}
		default:
			news, k := "", pick(30)
			if rng.IntN(10) < 7 {
				news = fmt.Sprintf("n%d", k)
			}
			newsTS := mid.Add(-time.Duration(k+1) * 37 * time.Minute).UnixMilli() // fixed per news item
			m = msg{topic: "comment", value: fmt.Appendf(nil, `{%s,"news_id":"%s","news_ts":%d,"text":"nice %d"}`,
				common, news, newsTS, i)}
		}
		m.key = anchor
		out = append(out, m)
	}
	return out
}

// recordingSink wraps a Sink and records, per topic and partition, the
// highest offset of every batch that Apply returned without error.
type recordingSink struct {
	inner Sink
	mu    sync.Mutex
	high  map[topicPart]int64
}

func newRecordingSink(inner Sink) *recordingSink {
	return &recordingSink{inner: inner, high: map[topicPart]int64{}}
}

func (s *recordingSink) Apply(ctx context.Context, msgs []kafka.Message) ([]DeadLetter, error) {
	dead, err := s.inner.Apply(ctx, msgs)
	if err != nil {
		return dead, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		k := topicPart{m.Topic, m.Partition}
		if h, ok := s.high[k]; !ok || m.Offset > h {
			s.high[k] = m.Offset
		}
	}
	return dead, nil
}

// checkCommits fails the test when a committed offset is beyond the highest
// applied offset + 1 of its partition.
func (s *recordingSink) checkCommits(t *testing.T, lags []PartitionLag) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range lags {
		if l.Committed < 0 {
			continue
		}
		h, ok := s.high[topicPart{l.Topic, l.Partition}]
		if !ok || l.Committed > h+1 {
			t.Errorf("%s/%d committed at %d, but the highest applied offset is %d (applied: %v)",
				l.Topic, l.Partition, l.Committed, h, ok)
		}
	}
}

// errInjected is the transient failure that test sinks report.
var errInjected = errors.New("injected transient failure")
