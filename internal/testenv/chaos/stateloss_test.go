package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
)

// The state-loss test: Redis loses its last writes while two `rankd run`
// processes apply and a producer keeps sending (duplicates, disorder, late
// and bad messages), in four ways:
//
//	failover   a replica paused (so that it lags) is promoted by Sentinel
//	           after the primary is killed: Redis goes back to the replica's
//	           state, behind what rankd applied and committed
//	rdb        Redis is killed and restarted from an RDB snapshot taken
//	           seconds before
//	flushall   FLUSHALL
//	nopersist  Redis without persistence is killed and restarted: empty
//
// Where Redis still knows the position it went back to (failover, rdb),
// rankd must rewind by itself: re-apply from Kafka from there, with no
// operator action. Where it knows nothing (flushall, nopersist), rankd
// must halt every partition within 30 s (/readyz 503 with the reason, the
// metric up), apply nothing, and resume by itself after `rankd replay
// --yes`. Either way every board and period must then equal the oracle
// recomputed from the log, and the dead letters its verdicts.
func TestStateLoss(t *testing.T) {
	testenv.Slow(t, "real rankd processes, minutes with -race")
	bin := testenv.BuildRankd(t)
	for _, sc := range []string{"failover", "rdb", "flushall", "nopersist"} {
		t.Run(sc, func(t *testing.T) { runStateLoss(t, bin, sc) })
	}
}

// lossDetectTimeout bounds the time from the loss to rankd noticing it.
const lossDetectTimeout = 30 * time.Second

func runStateLoss(t *testing.T, bin, scenario string) {
	seed := chaosSeed(t)
	c := &chaos{t: t}
	c.broker = testenv.StartBrokerProcess(t, testenv.BrokerProcessOptions{
		Topics: append(append([]string(nil), chaosTopics...), chaosDLQ), Partitions: chaosPartitions})
	brokers := c.broker.Addrs()
	halts := scenario == "flushall" || scenario == "nopersist"

	var (
		srv      *testenv.RedisServer   // standalone
		sent     *testenv.RedisSentinel // failover
		redisCfg [][2]string
		addr     = []string{"localhost:6379"}
	)
	switch scenario {
	case "failover":
		sent = testenv.NewSentinel(t, testenv.RedisSentinelOptions{})
		redisCfg = [][2]string{{"addr: localhost:6379", fmt.Sprintf("sentinel:\n    master_name: %s\n    addrs: [%s]",
			sent.MasterName(), strings.Join(sent.Addrs(), ", "))}}
	case "rdb":
		srv = testenv.NewRedis(t, testenv.RedisOptions{}) // no automatic saves: the snapshot is the test's
		addr = []string{srv.Addr()}
	default:
		srv = testenv.NewRedis(t, testenv.RedisOptions{})
		addr = []string{srv.Addr()}
	}
	var paths []string
	for i := range 2 {
		listen := freeAddr(t)
		path := writeConfig(t, fmt.Sprintf("rankd%d", i+1), brokers[0], addr, listen, redisCfg...)
		paths = append(paths, path)
		c.instances = append(c.instances, newInstance(t, fmt.Sprintf("rankd%d", i+1), bin, path, listen,
			"--session-timeout", "1s", "--heartbeat-interval", "100ms", "--rebalance-timeout", "1s"))
	}
	cfg, err := config.Load(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	master := func() redis.UniversalClient {
		if sent == nil {
			return srv.Client(t)
		}
		a, err := sent.Master(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return redis.NewClient(&redis.Options{Addr: a})
	}
	c.off = newOffsetReader(t, brokers, cfg.Kafka.Group, chaosTopics)

	rate := chaosRate()
	clock := newEventClock(30*time.Hour, 40*time.Second)
	wl := newWorkload(seed, clock.now)
	prod := newProducer(brokers, wl, rate)
	t.Cleanup(func() { _ = prod.w.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	prod.send(ctx, int(rate))
	var wg sync.WaitGroup
	wg.Go(func() { prod.run(ctx) })
	for _, in := range c.instances {
		if err := in.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range c.instances {
		if err := in.waitHealthy(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.watchRecovery(c.snapshot(), time.Now(), "start").wait(c); err != nil {
		t.Fatal(err)
	}

	// The loss, while the producer sends and both instances apply.
	var snapshot []byte
	if scenario == "rdb" {
		rdb := srv.Client(t)
		if err := rdb.Save(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if snapshot, err = os.ReadFile(filepath.Join(srv.Dir(), "dump.rdb")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	before := c.snapshot()
	lost := time.Now()
	switch scenario {
	case "failover":
		var replica *testenv.RedisServer
		old, err := sent.Master(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range sent.Nodes() {
			if n.Addr() != old {
				replica = n
			}
		}
		// The replica stops, and the primary drops its link (what it had
		// sent, the replica still applies when it continues): it falls
		// behind by what the primary applies from now on.
		if err := replica.Pause(); err != nil {
			t.Fatal(err)
		}
		if err := redis.NewClient(&redis.Options{Addr: old}).Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if _, err := sent.KillMaster(ctx); err != nil {
			t.Fatal(err)
		}
		lost = time.Now()
		if err := replica.Resume(); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		now, err := sent.WaitMaster(wctx, old)
		wcancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("sentinel promoted %s (the lagging replica) %.2fs after the primary was killed", now, time.Since(lost).Seconds())
	case "rdb":
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(srv.Dir(), "dump.rdb"), snapshot, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	case "flushall":
		if err := srv.Client(t).FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	case "nopersist":
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}

	// Detection: a rewind counted, or every partition halted and every
	// instance unready with the reason.
	partitions := float64(chaosPartitions * len(chaosTopics))
	var detected time.Duration
	for {
		var rewinds, behind float64
		for _, in := range c.instances {
			m, err := in.metrics()
			if err != nil {
				continue
			}
			rewinds += sumMetric(m, "rankd_sink_rewinds_total")
			behind += sumMetric(m, "rankd_sink_partitions_behind")
		}
		if halts && behind == partitions || !halts && rewinds > 0 {
			detected = time.Since(lost)
			break
		}
		if rewinds > 0 && halts || behind > 0 && !halts {
			c.failWithLogs("%s: %v rewinds and %v halted partitions, want %s", scenario, rewinds, behind,
				map[bool]string{true: "halts only", false: "rewinds only"}[halts])
		}
		if time.Since(lost) > lossDetectTimeout {
			c.failWithLogs("%s: not detected within %v (rewinds %v, halted partitions %v)", scenario, lossDetectTimeout, rewinds, behind)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s: detected %.2fs after the loss (at %s)", scenario, detected.Seconds(), lost.Format("15:04:05.000"))

	var replayed time.Duration
	if halts {
		for _, in := range c.instances {
			code, body := in.ready()
			if code != 503 || !strings.Contains(body, "redis holds no position") && !strings.Contains(body, "redis lost") {
				c.failWithLogs("%s: /readyz %d %q, want 503 with the reason", in.name, code, body)
			}
		}
		// Nothing is applied meanwhile.
		time.Sleep(2 * time.Second)
		if h, err := master().HGetAll(ctx, "chaos:pos").Result(); err != nil || len(h) != 0 {
			t.Fatalf("positions written while halted: %v, %v", h, err)
		}
		start := time.Now()
		out, err := exec.CommandContext(ctx, bin, "replay", "--config", paths[0], "--yes", "--progress", "none").CombinedOutput()
		if err != nil {
			t.Fatalf("rankd replay: %v\n%s", err, out)
		}
		replayed = time.Since(start)
		t.Logf("%s: rankd replay --yes ran from %s for %.2fs", scenario, start.Format("15:04:05.000"), replayed.Seconds())
	}
	if _, err := c.watchRecovery(before, lost, "after the loss").wait(c); err != nil {
		c.failWithLogs("%v", err)
	}
	recovered := time.Since(lost)
	t.Logf("%s: every partition applied and committed past the loss %.2fs after it", scenario, recovered.Seconds())

	// The end: stop the producer, drain, compare.
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	drainStart := time.Now()
	for {
		s, err := c.off.read(t.Context())
		if err == nil && s.drained() {
			break
		}
		if time.Since(drainStart) > drainTimeout {
			c.failWithLogs("not drained after %v", drainTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var rewinds, rewound, behind float64
	for _, in := range c.instances {
		m, err := in.metrics()
		if err != nil {
			t.Fatal(err)
		}
		rewinds += sumMetric(m, "rankd_sink_rewinds_total")
		rewound += sumMetric(m, "rankd_sink_rewound_offsets_total")
		behind += sumMetric(m, "rankd_sink_partitions_behind")
	}
	if behind != 0 {
		t.Errorf("rankd_sink_partitions_behind = %v at the end, want 0", behind)
	}
	for _, in := range c.instances {
		if code, err := in.term(30 * time.Second); err != nil || code != 0 {
			t.Errorf("%s: exit %d after SIGTERM (%v), want 0:\n%s", in.name, code, err, in.tail(30))
		}
		if out := in.output(); strings.Contains(out, "panic:") || strings.Contains(out, "DATA RACE") {
			t.Errorf("%s panicked or raced:\n%s", in.name, in.tail(60))
		}
	}
	exp := expect(t, cfg, brokers, chaosTopics, prod)
	checkMarks(t, master(), cfg.Redis.Prefix, exp.log, exp.res)
	diff := compareBoards(t, cfg, master(), exp.res.Oracle)
	dlWhere, _ := deadLetters(t, brokers, chaosDLQ)
	checkDeadLetters(t, dlWhere, exp.res)
	t.Logf("state loss %s (seed %d, race %v): %d messages at %.0f/s; detected after %.2fs; %s; recovered %.2fs after the loss; %v rewinds, %v offsets re-applied; %d boards, %d rows compared, %d differing members",
		scenario, seed, testenv.RaceEnabled, len(exp.log), rate, detected.Seconds(),
		map[bool]string{true: fmt.Sprintf("halted until rankd replay (%.2fs)", replayed.Seconds()), false: "rewound by itself"}[halts],
		recovered.Seconds(), rewinds, rewound, diff.boards, diff.rows, diff.members)
	if diff.members > 0 {
		t.Fatalf("%d members differ from the oracle:\n%s", diff.members, strings.Join(diff.details, "\n"))
	}
}
