package bench

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/servers"
	"github.com/rankd/rankd/internal/testenv"
)

func startRedis(t *testing.T) *servers.Redis {
	t.Helper()
	r, err := servers.StartRedis(t.Context(), servers.RedisOptions{})
	if errors.Is(err, servers.ErrNoRedisServer) {
		testenv.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// startServers starts a broker child and a redis-server child for a test.
func startServers(t *testing.T) (*servers.Broker, *servers.Redis) {
	t.Helper()
	b, err := servers.StartBroker(t.Context(), servers.BrokerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, startRedis(t)
}

// TestGivenServers runs the naive and seed drains against a given broker
// and Redis (--brokers, --redis): the Redis is left empty; a second run on
// the same broker is refused, and so is a Redis holding keys.
func TestGivenServers(t *testing.T) {
	b, r := startServers(t)
	var out bytes.Buffer
	o := Options{Events: 3000, NaiveEvents: 300, Brokers: []string{b.Addr()}, Redis: r.Addr(), Stdout: &out, Stderr: &out,
		Skip: []string{PhaseRankd, PhaseMemory, PhaseReplay, PhaseLatency, PhaseRollover, PhaseReads}}
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.Drain.Naive == nil || res.Drain.Naive.Events != 300 || res.Drain.Seed == nil || res.Drain.Seed.Events != 3000 ||
		res.Drain.Rankd != nil || res.Replay != nil || res.Latency != nil || res.Rollover != nil || res.Memory != nil {
		t.Fatalf("phases run: %+v", res.Drain)
	}
	if !strings.Contains(out.String(), "seed pipelined") || !strings.Contains(out.String(), "broker: given: "+b.Addr()) {
		t.Errorf("table:\n%s", out.String())
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rdb.Close()
	if n, err := rdb.DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Errorf("the given Redis holds %d keys after the run (%v), want 0", n, err)
	}

	_, err = Run(t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "has been written to") {
		t.Errorf("second run on the same broker: %v, want a refusal", err)
	}
	if err := rdb.Set(t.Context(), "mine", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	o.Brokers = nil // a fresh broker child
	_, err = Run(t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "holds keys") {
		t.Errorf("a Redis holding keys: %v, want a refusal", err)
	}
	if v, _ := rdb.Get(t.Context(), "mine").Result(); v != "1" {
		t.Errorf("the refused Redis lost its key")
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{}, ""},
		{Options{Skip: []string{PhaseReplay}}, ""},
		{Options{Events: 10, NaiveEvents: 11}, "naive events 11: at most the events (10)"},
		{Options{NaiveEvents: DefaultEvents + 1}, "at most the events"},
		{Options{Skip: []string{"drain"}}, `skip "drain": not a phase`},
		{Options{Skip: []string{PhaseRankd}}, "the memory phase measures what the rankd drain leaves"},
		{Options{Skip: []string{PhaseRankd, PhaseMemory}}, ""},
		{Options{Events: -1}, "events -1"},
		{Options{TopicPartitions: map[string]int{"like": 14, "gift": 2}}, ""},
		{Options{TopicPartitions: map[string]int{"likes": 14}}, `topic partitions: "likes" is not a topic of the workload`},
		{Options{TopicPartitions: map[string]int{"gift": 0}}, "topic partitions: gift=0: want a positive number"},
		{Options{RedisNice: -10}, ""},
		{Options{RedisNice: -21}, "redis nice -21: want -20 to 19"},
		{Options{RedisNice: 5, Redis: "127.0.0.1:6379"}, "redis nice: only for the redis-server the benchmark starts"},
	} {
		err := tt.o.Validate()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: %v, want %q", tt.o, err, tt.want)
		}
	}
}

// TestRolloverPhase runs the rollover phase on a small board, with a Redis
// child (whose wait for a CPU is measured) and with a given Redis (not
// measured: its process may be on another machine).
func TestRolloverPhase(t *testing.T) {
	skip := []string{PhaseNaive, PhaseSeed, PhaseRankd, PhaseMemory, PhaseReplay, PhaseLatency, PhaseCost, PhaseReads}
	for _, given := range []bool{false, true} {
		var out bytes.Buffer
		o := Options{Events: 1000, RolloverMembers: 3000, Stdout: &out, Stderr: &out, Skip: skip}
		if given {
			o.Redis = startRedis(t).Addr()
		}
		res, err := Run(t.Context(), o)
		if err != nil {
			t.Fatalf("given Redis %v: %v\n%s", given, err, out.String())
		}
		r := res.Rollover
		if r == nil || r.Members != 3000 {
			t.Fatalf("given Redis %v: rollover %+v", given, r)
		}
		measured := r.RedisWaitMs >= 0 && r.RedisPreempted >= 0
		if given == measured && runtime.GOOS == "linux" {
			t.Errorf("given Redis %v: Redis waited %v ms, preempted %d times: want measured only for a child",
				given, r.RedisWaitMs, r.RedisPreempted)
		}
		line := ""
		for l := range strings.Lines(out.String()) {
			if strings.HasPrefix(l, "rollover:") {
				line = l
			}
		}
		if got := strings.Contains(line, "Redis waited"); got != measured {
			t.Errorf("given Redis %v: the rollover's line says how long Redis waited: %v, want %v\n%s", given, got, measured, out.String())
		}
	}
}

// TestTopicPartitions drains with topics of their own partition counts
// (--topic-partitions), on a given broker and on a broker child: the
// broker reports those counts, for the naive copies too.
func TestTopicPartitions(t *testing.T) {
	b, r := startServers(t)
	skip := []string{PhaseNaive, PhaseSeed, PhaseMemory, PhaseReplay, PhaseLatency, PhaseRollover, PhaseCost, PhaseReads}
	for _, given := range []bool{true, false} {
		var out bytes.Buffer
		o := Options{Events: 3000, NaiveEvents: 300, Partitions: 2, TopicPartitions: map[string]int{"like": 5, "gift": 1},
			Redis: r.Addr(), Stdout: &out, Stderr: &out, Skip: skip}
		if given {
			o.Brokers = []string{b.Addr()}
		}
		res, err := Run(t.Context(), o)
		if err != nil {
			t.Fatalf("given broker %v: %v\n%s", given, err, out.String())
		}
		if res.Drain.Rankd == nil || res.Drain.Rankd.Events != 3000 || res.Drain.Rankd.Updates == 0 {
			t.Fatalf("given broker %v: rankd drain %+v", given, res.Drain.Rankd)
		}
		if got := fmt.Sprint(res.Preload.Partitions); got != "map[comment:2 gift:1 like:5]" {
			t.Errorf("given broker %v: the broker's partitions %s, want comment 2, gift 1, like 5", given, got)
		}
		if !strings.Contains(out.String(), "partitions: comment 2, gift 1, like 5\n") {
			t.Errorf("given broker %v: table:\n%s", given, out.String())
		}
	}
	md, err := (&kafka.Client{Addr: kafka.TCP(b.Addr())}).Metadata(t.Context(), &kafka.MetadataRequest{
		Topics: []string{"like", "gift", "comment", naivePrefix + "like", naivePrefix + "gift"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"like": 5, "gift": 1, "comment": 2, naivePrefix + "like": 5, naivePrefix + "gift": 1}
	for _, tp := range md.Topics {
		if tp.Error != nil || len(tp.Partitions) != want[tp.Name] {
			t.Errorf("topic %s: %d partitions (%v), want %d", tp.Name, len(tp.Partitions), tp.Error, want[tp.Name])
		}
	}
}
