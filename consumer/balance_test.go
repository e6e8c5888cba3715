package consumer

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
)

// skewed is the benchmark's workload as the messages per partition of its
// three topics (1M events, keyed by anchor, kafka.Hash over 6 partitions).
var skewed = map[string][]int64{
	"like":    {70582, 237963, 124935, 72161, 102125, 92308},
	"comment": {19924, 68017, 35621, 20601, 29132, 26415},
	"gift":    {10149, 34267, 17623, 10274, 14460, 13443},
}

func partsOf(sizes map[string][]int64) ([]kafka.Partition, map[topicPart]int64) {
	var parts []kafka.Partition
	w := map[topicPart]int64{}
	for _, topic := range slices.Sorted(maps.Keys(sizes)) {
		for id, n := range sizes[topic] {
			parts = append(parts, kafka.Partition{Topic: topic, ID: id})
			w[topicPart{topic, id}] = n
		}
	}
	return parts, w
}

func membersOf(n int, topics ...string) []kafka.GroupMember {
	ms := make([]kafka.GroupMember, n)
	for i := range ms {
		ms[i] = kafka.GroupMember{ID: fmt.Sprintf("m%d", i), Topics: topics}
	}
	return ms
}

// loads returns each member's messages under weights, and checks that every
// partition is assigned exactly once.
func loads(t *testing.T, a kafka.GroupMemberAssignments, parts []kafka.Partition, weights map[topicPart]int64) map[string]int64 {
	t.Helper()
	seen := map[topicPart]string{}
	out := map[string]int64{}
	for id, byTopic := range a {
		out[id] += 0
		for topic, ps := range byTopic {
			for _, p := range ps {
				k := topicPart{topic, p}
				if other, dup := seen[k]; dup {
					t.Fatalf("%s/%d assigned to %s and %s", topic, p, other, id)
				}
				seen[k] = id
				out[id] += weights[k]
			}
		}
	}
	if len(seen) != len(parts) {
		t.Fatalf("%d of %d partitions assigned: %v", len(seen), len(parts), a)
	}
	return out
}

// TestAssignByWeight: the benchmark's partitions over 3 members. Range, the
// partitions listed in order, puts partitions 0-1 of every topic on one
// member (44.1% of the events); by weight the heaviest holds 33.9%.
func TestAssignByWeight(t *testing.T) {
	parts, w := partsOf(skewed)
	ms := membersOf(3, "comment", "gift", "like")
	rng := loads(t, kafka.RangeGroupBalancer{}.AssignGroups(ms, parts), parts, w)
	if got := rng["m0"]; got != 440902 {
		t.Fatalf("range: the first member holds %d messages, want 440902 (%v)", got, rng)
	}
	a := assignByWeight(ms, parts, w)
	got := loads(t, a, parts, w)
	want := map[string]int64{"m0": 331065, "m1": 339455, "m2": 329480} // a plain LPT recomputation
	if !maps.Equal(got, want) {
		t.Fatalf("by weight: %v, want %v (%v)", got, want, a)
	}
	// the same members in another order: the same assignment
	again := assignByWeight([]kafka.GroupMember{ms[2], ms[0], ms[1]}, parts, w)
	if fmt.Sprint(again) != fmt.Sprint(a) {
		t.Fatalf("members' order changed the assignment: %v, then %v", a, again)
	}
}

// TestAssignByWeightEmpty: without weights (empty topics, or offsets that
// could not be read) the partitions are spread by number; a member gets
// only partitions of the topics it consumes, and a topic nobody consumes
// is left out.
func TestAssignByWeightEmpty(t *testing.T) {
	parts, _ := partsOf(skewed)
	a := assignByWeight(membersOf(4, "comment", "gift", "like"), parts, nil)
	var counts []int
	for _, id := range slices.Sorted(maps.Keys(a)) {
		n := 0
		for _, ps := range a[id] {
			n += len(ps)
		}
		counts = append(counts, n)
	}
	if !slices.Equal(counts, []int{5, 5, 4, 4}) {
		t.Fatalf("partitions per member %v, want [5 5 4 4]: %v", counts, a)
	}

	ms := []kafka.GroupMember{{ID: "a", Topics: []string{"like"}}, {ID: "b", Topics: []string{"like", "gift"}}}
	parts, w := partsOf(map[string][]int64{"like": skewed["like"], "gift": skewed["gift"], "comment": skewed["comment"]})
	a = assignByWeight(ms, parts, w)
	if _, ok := a["a"]["gift"]; ok {
		t.Fatalf("member a got gift partitions it does not consume: %v", a)
	}
	if len(a["b"]["gift"]) != 6 || len(a["a"]["comment"])+len(a["b"]["comment"]) != 0 {
		t.Fatalf("want every gift partition on b and no comment partition assigned: %v", a)
	}
	l := map[string]int64{}
	for id, byTopic := range a {
		for topic, ps := range byTopic {
			for _, p := range ps {
				l[id] += w[topicPart{topic, p}]
			}
		}
	}
	if l["a"] != 380706 || l["b"] != 419584 {
		t.Fatalf("loads %v, want a 380706 and b 419584", l)
	}
}

// TestLoadBalancedGroup: a consumer of 3 workers joins a group over topics
// whose partition 0 holds 12 times what each other partition holds. The
// group uses the load assignment: each worker reads one partition 0 and
// five others (range would give one worker every partition 0 and 1).
func TestLoadBalancedGroup(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 6)
	var msgs []kafka.Message
	for _, topic := range f.Topics {
		for p := range 6 {
			n := 50
			if p == 0 {
				n = 600
			}
			for i := range n {
				msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte{byte('0' + p)}, Value: fmt.Appendf(nil, "%d", i)})
			}
		}
	}
	writeByKey(t, f, msgs)
	sink := &countingSink{inner: nopSink{}}
	cfg := f.consumerConfig()
	cfg.Workers = 3
	r := f.start(cfg, sink)
	f.waitReady(r)
	f.waitCommitted(30*time.Second, r)

	client := f.LagClient()
	var members []kafka.DescribeGroupsResponseMember
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := client.DescribeGroups(t.Context(), &kafka.DescribeGroupsRequest{GroupIDs: []string{f.Group}})
		if err == nil && len(res.Groups) == 1 && res.Groups[0].GroupState == "Stable" && len(res.Groups[0].Members) == 3 {
			members = res.Groups[0].Members
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not stable with 3 members: %+v, %v", f.Group, res, err)
		}
	}
	for _, m := range members {
		var got int64
		var desc []string
		for _, tp := range m.MemberAssignments.Topics {
			for _, p := range tp.Partitions {
				if p == 0 {
					got += 600
				} else {
					got += 50
				}
				desc = append(desc, fmt.Sprintf("%s/%d", tp.Topic, p))
			}
		}
		if got != 850 {
			t.Errorf("member %s holds %d messages (%v), want 850: one partition 0 and five others", m.MemberID, got, desc)
		}
	}
	if n := sink.n.Load(); n != int64(len(msgs)) {
		t.Fatalf("applied %d messages, want %d", n, len(msgs))
	}
}

// writeByKey writes msgs, each to the partition its key's first byte
// names ('0' is partition 0).
func writeByKey(t *testing.T, f *fixture, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(f.Broker.Addrs()...), BatchSize: 100, BatchTimeout: time.Millisecond,
		RequiredAcks: kafka.RequireAll, Transport: &kafka.Transport{},
		Balancer: kafka.BalancerFunc(func(m kafka.Message, ps ...int) int { return int(m.Key[0] - '0') })}
	defer w.Close()
	if err := w.WriteMessages(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// nopSink applies nothing and dead-letters nothing.
type nopSink struct{}

func (nopSink) Apply(context.Context, []kafka.Message) ([]DeadLetter, error) { return nil, nil }

// TestOlderMemberMakesRange: a member that offers only kafka-go's defaults
// (range, round robin), like an rankd from before the load assignment,
// joins the group first; a consumer of this rankd joins it. The group
// then uses range, the protocol both offer: each member holds three
// partitions of each topic, whatever their weights.
func TestOlderMemberMakesRange(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 6)
	var msgs []kafka.Message
	for _, topic := range f.Topics {
		for i := range 60 {
			msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte{'0'}, Value: fmt.Appendf(nil, "%d", i)})
		}
	}
	writeByKey(t, f, msgs)
	cfg := f.consumerConfig()
	old, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{ID: f.Group, Brokers: f.Broker.Addrs(), Topics: f.Topics,
		HeartbeatInterval: cfg.HeartbeatInterval, SessionTimeout: cfg.SessionTimeout, RebalanceTimeout: cfg.RebalanceTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); _ = old.Close() }()
	go func() { // hold each generation until the next rebalance
		for ctx.Err() == nil {
			gen, err := old.Next(ctx)
			if err != nil {
				continue
			}
			done := make(chan struct{})
			gen.Start(func(gctx context.Context) { <-gctx.Done(); close(done) })
			<-done
		}
	}()
	cfg.Workers = 1
	r := f.start(cfg, &countingSink{inner: nopSink{}})
	f.waitReady(r)

	client := f.LagClient()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := client.DescribeGroups(t.Context(), &kafka.DescribeGroupsRequest{GroupIDs: []string{f.Group}})
		if err == nil && len(res.Groups) == 1 && res.Groups[0].GroupState == "Stable" && len(res.Groups[0].Members) == 2 {
			// range: 3 partitions of each topic to each member (in the
			// order the broker lists them); by weight, one member would
			// hold two partitions 0 and the other the 16 others
			var got []int
			for _, m := range res.Groups[0].Members {
				for _, tp := range m.MemberAssignments.Topics {
					got = append(got, len(tp.Partitions))
				}
			}
			if want := []int{3, 3, 3, 3, 3, 3}; slices.Equal(got, want) {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("partitions per member and topic %v, want range's %v", got, want)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not stable with 2 members: %+v, %v", f.Group, res, err)
		}
	}
}

// TestAssignGroupsOffsetsUnreadable: when the leader cannot read the
// offsets (a broker that accepts connections and never answers),
// AssignGroups still assigns every partition, spread by number: 6 each to
// 3 members, once its own timeout (200 ms) ends the wait; the client's
// (30 s) would end it far later.
func TestAssignGroupsOffsetsUnreadable(t *testing.T) {
	parts, w := partsOf(skewed)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept, read nothing, answer nothing
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	b := loadBalancer{client: &kafka.Client{Addr: kafka.TCP(ln.Addr().String()), Transport: tr, Timeout: 30 * time.Second},
		log: testLogger(t), timeout: 200 * time.Millisecond}
	began := time.Now()
	a := b.AssignGroups(membersOf(3, "comment", "gift", "like"), parts)
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("AssignGroups took %v with a 200ms timeout", took)
	}
	loads(t, a, parts, w) // every partition once
	for id, byTopic := range a {
		n := 0
		for _, ps := range byTopic {
			n += len(ps)
		}
		if n != 6 {
			t.Errorf("member %s got %d partitions, want 6: %v", id, n, a)
		}
	}
}
