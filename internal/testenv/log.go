package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking/ingest"
)

// ReadLog reads every message of topics, every partition from its first
// offset to its current end, as the oracle's log.
func ReadLog(t testing.TB, addrs []string, topics ...string) []oracle.LogMessage {
	t.Helper()
	log, err := readLog(t.Context(), addrs, topics)
	if err != nil {
		t.Fatalf("reading the log: %v", err)
	}
	return log
}

func readLog(ctx context.Context, addrs []string, topics []string) ([]oracle.LogMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(addrs...), Transport: tr, Timeout: 30 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	var out []oracle.LogMessage
	for _, tm := range md.Topics {
		if tm.Error != nil {
			return nil, fmt.Errorf("topic %s: %w", tm.Name, tm.Error)
		}
		req := map[string][]kafka.OffsetRequest{}
		for _, p := range tm.Partitions {
			req[tm.Name] = append(req[tm.Name], kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
		}
		offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
		if err != nil {
			return nil, err
		}
		for _, po := range offs.Topics[tm.Name] {
			if po.Error != nil {
				return nil, fmt.Errorf("offsets of %s/%d: %w", tm.Name, po.Partition, po.Error)
			}
			if po.LastOffset <= po.FirstOffset {
				continue
			}
			msgs, err := readPartition(ctx, addrs, tm.Name, po.Partition, po.FirstOffset, po.LastOffset)
			if err != nil {
				return nil, err
			}
			out = append(out, msgs...)
		}
	}
	return out, nil
}

func readPartition(ctx context.Context, addrs []string, topic string, partition int, first, end int64) ([]oracle.LogMessage, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, Partition: partition,
		MaxWait: 100 * time.Millisecond, MaxBytes: 8 << 20})
	defer r.Close()
	if err := r.SetOffset(first); err != nil {
		return nil, err
	}
	var out []oracle.LogMessage
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading %s/%d: %w", topic, partition, err)
		}
		lm := oracle.LogMessage{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Value: m.Value, Time: m.Time}
		for _, h := range m.Headers {
			lm.Headers = append(lm.Headers, ingest.Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, lm)
		if m.Offset >= end-1 {
			return out, nil
		}
	}
}
