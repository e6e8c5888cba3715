package consumer

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// loadBalancer is the group's partition assignment: each partition goes to
// a member by the messages Kafka holds of it (its last offset minus its
// first), heaviest first, each to the member with the least weight so far
// (longest processing time first).
//
// Events are keyed by anchor or room, and a few hot keys carry much of the
// traffic: in the benchmark's workload one partition of six holds a third
// of its topic. Every topic is keyed alike, so the hot partition has the
// same number in each, and kafka-go's range assignment (two consecutive
// partitions of every topic to each of 3 members, in the order the
// leader's metadata lists them) gave the members 46.3%, 29.0% and 24.7% of
// the events in a logged drain (44.1% at most with the partitions listed
// in order); a drain then ends with one worker applying alone. What a
// partition holds is its share of the traffic over the retention, so it
// balances a backlog and live traffic alike.
//
// The group's leader computes the assignment (AssignGroups). When the
// offsets cannot be read within timeout (balanceTimeout, or half the
// group's rebalance timeout if that is shorter), every partition weighs the
// same and the assignment balances their number. Members that do not
// offer this protocol (an older rankd) make the group use range, which
// every member offers after it.
type loadBalancer struct {
	client  *kafka.Client
	log     *slog.Logger
	timeout time.Duration
}

// balanceProtocol is the assignment protocol's name in the group.
const balanceProtocol = "rankd-load"

// balanceTimeout bounds the leader's offset requests during a rebalance
// (and half the rebalance timeout: the members wait for the assignment).
const balanceTimeout = 5 * time.Second

func (loadBalancer) ProtocolName() string { return balanceProtocol }

func (loadBalancer) UserData() ([]byte, error) { return nil, nil }

func (b loadBalancer) AssignGroups(members []kafka.GroupMember, parts []kafka.Partition) kafka.GroupMemberAssignments {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	weights, err := partitionSizes(ctx, b.client, parts)
	if err != nil {
		b.log.Warn("reading the partitions' offsets for the assignment failed; assigning by their number", "err", err)
		weights = nil
	}
	a := assignByWeight(members, parts, weights)
	b.log.Debug("assigned partitions", "members", len(members), "partitions", len(parts), "weights", len(weights))
	return a
}

// partitionSizes returns the messages Kafka holds of each partition.
func partitionSizes(ctx context.Context, client *kafka.Client, parts []kafka.Partition) (map[topicPart]int64, error) {
	ids := map[string][]int{}
	for _, p := range parts {
		ids[p.Topic] = append(ids[p.Topic], p.ID)
	}
	starts, ends, err := logBounds(ctx, client, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[topicPart]int64, len(parts))
	for k, end := range ends {
		if start, ok := starts[k]; ok && end > start {
			out[k] = end - start
		}
	}
	return out, nil
}

// assignByWeight assigns every partition to one member consuming its
// topic: heaviest first (weights; a partition missing from them weighs
// nothing), each to the member with the least weight so far, then the
// fewest partitions, then the first in members' order by ID. Every partition
// also weighs one message more than it holds, so that empty partitions are
// spread by number. Every member gets an entry, if only an empty one.
func assignByWeight(members []kafka.GroupMember, parts []kafka.Partition, weights map[topicPart]int64) kafka.GroupMemberAssignments {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b kafka.GroupMember) int { return cmp.Compare(a.ID, b.ID) })
	type load struct{ weight, n int64 }
	loads := make([]load, len(ms))
	out := kafka.GroupMemberAssignments{}
	for _, m := range ms {
		out[m.ID] = map[string][]int{}
	}
	ps := slices.Clone(parts)
	w := func(p kafka.Partition) int64 { return weights[topicPart{p.Topic, p.ID}] + 1 }
	slices.SortFunc(ps, func(a, b kafka.Partition) int {
		if c := cmp.Compare(w(b), w(a)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	for _, p := range ps {
		best := -1
		for i, m := range ms {
			if !slices.Contains(m.Topics, p.Topic) {
				continue
			}
			if best < 0 || loads[i].weight < loads[best].weight ||
				loads[i].weight == loads[best].weight && loads[i].n < loads[best].n {
				best = i
			}
		}
		if best < 0 {
			continue // no member consumes the topic
		}
		loads[best].weight += w(p)
		loads[best].n++
		id := ms[best].ID
		out[id][p.Topic] = append(out[id][p.Topic], p.ID)
	}
	for _, byTopic := range out {
		for _, ids := range byTopic {
			slices.Sort(ids)
		}
	}
	return out
}
