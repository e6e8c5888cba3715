package kgroup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestExpireStableDeadMember: with the keep-alives off, a member killed
// while its JoinGroup was parked ends up in the Stable group with no
// session timer (kfake's defect 1: whether it does depends on which ready
// case a select picks, about every other time); the reaper makes it leave
// by its session timeout, and the other member gets every partition. The
// scenario is repeated until the reaper had to act (at most 10 times).
func TestExpireStableDeadMember(t *testing.T) {
	keepAlive = false
	defer func() { keepAlive = true }()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "t"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := ExpireDeadMembers(c)
	defer r.Stop()
	for i := range 10 {
		before := r.Stats().Expired
		took := deadMemberScenario(t, c, fmt.Sprintf("g%d", i))
		expired := r.Stats().Expired - before
		t.Logf("attempt %d: all 6 partitions back %.2fs after the kill; the reaper expired %d member(s)", i+1, took.Seconds(), expired)
		if expired > 0 {
			return
		}
	}
	t.Fatal("in 10 attempts kfake never left the dead member without a session timer: the test did not reach the defect")
}

// deadMemberScenario: a member holds every partition of t, a second one
// joins and is killed while its JoinGroup is parked; it returns how long
// after the kill the first member holds every partition again, failing t
// beyond heartbeat + session timeout + 1 s.
func deadMemberScenario(t *testing.T, c *kfake.Cluster, group string) time.Duration {
	const (
		session   = time.Second
		heartbeat = 500 * time.Millisecond
	)
	var mu sync.Mutex
	var conns []net.Conn
	dead := false
	killable := &kafka.Dialer{Timeout: 5 * time.Second, DialFunc: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if dead {
			return nil, errors.New("killed")
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			conns = append(conns, conn)
		}
		return conn, err
	}}
	newGroup := func(d *kafka.Dialer) *kafka.ConsumerGroup {
		cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
			ID: group, Brokers: c.ListenAddrs(), Topics: []string{"t"}, Dialer: d,
			SessionTimeout: session, HeartbeatInterval: heartbeat, RebalanceTimeout: 10 * time.Second,
			JoinGroupBackoff: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { go cg.Close() })
		return cg
	}
	partitions := make(chan int, 10)
	first := newGroup(nil)
	go func() {
		for {
			gen, err := first.Next(context.Background())
			if errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			if err == nil {
				partitions <- len(gen.Assignments["t"])
			}
		}
	}()
	if n := <-partitions; n != 6 {
		t.Fatalf("first generation: %d partitions, want 6", n)
	}

	newGroup(killable)
	for gi := c.GroupInfo(group); gi == nil || len(gi.Members) < 2; gi = c.GroupInfo(group) {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	dead = true
	for _, conn := range conns {
		_ = conn.Close()
	}
	mu.Unlock()
	killed := time.Now()

	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-partitions:
			if n != 6 {
				continue // the generation with the dead member
			}
			took := time.Since(killed)
			if took > heartbeat+session+time.Second {
				t.Errorf("%s: took %.2fs, beyond heartbeat + session timeout + 1s", group, took.Seconds())
			}
			return took
		case <-deadline:
			t.Fatalf("%s: no generation with all 6 partitions 10s after the kill; group %+v", group, c.GroupInfo(group))
		}
	}
}
