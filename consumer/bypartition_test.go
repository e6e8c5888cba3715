package consumer

import (
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestByPartition checks the order Apply gives a batch: the messages of
// each partition together (topic, then partition), each partition's in
// their order, the batch itself untouched; none when already so.
func TestByPartition(t *testing.T) {
	var s RankingSink
	msgs := []kafka.Message{
		{Topic: "like", Partition: 1, Offset: 10}, {Topic: "gift", Partition: 0, Offset: 5},
		{Topic: "like", Partition: 0, Offset: 7}, {Topic: "like", Partition: 1, Offset: 11},
		{Topic: "gift", Partition: 0, Offset: 6}, {Topic: "comment", Partition: 2, Offset: 1},
		{Topic: "like", Partition: 0, Offset: 8},
	}
	orig := fmt.Sprint(msgs)
	got := s.byPartition(msgs)
	if got == nil {
		t.Fatal("an interleaved batch was not reordered")
	}
	var order []string
	for _, m := range *got {
		order = append(order, fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset))
	}
	want := "[comment/2@1 gift/0@5 gift/0@6 like/0@7 like/0@8 like/1@10 like/1@11]"
	if fmt.Sprint(order) != want {
		t.Errorf("order %v, want %s", order, want)
	}
	if fmt.Sprint(msgs) != orig {
		t.Errorf("the batch itself changed: %v", msgs)
	}
	if again := s.byPartition(*got); again != nil {
		t.Errorf("a grouped batch was copied again")
	}
}

// BenchmarkByPartition groups a 2,000-message batch that interleaves 18
// partitions in chunks of 12 (a live worker's batch).
func BenchmarkByPartition(b *testing.B) {
	var s RankingSink
	var msgs []kafka.Message
	off := map[string]int64{}
	for len(msgs) < 2000 {
		for _, topic := range []string{"like", "comment", "gift"} {
			for p := 0; p < 6; p++ {
				k := fmt.Sprint(topic, p)
				for range 12 {
					msgs = append(msgs, kafka.Message{Topic: topic, Partition: p, Offset: off[k], Value: make([]byte, 100)})
					off[k]++
				}
			}
		}
	}
	msgs = msgs[:2000]
	b.ReportAllocs()
	for b.Loop() {
		out := s.byPartition(msgs)
		clear(*out)
		s.sorted.Put(out)
	}
}
