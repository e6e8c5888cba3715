package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking/store"
)

// Checks: the group's offsets, the boards against the oracle recomputed
// from the log, the dead letters.

// Dead-letter headers (consumer.HeaderReason and friends; rankd is a black
// box here, so they are spelled out).
const (
	headerReason    = "reason"
	headerTopic     = "topic"
	headerPartition = "partition"
	headerOffset    = "offset"
)

// partKey is a topic partition.
type partKey struct {
	topic     string
	partition int
}

func (k partKey) String() string { return fmt.Sprintf("%s/%d", k.topic, k.partition) }

// offsetSnap is the group's committed offsets and the log end offsets of
// every partition, at one moment.
type offsetSnap struct {
	at        time.Time
	end       map[partKey]int64
	committed map[partKey]int64 // -1: nothing committed
}

func (s offsetSnap) lag() int64 {
	var lag int64
	for k, e := range s.end {
		lag += e - max(s.committed[k], 0)
	}
	return lag
}

func (s offsetSnap) totals() (committed, end int64) {
	for k, e := range s.end {
		end += e
		committed += max(s.committed[k], 0)
	}
	return committed, end
}

// drained reports whether the group committed every message of the log.
func (s offsetSnap) drained() bool {
	for k, e := range s.end {
		if s.committed[k] != e && !(e == 0 && s.committed[k] < 0) {
			return false
		}
	}
	return len(s.end) > 0
}

// progressedPast reports whether, on every partition, the group committed
// beyond the log end of before: something produced after before was
// applied and committed everywhere.
func (s offsetSnap) progressedPast(before offsetSnap) bool {
	for k, e := range before.end {
		if s.committed[k] <= e {
			return false
		}
	}
	return len(before.end) > 0
}

// offsetReader reads a group's offsets (ListOffsets, OffsetFetch), as
// rankd's own lag computation does.
type offsetReader struct {
	client *kafka.Client
	group  string
	topics []string
}

func newOffsetReader(t *testing.T, brokers []string, group string, topics []string) *offsetReader {
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &offsetReader{
		client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 5 * time.Second},
		group:  group, topics: topics,
	}
}

func (r *offsetReader) read(ctx context.Context) (offsetSnap, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := offsetSnap{end: map[partKey]int64{}, committed: map[partKey]int64{}}
	md, err := r.client.Metadata(ctx, &kafka.MetadataRequest{Topics: r.topics})
	if err != nil {
		return s, err
	}
	parts := map[string][]int{}
	reqs := map[string][]kafka.OffsetRequest{}
	for _, tm := range md.Topics {
		if tm.Error != nil {
			return s, fmt.Errorf("topic %s: %w", tm.Name, tm.Error)
		}
		for _, p := range tm.Partitions {
			parts[tm.Name] = append(parts[tm.Name], p.ID)
			reqs[tm.Name] = append(reqs[tm.Name], kafka.LastOffsetOf(p.ID))
		}
	}
	lo, err := r.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: reqs})
	if err != nil {
		return s, err
	}
	for topic, ps := range lo.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return s, fmt.Errorf("end offset of %s/%d: %w", topic, p.Partition, p.Error)
			}
			s.end[partKey{topic, p.Partition}] = p.LastOffset
		}
	}
	of, err := r.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: r.group, Topics: parts})
	if err == nil {
		err = of.Error
	}
	if errors.Is(err, kafka.GroupIdNotFound) {
		err = nil
	}
	if err != nil {
		return s, err
	}
	for k := range s.end {
		s.committed[k] = -1
	}
	if of != nil {
		for topic, ps := range of.Topics {
			for _, p := range ps {
				if p.Error != nil {
					return s, fmt.Errorf("committed offset of %s/%d: %w", topic, p.Partition, p.Error)
				}
				s.committed[partKey{topic, p.Partition}] = p.CommittedOffset
			}
		}
	}
	s.at = time.Now()
	return s, nil
}

// writeConfig writes the example config with the test's addresses (redis:
// one address, or several for a cluster), a long retention on the boards
// (the events go back 40 hours) and extra replacements, and returns its
// path.
func writeConfig(t *testing.T, name, broker string, redisAddrs []string, listen string, extra ...[2]string) string {
	t.Helper()
	redisLine := "addr: " + redisAddrs[0]
	if len(redisAddrs) > 1 {
		redisLine = "addrs: [" + strings.Join(redisAddrs, ", ") + "]"
	}
	text := string(config.Example())
	for _, r := range append([][2]string{
		{"brokers: [localhost:9092]", "brokers: [" + broker + "]"},
		{"addr: localhost:6379", redisLine},
		{`listen: ":8080"`, `listen: "` + listen + `"`},
		{"  prefix: rankd\n", "  prefix: chaos\n"},
		{"x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n", "x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n  retention: 240h\n"},
	}, extra...) {
		if strings.Count(text, r[0]) != 1 {
			t.Fatalf("config/example.yaml: %q is not there exactly once; update the chaos test", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// expectation is what the log says the boards and dead letters must be.
type expectation struct {
	res  oracle.LogResult
	log  []oracle.LogMessage
	dups int // messages whose ID appeared earlier in the log
}

// expect reads the topics' log back and recomputes every board with the
// oracle, and checks that every message the producer had acknowledged is
// in the log.
func expect(t *testing.T, cfg *config.Config, brokers []string, topics []string, p *producer) expectation {
	t.Helper()
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	log := testenv.ReadLog(t, brokers, topics...)
	in := map[string]bool{}
	dups := 0
	var unknown []string
	for _, m := range log {
		k := logKey(m.Value)
		if in[k] {
			dups++
		}
		in[k] = true
		if !p.sentKey(k) {
			unknown = append(unknown, m.Where())
		}
	}
	if len(unknown) > 0 {
		t.Fatalf("%d messages of the log were never sent by the producer: %.5q", len(unknown), unknown)
	}
	acked, n := p.ackedKeys()
	var missing []string
	for _, k := range acked {
		if !in[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged messages (%d distinct) are not in the log: %.5q", len(missing), n, len(acked), missing)
	}
	res := oracle.Log{Schemas: cfg.Schemas(), Router: router}.FromLog(cfg.Boards(), log)
	return expectation{res: res, log: log, dups: dups}
}

// boardDiff is the outcome of comparing the store with the oracle.
type boardDiff struct {
	boards, rows int
	members      int      // members missing, extra or with another value or tie
	details      []string // the first differing boards
}

// compareBoards reads every board (stream x period) the oracle knows from
// the store on rdb and counts the members that differ. It reads through
// store.Store, as the cmd/rankd tests do.
func compareBoards(t *testing.T, cfg *config.Config, rdb redis.UniversalClient, orc *oracle.Oracle) boardDiff {
	t.Helper()
	st, err := store.New(rdb, cfg.Boards(), store.WithPrefix(cfg.Redis.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var d boardDiff
	for _, s := range orc.Streams() {
		for _, period := range orc.Periods(s.Board, s.Dims) {
			var got []store.Entry
			for attempt := 1; ; attempt++ {
				got, err = st.Entries(ctx, s.Board, s.Dims, period)
				if err == nil || attempt == 5 {
					break
				}
				time.Sleep(200 * time.Millisecond) // a cluster settling after a node restart
			}
			if err != nil {
				t.Fatalf("entries %s %q %s: %v", s.Board, s.Dims, period, err)
			}
			want := orc.Board(s.Board, s.Dims, period)
			d.boards++
			d.rows += len(want)
			n := differingMembers(got, want)
			d.members += n
			if diff := oracle.Diff(got, want); diff != "" || n > 0 {
				if len(d.details) < 5 {
					d.details = append(d.details, fmt.Sprintf("%s %q %s (%d rows, want %d; %d members differ):\n%s",
						s.Board, s.Dims, period, len(got), len(want), n, diff))
				}
				if n == 0 {
					d.members++ // same members, other order: count it
				}
			}
		}
	}
	if d.boards == 0 {
		t.Fatal("nothing compared: the oracle has no board")
	}
	return d
}

// differingMembers counts the members that are on one board only or with
// another value or tie.
func differingMembers(got []store.Entry, want []oracle.Entry) int {
	type vt struct{ v, tie int64 }
	w := make(map[string]vt, len(want))
	for _, e := range want {
		w[e.Member] = vt{e.Value, e.Tie}
	}
	n := 0
	seen := map[string]bool{}
	for _, e := range got {
		seen[e.Member] = true
		if x, ok := w[e.Member]; !ok || x != (vt{e.Value, e.Tie}) {
			n++
		}
	}
	for m := range w {
		if !seen[m] {
			n++
		}
	}
	return n
}

// deadLetters reads the dead-letter topic: the reason of every original
// message (topic/partition/offset) and the count of letters by reason
// (letters are at least once: a message may be dead-lettered twice).
func deadLetters(t *testing.T, brokers []string, topic string) (where map[string]string, byReason map[string]int) {
	t.Helper()
	where, byReason = map[string]string{}, map[string]int{}
	for _, m := range testenv.ReadLog(t, brokers, topic) {
		h := map[string]string{}
		for _, x := range m.Headers {
			if _, dup := h[x.Key]; !dup {
				h[x.Key] = string(x.Value)
			}
		}
		if testing.Verbose() && h[headerReason] == "late" {
			t.Logf("dead letter at %d (%v): %q", m.Offset, m.Time.Format("15:04:05.000"), h)
		}
		where[h[headerTopic]+"/"+h[headerPartition]+"/"+h[headerOffset]] = h[headerReason]
		byReason[h[headerReason]]++
	}
	return where, byReason
}

// checkDeadLetters fails t unless the dead letters are exactly the
// messages the oracle rejected (late, out of range) or found invalid, each
// with the oracle's reason.
func checkDeadLetters(t *testing.T, got map[string]string, want oracle.LogResult) {
	t.Helper()
	expected := map[string]string{}
	for k, r := range want.Rejected {
		expected[k] = r
	}
	for k, r := range want.Invalid {
		expected[k] = r
	}
	var missing, extra, wrong []string
	for k, r := range expected {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k+" ("+r+")")
		case g != r:
			wrong = append(wrong, fmt.Sprintf("%s: %s, want %s", k, g, r))
		}
	}
	for k, r := range got {
		if _, ok := expected[k]; !ok {
			extra = append(extra, k+" ("+r+")")
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(wrong)
	if len(missing)+len(extra)+len(wrong) > 0 {
		for k, r := range got { // what the oracle knows of an extra one
			if _, ok := expected[k]; !ok && want.Explain != nil {
				t.Logf("extra dead letter %s (%s): the oracle saw %s", k, r, want.Explain(k))
			}
		}
		first := func(l []string) []string { return l[:min(len(l), 5)] } // the first 5, whole
		t.Errorf("dead letters differ from the oracle's %d: %d missing %q, %d extra %q, %d with another reason %q",
			len(expected), len(missing), first(missing), len(extra), first(extra), len(wrong), first(wrong))
	}
}

// reasonsLine formats counts by reason, sorted.
func reasonsLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// checkMarks fails t unless every stream time mark Redis holds (the sorted
// set <prefix>:wm:{topic|partition}, members "offset:ms", see
// store.Mark) is the log's stream time at its offset as the oracle
// computes it: a wrong mark makes every later verdict of its partition
// wrong, including those of messages whose boards have since expired.
func checkMarks(t *testing.T, rdb redis.UniversalClient, prefix string, log []oracle.LogMessage, res oracle.LogResult) {
	t.Helper()
	type tp struct {
		topic     string
		partition int
	}
	parts := map[tp]bool{}
	for _, m := range log {
		parts[tp{m.Topic, m.Partition}] = true
	}
	var bad []string
	n := 0
	for p := range parts {
		key := fmt.Sprintf("%s:wm:{%s|%d}", prefix, p.topic, p.partition)
		vs, err := rdb.ZRange(t.Context(), key, 0, -1).Result()
		if err != nil {
			t.Fatalf("reading the marks of %s/%d: %v", p.topic, p.partition, err)
		}
		for _, v := range vs {
			n++
			o, ms, ok := strings.Cut(v, ":")
			off, err1 := strconv.ParseInt(o, 10, 64)
			got, err2 := strconv.ParseInt(ms, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				bad = append(bad, fmt.Sprintf("%s/%d: malformed mark %q", p.topic, p.partition, v))
				continue
			}
			want := int64(-1)
			if st := res.StreamTime(p.topic, p.partition, off); !st.IsZero() {
				want = st.UnixMilli()
			}
			if got != want {
				bad = append(bad, fmt.Sprintf("%s/%d at %d: %s, want %s", p.topic, p.partition, off,
					time.UnixMilli(got).UTC().Format(time.RFC3339Nano), time.UnixMilli(want).UTC().Format(time.RFC3339Nano)))
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d of %d stream time marks differ from the log's: %q", len(bad), n, bad[:min(len(bad), 5)])
	}
}
