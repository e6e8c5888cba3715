// Package world is one test's world for the tests of rankd's consumer and
// replay: the example config's boards and routes, Kafka topics of the test's
// own (named after it, mapped to the schema topics), its own group,
// dead-letter topic and Redis key prefix; a producer of the example events;
// and the oracle's recomputation of every board from the log, compared
// member by member with the store. It imports nothing of consumer, so the
// tests of consumer and of consumer/replay can share it.
package world

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

// SchemaTopics are the topics of the example config.
var SchemaTopics = []string{"gift", "like", "comment"}

// World is one test's world.
type World struct {
	T        *testing.T
	Broker   *testenv.Broker
	Cfg      *config.Config
	Router   *ingest.Router
	KafkaOf  map[string]string // schema topic -> Kafka topic
	TopicMap map[string]string // Kafka topic -> schema topic
	Topics   []string          // Kafka topics, in SchemaTopics order
	DLQ      string
	Group    string
	RDB      *redis.Client
	Store    *store.Store
	Prefix   string // of the store's keys
}

// New creates the topics (partitions each, messages up to 4 MiB; the
// dead-letter topic has one partition so its order is the order of writes)
// and a store on rsrv.
func New(t *testing.T, rsrv *testenv.RedisServer, partitions int) *World {
	t.Helper()
	cfg, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		t.Fatal(err)
	}
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	w := &World{T: t, Broker: testenv.Kafka(t), Cfg: cfg, Router: router,
		KafkaOf: map[string]string{}, TopicMap: map[string]string{}}
	for _, st := range SchemaTopics {
		kt := w.Broker.Topic(t, st)
		w.KafkaOf[st], w.TopicMap[kt] = kt, st
		w.Topics = append(w.Topics, kt)
		CreateTopic(t, w.Broker.Addrs(), kt, partitions, 4<<20)
	}
	w.DLQ = w.Broker.Topic(t, "dlq")
	CreateTopic(t, w.Broker.Addrs(), w.DLQ, 1, 4<<20)
	w.Group = w.Broker.Topic(t, "group")
	// As rankd's own client (assembly.NewRedis): go-redis never resends a
	// pipeline; the consumer's retry does, visibly (its metrics and log).
	w.RDB = redis.NewClient(&redis.Options{Addr: rsrv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = w.RDB.Close() })
	w.Prefix = testenv.Prefix(t)
	w.Store, err = store.New(w.RDB, cfg.Boards(), store.WithPrefix(w.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// CreateTopic creates a topic through its own client (so no shared metadata
// cache has seen it missing) and waits until every partition has a leader.
// maxMessageBytes > 0 sets the topic's max.message.bytes.
func CreateTopic(t *testing.T, addrs []string, name string, partitions, maxMessageBytes int) {
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

// Msg is a message of a schema topic.
type Msg struct {
	Topic   string // schema topic
	Key     string
	Value   []byte
	Headers []kafka.Header
	Time    time.Time // the Kafka timestamp; zero: when it is produced
}

// NewWriter returns a tuned kafka-go Writer (keyed partitioning).
func (f *World) NewWriter() *kafka.Writer {
	tr := &kafka.Transport{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(f.Broker.Addrs()...),
		Balancer:     &kafka.Hash{},
		BatchSize:    1000,
		BatchBytes:   8 << 20,
		BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll,
		Transport:    tr,
	}
	f.T.Cleanup(func() { _ = w.Close(); tr.CloseIdleConnections() })
	return w
}

// Produce writes msgs with a kafka-go Writer, in order.
func (f *World) Produce(w *kafka.Writer, msgs []Msg) {
	f.T.Helper()
	kms := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		kms[i] = kafka.Message{Topic: f.KafkaOf[m.Topic], Key: []byte(m.Key), Value: m.Value, Headers: m.Headers, Time: m.Time}
	}
	ctx, cancel := context.WithTimeout(f.T.Context(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, kms...); err != nil {
		f.T.Fatalf("producing %d messages: %v", len(kms), err)
	}
}

// RequireKcat returns kcat's path, or skips the test (fails it under
// CI=true, like testenv's helpers) when kcat is not installed.
func RequireKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err == nil {
		return path
	}
	testenv.Unavailable(t, "kcat not found in PATH: apt-get install kcat")
	return ""
}

// KcatProduce writes msgs of one schema topic with kcat (librdkafka):
// "key<TAB>value" lines, headers given to every message of the call.
func (f *World) KcatProduce(kcat, topic string, msgs []Msg, headers ...string) {
	f.T.Helper()
	var in strings.Builder
	for _, m := range msgs {
		if strings.ContainsAny(m.Key, "\t\n") || strings.Contains(string(m.Value), "\n") {
			f.T.Fatalf("kcat message %q cannot be a line", m.Value)
		}
		fmt.Fprintf(&in, "%s\t%s\n", m.Key, m.Value)
	}
	args := []string{"-P", "-b", strings.Join(f.Broker.Addrs(), ","), "-t", f.KafkaOf[topic], "-K", "\t",
		"-X", "acks=all"}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	ctx, cancel := context.WithTimeout(f.T.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		f.T.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// LagClient returns a Kafka client for GroupLag.
func (f *World) LagClient() *kafka.Client {
	tr := &kafka.Transport{}
	f.T.Cleanup(tr.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(f.Broker.Addrs()...), Transport: tr, Timeout: 10 * time.Second}
}

// Reference recomputes every board from the log: it reads the fixture's
// topics back from Kafka (every partition, every offset) and feeds them to
// the oracle, which judges lateness per partition on its own. msgs are the
// messages the test produced: the log must hold exactly that many.
func (f *World) Reference(msgs []Msg) (*oracle.Oracle, int) {
	f.T.Helper()
	res := f.FromLog()
	if res.Messages != len(msgs) {
		f.T.Fatalf("the log holds %d messages, the test produced %d", res.Messages, len(msgs))
	}
	return res.Oracle, res.Applied
}

// FromLog recomputes every board from the fixture's topics.
func (f *World) FromLog() oracle.LogResult {
	f.T.Helper()
	log := testenv.ReadLog(f.T, f.Broker.Addrs(), f.Topics...)
	return oracle.Log{Schemas: f.Cfg.Schemas(), TopicMap: f.TopicMap, Router: f.Router}.FromLog(f.Cfg.Boards(), log)
}

// Compare fails the test unless every board the oracle knows of (every
// stream and period with data) equals the store's, member by member.
func (f *World) Compare(o *oracle.Oracle) {
	f.T.Helper()
	ctx := f.T.Context()
	var diffs []string
	boards := 0
	for _, s := range o.Streams() {
		for _, p := range o.Periods(s.Board, s.Dims) {
			boards++
			got, err := f.Store.Entries(ctx, s.Board, s.Dims, p)
			if err != nil {
				f.T.Fatalf("entries %s %v %s: %v", s.Board, s.Dims, p, err)
			}
			want := o.Board(s.Board, s.Dims, p)
			if d := oracle.Diff(got, want); d != "" && len(diffs) < 5 {
				diffs = append(diffs, fmt.Sprintf("%s %v %s:\n%s", s.Board, s.Dims, p, d))
			}
		}
	}
	if boards == 0 {
		f.T.Fatal("the oracle has no boards: nothing was routed")
	}
	if len(diffs) > 0 {
		f.T.Fatalf("boards differ from the oracle (of %d compared):\n%s", boards, strings.Join(diffs, "\n"))
	}
	f.T.Logf("%d boards (stream x period) equal the oracle", boards)
}

// Workload returns n example events (gift, like, comment JSON of the example config)
// whose event times all lie within 4 minutes around the latest Shanghai
// midnight that is safely in the past: every 30m, day and rolling board gets
// two periods, and since the span is below the 5m grace no event can be
// late whatever order the partitions are consumed in (so the oracle, fed in
// produce order, is exact). About 2% are re-sent duplicates (same id and
// payload).
func Workload(seed uint64, n int, idPrefix string) []Msg {
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
	var out []Msg
	for i := 0; len(out) < n; i++ {
		if len(out) > 10 && rng.IntN(50) == 0 {
			out = append(out, out[rng.IntN(len(out))])
			continue
		}
		ts := start.Add(time.Duration(rng.Int64N(int64(4 * time.Minute)))).UnixMilli()
		anchor := fmt.Sprintf("a%d", pick(60))
		common := fmt.Sprintf(`"id":"%s-%d","ts":%d,"user_id":"u%d","anchor_id":"%s","room_id":"r%d","zone":"z%d"`,
			idPrefix, i, ts, pick(200), anchor, rng.IntN(8), rng.IntN(4))
		var m Msg
		switch r := rng.IntN(10); {
		case r < 4:
			gift := []string{"rose", "ice_castle", "rocket"}[rng.IntN(3)]
			m = Msg{Topic: "gift", Value: fmt.Appendf(nil, `{%s,"gift_id":"%s","count":%d,"coins":%d}`,
				common, gift, 1+rng.IntN(10), 1+rng.IntN(1000))}
		case r < 8:
			if rng.IntN(3) == 0 { // count defaults to 1
				m = Msg{Topic: "like", Value: fmt.Appendf(nil, `{%s}`, common)}
			} else {
				m = Msg{Topic: "like", Value: fmt.Appendf(nil, `{%s,"count":%d}`, common, 1+rng.IntN(5))}
			}
		default:
			news, k := "", pick(30)
			if rng.IntN(10) < 7 {
				news = fmt.Sprintf("n%d", k)
			}
			newsTS := mid.Add(-time.Duration(k+1) * 37 * time.Minute).UnixMilli() // fixed per news item
			m = Msg{Topic: "comment", Value: fmt.Appendf(nil, `{%s,"news_id":"%s","news_ts":%d,"text":"nice %d"}`,
				common, news, newsTS, i)}
		}
		m.Key = anchor
		out = append(out, m)
	}
	return out
}

// WaitCommitted waits until the world's group has committed every message
// of its topics (ListOffsets against OffsetFetch), failing the test after
// timeout or as soon as failed returns an error (a consumer that stopped).
func (f *World) WaitCommitted(timeout time.Duration, failed func() error) {
	f.T.Helper()
	client := f.LagClient()
	deadline := time.Now().Add(timeout)
	var lag int64
	var err error
	for {
		if lag, err = f.lag(client); err == nil && lag == 0 {
			return
		}
		if failed != nil {
			if ferr := failed(); ferr != nil {
				f.T.Fatalf("consumer stopped: %v", ferr)
			}
		}
		if time.Now().After(deadline) {
			f.T.Fatalf("group %s not caught up after %v: %d messages not committed (last error %v)", f.Group, timeout, lag, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lag returns how many messages of the world's topics the group has not
// committed.
func (f *World) lag(client *kafka.Client) (int64, error) {
	ctx := f.T.Context()
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: f.Topics})
	if err != nil {
		return 0, err
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	parts := map[string][]int{}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			req.Topics[t.Name] = append(req.Topics[t.Name], kafka.LastOffsetOf(p.ID))
			parts[t.Name] = append(parts[t.Name], p.ID)
		}
	}
	ends, err := client.ListOffsets(ctx, req)
	if err != nil {
		return 0, err
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: f.Group, Topics: parts})
	if err != nil {
		return 0, err
	}
	if committed.Error != nil {
		return 0, committed.Error
	}
	var lag int64
	for topic, ps := range ends.Topics {
		for _, p := range ps {
			c := int64(0)
			for _, cp := range committed.Topics[topic] {
				if cp.Partition == p.Partition && cp.CommittedOffset > 0 {
					c = cp.CommittedOffset
				}
			}
			lag += p.LastOffset - c
		}
	}
	return lag, nil
}
