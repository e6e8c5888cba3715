package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Tests of the broker's consumer group coordinator as kafka-go's
// ConsumerGroup (the API rankd's consumer uses) sees it.

// refusedSessionTimeout is the classifier proposed for the consumer: the
// broker refused the group session timeout (INVALID_SESSION_TIMEOUT, code
// 26: outside the broker's group.min.session.timeout.ms ..
// group.max.session.timeout.ms). Retrying cannot help; kafka-go's
// ConsumerGroup.Next returns it on every join attempt.
func refusedSessionTimeout(err error) bool { return errors.Is(err, kafka.InvalidSessionTimeout) }

// TestGroupRefusesShortSessionTimeout: a broker with Kafka's default
// minimum session timeout (6 s) refuses a 1 s one, and ConsumerGroup.Next
// returns kafka.InvalidSessionTimeout itself (an unwrapped kafka.Error).
func TestGroupRefusesShortSessionTimeout(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"),
		kfake.GroupMinSessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: "refused", Brokers: c.ListenAddrs(), Topics: []string{"t"},
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: time.Second,
		JoinGroupBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 2 { // every attempt, not just the first
		gen, err := cg.Next(ctx)
		if gen != nil || !errors.Is(err, kafka.InvalidSessionTimeout) {
			t.Fatalf("attempt %d: Next = %v, %v (%T); want kafka.InvalidSessionTimeout", i+1, gen, err, err)
		}
		var kerr kafka.Error
		if !errors.As(err, &kerr) || kerr != kafka.InvalidSessionTimeout || int(kerr) != 26 || kerr.Temporary() {
			t.Fatalf("attempt %d: error %#v (%v), want kafka.Error(26), not temporary", i+1, err, err)
		}
		if !refusedSessionTimeout(err) || !refusedSessionTimeout(fmt.Errorf("joining: %w", err)) {
			t.Fatalf("refusedSessionTimeout(%v) = false", err)
		}
	}
	for _, other := range []error{nil, kafka.RebalanceInProgress, kafka.UnknownMemberId, context.DeadlineExceeded, errors.New("invalid session timeout")} {
		if refusedSessionTimeout(other) {
			t.Errorf("refusedSessionTimeout(%v) = true", other)
		}
	}

	// 6 s is accepted.
	ok, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: "accepted", Brokers: c.ListenAddrs(), Topics: []string{"t"},
		SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second, RebalanceTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	gen, err := ok.Next(ctx)
	if err != nil {
		t.Fatalf("session timeout 6s: %v", err)
	}
	if n := len(gen.Assignments["t"]); n != 2 {
		t.Errorf("session timeout 6s: %d partitions assigned, want 2", n)
	}
}
