package consumer

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/segmentio/kafka-go"
)

// PartitionLag is how far a consumer group is behind on one partition.
type PartitionLag struct {
	Topic     string
	Partition int
	// End is the log end offset: the offset the next produced message gets.
	End int64
	// Committed is the group's committed offset (the next message it will
	// read), or -1 when it has committed nothing.
	Committed int64
	// Lag is End - Committed, or End minus the log start offset when
	// nothing is committed.
	Lag int64
}

// GroupLag returns the lag of group on every partition of topics, sorted by
// topic and partition: log end offsets (ListOffsets) minus the group's
// committed offsets (OffsetFetch). Unlike kafka-go's Reader.Stats().Lag,
// which only sees the partitions one member reads, this is the group's total
// lag.
func GroupLag(ctx context.Context, client *kafka.Client, group string, topics []string) ([]PartitionLag, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("reading metadata: %w", err)
	}
	parts := map[string][]int{}
	for _, t := range md.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("metadata of topic %s: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			parts[t.Name] = append(parts[t.Name], p.ID)
		}
	}
	starts, ends, err := logBounds(ctx, client, parts)
	if err != nil {
		return nil, err
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: parts})
	if err == nil {
		err = committed.Error
	}
	if err != nil {
		return nil, fmt.Errorf("fetching committed offsets of group %s: %w", group, err)
	}
	var out []PartitionLag
	for topic, ps := range parts {
		got := map[int]int64{}
		for _, p := range committed.Topics[topic] {
			if p.Error != nil {
				return nil, fmt.Errorf("committed offset of %s/%d: %w", topic, p.Partition, p.Error)
			}
			got[p.Partition] = p.CommittedOffset
		}
		for _, p := range ps {
			k := topicPart{topic, p}
			l := PartitionLag{Topic: topic, Partition: p, End: ends[k], Committed: -1}
			if c, ok := got[p]; ok && c >= 0 {
				l.Committed = c
				l.Lag = l.End - c
			} else {
				l.Lag = l.End - starts[k]
			}
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

type topicPart struct {
	topic     string
	partition int
}

// logBounds returns the first and the last (next) offset Kafka holds of
// each partition of parts (topic -> IDs).
func logBounds(ctx context.Context, client *kafka.Client, parts map[string][]int) (starts, ends map[topicPart]int64, err error) {
	first := map[string][]kafka.OffsetRequest{}
	last := map[string][]kafka.OffsetRequest{}
	for topic, ids := range parts {
		for _, id := range ids {
			first[topic] = append(first[topic], kafka.FirstOffsetOf(id))
			last[topic] = append(last[topic], kafka.LastOffsetOf(id))
		}
	}
	// Two requests: a broker may refuse a partition twice in one.
	if starts, err = listOffsets(ctx, client, first, true); err != nil {
		return nil, nil, err
	}
	if ends, err = listOffsets(ctx, client, last, false); err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}

func listOffsets(ctx context.Context, client *kafka.Client, reqs map[string][]kafka.OffsetRequest, first bool) (map[topicPart]int64, error) {
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: reqs})
	if err != nil {
		return nil, fmt.Errorf("listing offsets: %w", err)
	}
	out := map[topicPart]int64{}
	var errs []error
	for topic, ps := range resp.Topics {
		for _, p := range ps {
			if p.Error != nil {
				errs = append(errs, fmt.Errorf("offsets of %s/%d: %w", topic, p.Partition, p.Error))
				continue
			}
			off := p.LastOffset
			if first {
				off = p.FirstOffset
			}
			out[topicPart{topic, p.Partition}] = off
		}
	}
	return out, errors.Join(errs...)
}
