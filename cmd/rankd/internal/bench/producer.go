package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
)

// batchProducer writes a set of messages with one Produce request per
// leader broker, every partition of the set in it, as Kafka's own clients
// batch. kafka-go's Writer sends one request per partition: with 18
// partitions and a call every 10 ms, 1,800 requests a second, whose
// system calls cost the producer and the broker more CPU than the
// messages (profiles of the latency phase, 2026-11-29). Partitions are
// chosen as the Writer's kafka.Hash balancer chooses them, so that a
// key's messages (the markers') share a partition, in order.
type batchProducer struct {
	tr      *kafka.Transport
	client  *kafka.Client
	topics  map[string]*producerTopic
	timeout time.Duration
}

type producerTopic struct {
	ids     []int          // partition IDs, sorted (the balancer's input)
	leaders map[int]string // partition -> its leader's host:port
}

func newBatchProducer(brokers []string) *batchProducer {
	tr := &kafka.Transport{}
	return &batchProducer{tr: tr, client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 30 * time.Second},
		topics: map[string]*producerTopic{}, timeout: 10 * time.Second}
}

// Close closes the producer's connections.
func (p *batchProducer) Close() { p.tr.CloseIdleConnections() }

// topic returns the partitions and leaders of a topic, asked once.
func (p *batchProducer) topic(ctx context.Context, name string) (*producerTopic, error) {
	if t := p.topics[name]; t != nil {
		return t, nil
	}
	md, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{name}})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", name, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
		var terr error
		if len(md.Topics) == 1 {
			terr = md.Topics[0].Error
		}
		return nil, fmt.Errorf("metadata of %s: no partitions (%v)", name, terr)
	}
	t := &producerTopic{leaders: map[int]string{}}
	for _, pt := range md.Topics[0].Partitions {
		t.ids = append(t.ids, pt.ID)
		t.leaders[pt.ID] = net.JoinHostPort(pt.Leader.Host, strconv.Itoa(pt.Leader.Port))
	}
	slices.Sort(t.ids)
	p.topics[name] = t
	return t, nil
}

// Write writes msgs (Topic, Key, Value) and returns once every leader
// acknowledged them (acks=all), or with the first error. A failure is not
// retried.
func (p *batchProducer) Write(ctx context.Context, msgs []kafka.Message) error {
	type tp struct {
		topic     string
		partition int
	}
	var bal kafka.Hash
	now := time.Now()
	recs := map[tp][]protocol.Record{}
	leaderOf := map[tp]string{}
	var order []tp
	for i := range msgs {
		m := &msgs[i]
		t, err := p.topic(ctx, m.Topic)
		if err != nil {
			return err
		}
		k := tp{m.Topic, bal.Balance(*m, t.ids...)}
		if _, ok := recs[k]; !ok {
			order = append(order, k)
			leaderOf[k] = t.leaders[k.partition]
		}
		recs[k] = append(recs[k], protocol.Record{Time: now, Key: protocol.NewBytes(m.Key), Value: protocol.NewBytes(m.Value)})
	}
	slices.SortFunc(order, func(a, b tp) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	reqs := map[string]*produceapi.Request{}
	var leaders []string
	for _, k := range order {
		l := leaderOf[k]
		r := reqs[l]
		if r == nil {
			r = &produceapi.Request{Acks: int16(kafka.RequireAll), Timeout: int32(p.timeout.Milliseconds())}
			reqs[l] = r
			leaders = append(leaders, l)
		}
		if n := len(r.Topics); n == 0 || r.Topics[n-1].Topic != k.topic {
			r.Topics = append(r.Topics, produceapi.RequestTopic{Topic: k.topic})
		}
		t := &r.Topics[len(r.Topics)-1]
		t.Partitions = append(t.Partitions, produceapi.RequestPartition{Partition: int32(k.partition),
			RecordSet: protocol.RecordSet{Records: protocol.NewRecordReader(recs[k]...)}})
	}
	errs := make([]error, len(leaders))
	done := make(chan int, len(leaders))
	for i, l := range leaders {
		go func() {
			errs[i] = p.send(ctx, l, reqs[l])
			done <- i
		}()
	}
	for range leaders {
		<-done
	}
	return errors.Join(errs...)
}

// send sends one Produce request to a leader and checks every partition's
// answer.
func (p *batchProducer) send(ctx context.Context, leader string, r *produceapi.Request) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout+5*time.Second)
	defer cancel()
	m, err := p.tr.RoundTrip(ctx, kafka.TCP(leader), r)
	if err != nil {
		return fmt.Errorf("producing to %s: %w", leader, err)
	}
	res, ok := m.(*produceapi.Response)
	if !ok {
		return fmt.Errorf("producing to %s: answer %T", leader, m)
	}
	var errs []error
	for _, t := range res.Topics {
		for _, pt := range t.Partitions {
			if pt.ErrorCode != 0 {
				errs = append(errs, fmt.Errorf("%s/%d: %w", t.Topic, pt.Partition, kafka.Error(pt.ErrorCode)))
			}
		}
	}
	if n := len(r.Topics); len(res.Topics) != n {
		errs = append(errs, fmt.Errorf("producing to %s: %d topics answered, %d sent", leader, len(res.Topics), n))
	}
	return errors.Join(errs...)
}
