package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/testcontainers/testcontainers-go"
	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rankd/rankd/internal/testenv/kgroup"
)

const (
	// kafkaImage is the image used when a Docker engine is available.
	kafkaImage = "confluentinc/confluent-local:7.5.0"

	// defaultPartitions is the partition count of auto-created topics and of
	// CreateTopic with no count.
	defaultPartitions = 6

	// groupMinSessionTimeout lets tests use short group session timeouts, so
	// that a crashed member leaves its group quickly (kfake's default
	// minimum is 6 s).
	groupMinSessionTimeout = 100 * time.Millisecond

	topicReadyTimeout = 30 * time.Second
)

// KafkaOptions configures a dedicated broker started by NewKafka.
type KafkaOptions struct {
	// DataDir, if set, keeps the broker's messages and committed offsets in
	// this directory, so that Broker.Restart (or a later broker on the same
	// directory) finds them. Empty keeps everything in memory.
	DataDir string

	// SeedTopics are created at start, each with its partition count (0 for
	// Partitions).
	SeedTopics map[string]int

	// Partitions is the partition count of auto-created topics and of
	// CreateTopic with 0 partitions. Zero means 6.
	Partitions int

	// KfakeDeadMembers leaves kfake's group coordinator as it is: a member
	// killed while its JoinGroup or SyncGroup is parked may then stay in
	// the group for good, holding its partitions (see package kgroup). By
	// default the broker expires such members by their session timeout,
	// as Kafka does; only a test showing the defect sets this.
	KfakeDeadMembers bool
}

// Broker is a Kafka-protocol broker for tests: franz-go's kfake in process,
// a container, or the brokers named by KAFKA_BROKERS. Topics are created
// automatically on first use by clients that ask for it (kafka-go's
// Writer.AllowAutoTopicCreation), or explicitly with CreateTopic.
type Broker struct {
	addrs []string

	// Set only for an in-process broker.
	mu        sync.Mutex
	cluster   *kfake.Cluster
	opts      KafkaOptions
	dedicated bool
	extra     []kfake.Opt // TLS and SASL (NewSecureKafka)
	reaper    *kgroup.Reaper
}

var sharedKafka struct {
	once sync.Once
	b    *Broker
	err  error
}

// Kafka returns the broker shared by the test binary, starting it on first
// use: the comma-separated KAFKA_BROKERS if set, else a container when a
// Docker engine is healthy, else kfake in process on a free loopback port
// (auto topic creation on, 6 partitions by default, group session timeouts
// down to 100 ms allowed). Tests sharing it use their own topics and groups
// (Topic, Prefix). Main stops it.
func Kafka(t testing.TB) *Broker {
	t.Helper()
	sharedKafka.once.Do(func() {
		sharedKafka.b, sharedKafka.err = startSharedKafka()
	})
	require(t, sharedKafka.err)
	return sharedKafka.b
}

func startSharedKafka() (*Broker, error) {
	if env := os.Getenv("KAFKA_BROKERS"); env != "" {
		var addrs []string
		for a := range strings.SplitSeq(env, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		return &Broker{addrs: addrs}, nil
	}
	if DockerHealthy() {
		if b, err := startKafkaContainer(); err == nil {
			return b, nil
		}
		// Fall back to kfake, which always works.
	}
	b := &Broker{}
	if err := b.startKfake(0); err != nil {
		return nil, err
	}
	atExit(b.close)
	return b, nil
}

func startKafkaContainer() (*Broker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ctr, err := tckafka.Run(ctx, kafkaImage)
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("starting kafka container: %w", err)
	}
	addrs, err := ctr.Brokers(ctx)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("kafka container address: %w", err)
	}
	atExit(func() { _ = testcontainers.TerminateContainer(ctr) })
	return &Broker{addrs: addrs}, nil
}

// NewKafka starts a kfake broker in process for t alone, on a free loopback
// port, and closes it at t's cleanup. With opts.DataDir it can be restarted
// without losing messages or committed offsets.
func NewKafka(t testing.TB, opts KafkaOptions) *Broker {
	t.Helper()
	b := &Broker{opts: opts, dedicated: true}
	if err := b.startKfake(0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b
}

// startKfake starts the in-process broker on port (0 for a free one). Its
// callers own b or hold b.mu.
func (b *Broker) startKfake(port int) error {
	partitions := b.opts.Partitions
	if partitions <= 0 {
		partitions = defaultPartitions
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions),
		kfake.GroupMinSessionTimeout(groupMinSessionTimeout),
	}
	if b.opts.DataDir != "" {
		opts = append(opts, kfake.DataDir(b.opts.DataDir))
	}
	for topic, n := range b.opts.SeedTopics {
		opts = append(opts, kfake.SeedTopics(int32(n), topic))
	}
	opts = append(opts, b.extra...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("starting kfake broker: %w", err)
	}
	b.cluster = c
	b.reaper = nil
	if !b.opts.KfakeDeadMembers {
		b.reaper = kgroup.ExpireDeadMembers(c)
	}
	if b.addrs == nil { // a restart keeps the port, and so the addresses
		b.addrs = c.ListenAddrs()
	}
	return nil
}

// close closes the in-process broker, if any.
func (b *Broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reaper != nil {
		b.reaper.Stop()
	}
	if b.cluster != nil {
		b.cluster.Close()
	}
}

// Addrs returns the bootstrap addresses (host:port) of the broker.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Restart closes a broker from NewKafka and starts it again on the same
// port; with KafkaOptions.DataDir its messages and committed offsets
// survive. Clients reconnect by themselves.
func (b *Broker) Restart() error {
	if !b.dedicated {
		return errors.New("testenv: only a broker from NewKafka can be restarted")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, p, err := net.SplitHostPort(b.addrs[0])
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return err
	}
	if b.reaper != nil {
		b.reaper.Stop()
	}
	b.cluster.Close()
	return b.startKfake(port)
}

// Topic returns a topic name unique to this call, made of base, t's name and
// a counter. It does not create the topic.
func (b *Broker) Topic(t testing.TB, base string) string {
	t.Helper()
	return base + "-" + uniqueName(t.Name())
}

// CreateTopic creates topic name with the given number of partitions (0 for
// the broker's default) and returns once every partition has a leader. It
// goes through kafka-go's DefaultTransport, which caches metadata for 6 s:
// creating the topic any other way (kfake's API, kcat) would leave Writers
// on that transport failing with Unknown Topic Or Partition until the cache
// expires.
func (b *Broker) CreateTopic(t testing.TB, name string, partitions int) {
	t.Helper()
	if partitions <= 0 {
		partitions = b.opts.Partitions
		if partitions <= 0 {
			partitions = defaultPartitions
		}
	}
	if err := createTopic(t.Context(), b.Addrs(), name, partitions); err != nil {
		t.Fatal(err)
	}
}

// createTopic creates a topic through kafka-go and waits until its metadata
// shows every partition with a leader.
func createTopic(ctx context.Context, addrs []string, name string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, topicReadyTimeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: topicReadyTimeout}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}},
	})
	if err == nil {
		err = resp.Errors[name]
	}
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", name, err)
	}
	for {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{name}})
		if err == nil && topicReady(md, name, partitions) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready: %v", name, errors.Join(err, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicReady(md *kafka.MetadataResponse, name string, partitions int) bool {
	for _, tp := range md.Topics {
		if tp.Name != name || tp.Error != nil || len(tp.Partitions) != partitions {
			continue
		}
		for _, p := range tp.Partitions {
			if p.Error != nil || p.Leader.Host == "" {
				return false
			}
		}
		return true
	}
	return false
}

// DeleteRecords deletes the messages of topic/partition before offset, as
// retention would.
func (b *Broker) DeleteRecords(t testing.TB, topic string, partition int32, before int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, before
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if e := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); e != nil {
		t.Fatalf("deleting the records of %s/%d before %d: %v", topic, partition, before, e)
	}
}
