package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
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

// producerAttempts is how many times Write sends a partition's messages
// whose leader answered with a retriable error (a leader moving, a
// timeout) or not at all, waiting 100 ms more before each attempt (at most
// 1 s), as kafka-go's Writer retries by default; a retry after a lost
// answer may write them twice, which the dedupe absorbs.
const producerAttempts = 10

// tp names a topic partition.
type tp struct {
	topic     string
	partition int
}

// Write writes msgs (Topic, Key, Value) and returns once every leader
// acknowledged them (acks=all), or with the first error that is not
// retriable, or the last one after producerAttempts. A topic's
// partitions are asked once, at its first Write, and that is not retried:
// the benchmark creates its topics before it produces.
func (p *batchProducer) Write(ctx context.Context, msgs []kafka.Message) error {
	var bal kafka.Hash
	parts := map[tp][]*kafka.Message{}
	var pending []tp
	for i := range msgs {
		m := &msgs[i]
		t, err := p.topic(ctx, m.Topic)
		if err != nil {
			return err
		}
		k := tp{m.Topic, bal.Balance(*m, t.ids...)}
		if _, ok := parts[k]; !ok {
			pending = append(pending, k)
		}
		parts[k] = append(parts[k], m)
	}
	slices.SortFunc(pending, func(a, b tp) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	now := time.Now()
	for attempt := 1; ; attempt++ {
		failed, err := p.write(ctx, parts, pending, now)
		if err == nil || failed == nil || attempt == producerAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		}
		clear(p.topics) // the leaders may have moved
		pending = failed
	}
}

// write sends the messages of the pending partitions (in order) in one
// request per leader and returns the partitions to send again (a
// retriable error, or no answer) with the errors; nil partitions with an
// error when one is not retriable.
func (p *batchProducer) write(ctx context.Context, parts map[tp][]*kafka.Message, pending []tp, now time.Time) ([]tp, error) {
	reqs := map[string]*produceapi.Request{}
	sent := map[string][]tp{}
	var leaders []string
	for _, k := range pending {
		t, err := p.topic(ctx, k.topic)
		if err != nil {
			return pending, err
		}
		l := t.leaders[k.partition]
		r := reqs[l]
		if r == nil {
			r = &produceapi.Request{Acks: int16(kafka.RequireAll), Timeout: int32(p.timeout.Milliseconds())}
			reqs[l] = r
			leaders = append(leaders, l)
		}
		if n := len(r.Topics); n == 0 || r.Topics[n-1].Topic != k.topic {
			r.Topics = append(r.Topics, produceapi.RequestTopic{Topic: k.topic})
		}
		recs := make([]protocol.Record, len(parts[k]))
		for i, m := range parts[k] {
			// (a record's key and value are readers: new ones each attempt)
			recs[i] = protocol.Record{Time: now, Key: protocol.NewBytes(m.Key), Value: protocol.NewBytes(m.Value)}
		}
		t2 := &r.Topics[len(r.Topics)-1]
		t2.Partitions = append(t2.Partitions, produceapi.RequestPartition{Partition: int32(k.partition),
			RecordSet: protocol.RecordSet{Records: protocol.NewRecordReader(recs...)}})
		sent[l] = append(sent[l], k)
	}
	type answer struct {
		failed []tp
		err    error
	}
	answers := make([]answer, len(leaders))
	var wg sync.WaitGroup
	for i, l := range leaders {
		wg.Go(func() { answers[i].failed, answers[i].err = p.send(ctx, l, reqs[l], sent[l]) })
	}
	wg.Wait()
	var failed []tp
	var errs []error
	fatal := false
	for _, a := range answers {
		failed = append(failed, a.failed...)
		errs = append(errs, a.err)
		fatal = fatal || a.err != nil && a.failed == nil
	}
	if fatal {
		failed = nil
	}
	return failed, errors.Join(errs...)
}

// send sends one Produce request of the partitions ks to a leader and
// checks every partition's answer: it returns the partitions to send
// again, and every error.
func (p *batchProducer) send(ctx context.Context, leader string, r *produceapi.Request, ks []tp) ([]tp, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout+5*time.Second)
	defer cancel()
	m, err := p.tr.RoundTrip(ctx, kafka.TCP(leader), r)
	if err != nil {
		return ks, fmt.Errorf("producing to %s: %w", leader, err)
	}
	res, ok := m.(*produceapi.Response)
	if !ok {
		return nil, fmt.Errorf("producing to %s: answer %T", leader, m)
	}
	answered := map[tp]bool{}
	var again []tp
	var errs []error
	for _, t := range res.Topics {
		for _, pt := range t.Partitions {
			k := tp{t.Topic, int(pt.Partition)}
			answered[k] = true
			if pt.ErrorCode != 0 {
				kerr := kafka.Error(pt.ErrorCode)
				if kerr.Temporary() {
					again = append(again, k)
				}
				errs = append(errs, fmt.Errorf("%s/%d: %w", t.Topic, pt.Partition, kerr))
			}
		}
	}
	for _, k := range ks {
		if !answered[k] {
			again = append(again, k)
			errs = append(errs, fmt.Errorf("producing to %s: no answer for %s/%d", leader, k.topic, k.partition))
		}
	}
	if len(errs) > 0 && len(again) < len(errs) {
		return nil, errors.Join(errs...) // one is not retriable
	}
	return again, errors.Join(errs...)
}
