package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
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

// killableDialer dials the broker for one simulated process; kill closes
// every connection it made and fails every later dial, as SIGKILL would:
// the member sends no LeaveGroup and no heartbeat again.
type killableDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (d *killableDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("killed")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, conn)
	}
	return conn, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// groupMember is one kafka-go ConsumerGroup that takes every generation it
// is given and holds it until the group rebalances.
type groupMember struct {
	cg     *kafka.ConsumerGroup
	dialer *killableDialer

	mu   sync.Mutex
	gens []memberGen
	errs []error
}

type memberGen struct {
	at         time.Time
	id         int32
	partitions int
}

func startGroupMember(t *testing.T, addrs []string, group, topic string, session, heartbeat, rebalance time.Duration) *groupMember {
	m := &groupMember{dialer: &killableDialer{}}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: group, Brokers: addrs, Topics: []string{topic},
		SessionTimeout: session, HeartbeatInterval: heartbeat, RebalanceTimeout: rebalance,
		JoinGroupBackoff: 100 * time.Millisecond,
		Dialer:           &kafka.Dialer{DialFunc: m.dialer.dial, Timeout: 5 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.cg = cg
	go func() {
		for {
			gen, err := cg.Next(context.Background())
			if errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			m.mu.Lock()
			if err != nil {
				m.errs = append(m.errs, err)
			} else {
				n := 0
				for _, ps := range gen.Assignments {
					n += len(ps)
				}
				m.gens = append(m.gens, memberGen{at: time.Now(), id: gen.ID, partitions: n})
			}
			m.mu.Unlock()
		}
	}()
	// Close without waiting: a killed member's ConsumerGroup may sit in a
	// dial that fails, which Close ends.
	t.Cleanup(func() { go cg.Close() })
	return m
}

// lastGen returns the member's latest generation.
func (m *groupMember) lastGen() (memberGen, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.gens) == 0 {
		return memberGen{}, false
	}
	return m.gens[len(m.gens)-1], true
}

func (m *groupMember) errors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.errs...)
}

// TestGroupCrashLoop: members that join and are killed (no LeaveGroup, no
// heartbeat again) while the group rebalances, again and again, as a
// crash-looping instance would. After the last kill the surviving member
// must hold every partition within the rebalance timeout plus the session
// timeout (plus slack), as Kafka's coordinator bounds it: a dead member
// expires by its session timeout, even during a rebalance, and a rebalance
// ends at the rebalance timeout, whoever keeps joining.
//
// kfake alone fails it about every other run (RANKD_KFAKE_DEAD_MEMBERS=1
// runs it so): the survivor, parked in JoinGroup, is expired by its stale
// session timer and waits for its join to time out (recovery 5-8 s), or a
// member killed while its join was parked stays in the Stable group for
// good, holding its partitions. Package kgroup, which testenv's brokers
// run, restores Kafka's bounds (recovery about 1 s).
func TestGroupCrashLoop(t *testing.T) {
	Slow(t, "crash loop: about 10 s")
	t.Parallel()
	const (
		partitions = 6
		session    = time.Second
		heartbeat  = 100 * time.Millisecond
		rebalance  = 2 * time.Second
		kills      = 6
		slack      = 2 * time.Second
	)
	raw := os.Getenv("RANKD_KFAKE_DEAD_MEMBERS") == "1"
	broker := NewKafka(t, KafkaOptions{SeedTopics: map[string]int{"crash": partitions}, KfakeDeadMembers: raw})
	runGroupCrashLoop(t, broker, partitions, session, heartbeat, rebalance, kills, slack)
	if broker.reaper != nil {
		t.Logf("the harness (kgroup): %+v", broker.reaper.Stats())
	}
}

func runGroupCrashLoop(t *testing.T, broker *Broker, partitions int, session, heartbeat, rebalance time.Duration, kills int, slack time.Duration) {
	addrs := broker.Addrs()
	const group, topic = "crash-loop", "crash"
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	// The largest group the coordinator held, and its states.
	var maxMembers int
	var lastState string
	var watchMu sync.Mutex
	if broker.cluster != nil {
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if gi := broker.cluster.GroupInfo(group); gi != nil {
					watchMu.Lock()
					maxMembers = max(maxMembers, len(gi.Members))
					if st := fmt.Sprintf("%s gen %d, %d members", gi.State, gi.Epoch, len(gi.Members)); st != lastState {
						lastState = st
						t.Logf("%s group %s", time.Now().Format("05.000"), st)
					}
					watchMu.Unlock()
				}
			}
		}()
		defer func() {
			watchMu.Lock()
			defer watchMu.Unlock()
			t.Logf("the group had at most %d members", maxMembers)
		}()
	}

	survivor := startGroupMember(t, addrs, group, topic, session, heartbeat, rebalance)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if g, ok := survivor.lastGen(); ok && g.partitions == partitions {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first member holds no generation with %d partitions after 30s; errors %v", partitions, survivor.errors())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The crash loop: a member starts, joins (the group rebalances) and is
	// killed 0.05-1.5 s later, mostly in the middle of the rebalance; the
	// next starts 0-0.5 s after.
	var lastKill time.Time
	for i := range kills {
		v := startGroupMember(t, addrs, group, topic, session, heartbeat, rebalance)
		time.Sleep(time.Duration(50+rng.IntN(1450)) * time.Millisecond)
		v.dialer.kill()
		lastKill = time.Now()
		t.Logf("%s kill", lastKill.Format("05.000"))
		g, _ := v.lastGen()
		t.Logf("kill %d: the victim had generation %d (%d partitions); the survivor %d errors so far", i+1, g.id, g.partitions, len(survivor.errors()))
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
	}

	bound := rebalance + session + slack
	limit := time.Now().Add(bound + 60*time.Second) // measure past the bound, to report how long it took
	for {
		if g, ok := survivor.lastGen(); ok && g.at.After(lastKill) && g.partitions == partitions {
			took := g.at.Sub(lastKill)
			t.Logf("the survivor holds all %d partitions (generation %d) %.2fs after the last kill (bound %v = rebalance timeout %v + session timeout %v + slack %v)",
				partitions, g.id, took.Seconds(), bound, rebalance, session, slack)
			if took > bound {
				t.Errorf("recovered %.2fs after the last kill, beyond %v", took.Seconds(), bound)
			}
			return
		}
		if time.Now().After(limit) {
			g, _ := survivor.lastGen()
			t.Fatalf("the survivor holds no generation with all %d partitions %v after the last kill (last generation %d at %v with %d partitions); its errors: %v",
				partitions, time.Since(lastKill).Round(time.Second), g.id, g.at.Sub(lastKill).Round(time.Millisecond), g.partitions, survivor.errors())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGroupRebalanceEndsAtTimeout: a rebalance ends at the rebalance
// timeout from its start, removing the members that did not rejoin, even
// while new members keep joining. kfake restarts its rebalance timer on
// every join (package kgroup, defect 3), so there a dead member with a
// long session timeout holds the group in PreparingRebalance until the
// joins stop; the harness ends it on time.
func TestGroupRebalanceEndsAtTimeout(t *testing.T) {
	Slow(t, "about 5 s")
	t.Parallel()
	const (
		session   = 30 * time.Second // the dead member is not expired during the test
		heartbeat = 100 * time.Millisecond
		rebalance = time.Second
		slack     = time.Second
		topic     = "rebal"
	)
	raw := os.Getenv("RANKD_KFAKE_DEAD_MEMBERS") == "1"
	broker := NewKafka(t, KafkaOptions{SeedTopics: map[string]int{topic: 6}, KfakeDeadMembers: raw})
	addrs := broker.Addrs()
	group := "rebal"
	a := startGroupMember(t, addrs, group, topic, session, heartbeat, rebalance)
	dead := startGroupMember(t, addrs, group, topic, session, heartbeat, rebalance)
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("two members share the partitions", func() bool {
		ga, _ := a.lastGen()
		gd, _ := dead.lastGen()
		return ga.partitions == 3 && gd.partitions == 3 && ga.id == gd.id
	})
	before, _ := a.lastGen()
	dead.dialer.kill()

	// Members join one after the other, each restarting kfake's timer;
	// meanwhile the coordinator's generation is watched: it is bumped when
	// the rebalance ends.
	start := time.Now()
	ended := make(chan time.Time, 1)
	go func() {
		for time.Since(start) < 20*time.Second {
			if gi := broker.cluster.GroupInfo(group); gi != nil && gi.Epoch > before.id {
				ended <- time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(ended)
	}()
	for range 5 {
		startGroupMember(t, addrs, group, topic, session, heartbeat, rebalance)
		time.Sleep(600 * time.Millisecond)
	}
	at, ok := <-ended
	if !ok {
		t.Fatal("the rebalance did not end within 20s")
	}
	took := at.Sub(start)
	t.Logf("the rebalance ended %.2fs after the first join (rebalance timeout %v)", took.Seconds(), rebalance)
	if took > rebalance+slack {
		t.Errorf("the rebalance ended %.2fs after it began, beyond the rebalance timeout %v + %v", took.Seconds(), rebalance, slack)
	}
	if broker.reaper != nil {
		t.Logf("the harness (kgroup): %+v", broker.reaper.Stats())
	}
}

// TestGroupDeadMemberExpires: a member killed while its JoinGroup is
// parked must leave the group by its session timeout. On kfake alone it
// stays in the Stable group for good, with no session timer, holding its
// partitions (package kgroup, defect 1; RANKD_KFAKE_DEAD_MEMBERS=1 shows
// it).
func TestGroupDeadMemberExpires(t *testing.T) {
	Slow(t, "about 5 s")
	t.Parallel()
	const (
		session   = 2 * time.Second
		heartbeat = 500 * time.Millisecond // the survivor rejoins well after the kill
		rebalance = 10 * time.Second
		slack     = 2 * time.Second
		topic     = "dead"
		group     = "dead"
	)
	raw := os.Getenv("RANKD_KFAKE_DEAD_MEMBERS") == "1"
	broker := NewKafka(t, KafkaOptions{SeedTopics: map[string]int{topic: 6}, KfakeDeadMembers: raw})
	addrs := broker.Addrs()
	s := startGroupMember(t, addrs, group, topic, session, heartbeat, rebalance)
	deadline := time.Now().Add(20 * time.Second)
	for g, _ := s.lastGen(); g.partitions != 6; g, _ = s.lastGen() {
		if time.Now().After(deadline) {
			t.Fatal("the first member holds no generation with 6 partitions after 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A second member joins and is killed while its JoinGroup waits for
	// the first member to rejoin.
	m := startGroupMember(t, addrs, group, topic, session, heartbeat, rebalance)
	for {
		if gi := broker.cluster.GroupInfo(group); gi != nil && len(gi.Members) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second member did not join within 20s")
		}
		time.Sleep(time.Millisecond)
	}
	m.dialer.kill()
	killed := time.Now()

	bound := heartbeat + session + slack
	for {
		if g, ok := s.lastGen(); ok && g.at.After(killed) && g.partitions == 6 {
			t.Logf("the first member holds all 6 partitions again %.2fs after the kill (generation %d; bound %v = heartbeat + session timeout + %v)",
				g.at.Sub(killed).Seconds(), g.id, bound, slack)
			break
		}
		if time.Since(killed) > bound {
			gi := broker.cluster.GroupInfo(group)
			g, _ := s.lastGen()
			t.Fatalf("%v after the kill the first member holds %d partitions (generation %d); the group: %s, generation %d, %d members",
				bound, g.partitions, g.id, gi.State, gi.Epoch, len(gi.Members))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if broker.reaper != nil {
		t.Logf("the harness (kgroup): %+v", broker.reaper.Stats())
	}
}
