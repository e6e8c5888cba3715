package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
)

// The chaos test: three `rankd run` processes (2 workers each) in one
// consumer group consume 3 topics x 6 partitions from a broker process
// into Redis with an append-only file fsynced on every write, while a
// producer keeps sending the workload (duplicates, disorder, late and bad
// messages). At random moments (seeded) one fault at a time is injected:
//
//	kill      SIGKILL of a random instance, restarted 0-3 s later
//	term      SIGTERM of a random instance (it must exit 0), restarted 0-1 s later
//	broker    SIGKILL of the broker, restarted on its port and data 0.5-2 s later
//	redis     SIGKILL of Redis (a cluster node), restarted on its port and AOF 0.2-2 s later
//	pause     SIGSTOP of Redis (a cluster node) past the client's 3 s timeouts, then SIGCONT
//
// and the time to recover is measured: from the fault's injection until,
// on every partition, the group has committed a message produced after the
// injection (every partition is applied and committed again; the producer
// never stops, so every partition gets new messages). The next fault comes
// 0.5-3 s after the recovery. At the end the producer stops, the group
// drains (committed offsets = log end offsets), and every board (each
// stream and period) must equal the oracle recomputed from the log, member
// by member; the dead letters must be exactly the messages the oracle
// rejects, with its reasons.
//
// RANKD_CHAOS=long runs the long variant; RANKD_CHAOS_SEED=N replays the
// fault schedule, the random choices and the workload of a run (not the
// exact timing).

type faultKind string

const (
	faultKill   faultKind = "kill"
	faultTerm   faultKind = "term"
	faultBroker faultKind = "broker"
	faultRedis  faultKind = "redis"
	faultPause  faultKind = "pause"
	// crashloop: one instance SIGKILLed again and again during the
	// rebalances its restarts cause (chaosPlan.crashLoop); not scheduled.
	faultCrashLoop faultKind = "crashloop"
)

var faultKinds = []faultKind{faultKill, faultTerm, faultBroker, faultRedis, faultPause, faultCrashLoop}

// shortGroupTimings are the group timings of the chaos instances unless a
// plan asks for rankd's defaults: recoveries of about a second, so that a
// run injects many faults. The crash-loop bound is computed from them.
var shortGroupTimings = []string{"--session-timeout", "1s", "--heartbeat-interval", "100ms", "--rebalance-timeout", "1s"}

const (
	shortSession   = time.Second
	shortRebalance = time.Second
	// crashLoopSlack is what rankd may add to the group's bound (rebalance
	// timeout + session timeout) before every partition commits again: a
	// fetch, a batch's linger, applying it to Redis and the commit, under
	// -race on 2 cores with the producer and 3 instances.
	crashLoopSlack = 3 * time.Second
)

const (
	chaosPartitions = 6
	chaosInstances  = 3
	chaosDLQ        = "rankd-dead-letter"
	// recoveryTimeout bounds the recovery from one fault: beyond it rankd
	// hangs, which is a finding.
	recoveryTimeout = 90 * time.Second
	drainTimeout    = 3 * time.Minute
)

var chaosTopics = []string{"gift", "like", "comment"}

// chaosPlan is one variant.
type chaosPlan struct {
	cluster bool
	faults  map[faultKind]int
	rate    float64       // messages per second
	planned time.Duration // expected run time, for the event clock
	// pause is the range of a Redis pause; a cluster node's stays below
	// the cluster-node-timeout (5 s), or the other masters mark it failed
	// and refuse every write until twice the timeout has passed.
	pauseMin, pauseMax time.Duration
	// crashLoop, if positive, replaces the fault schedule by a crash loop
	// of that many SIGKILLs of one instance, 1-2 s apart (crashLoop).
	crashLoop int
	// defaultTimings runs the instances with rankd's default group
	// timings instead of shortGroupTimings, or with groupArgs if set.
	defaultTimings bool
	groupArgs      []string
	// measure replaces the fault schedule by one of each instance fault,
	// measured (measureRecovery).
	measure bool
}

// chaosRate is the producer's rate: well below what three instances apply
// (tens of thousands of messages per second without -race, a few
// thousand with it), so that a recovery is not a backlog's drain.
func chaosRate() float64 {
	if testenv.RaceEnabled {
		return 400
	}
	return 1000
}

func long() bool { return os.Getenv("RANKD_CHAOS") == "long" }

func chaosSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano() % 1e6
	if s := os.Getenv("RANKD_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("RANKD_CHAOS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay with RANKD_CHAOS_SEED=%d)", seed, seed)
	return seed
}

// TestChaos runs the chaos test on a single Redis and on a 3-master Redis
// Cluster, then the overload test; the rankd binary is built once.
func TestChaos(t *testing.T) {
	testenv.Slow(t, "real rankd processes, minutes with -race")
	bin := testenv.BuildRankd(t)
	t.Run("redis", func(t *testing.T) {
		plan := chaosPlan{
			faults:   map[faultKind]int{faultKill: 2, faultTerm: 1, faultBroker: 1, faultRedis: 1, faultPause: 1},
			rate:     chaosRate(),
			planned:  60 * time.Second,
			pauseMin: 5 * time.Second, pauseMax: 6 * time.Second,
		}
		if long() {
			plan.faults = map[faultKind]int{faultKill: 24, faultTerm: 6, faultBroker: 5, faultRedis: 5, faultPause: 5}
			plan.planned = 8 * time.Minute
			plan.pauseMax = 8 * time.Second
		}
		runChaos(t, bin, plan)
	})
	t.Run("cluster", func(t *testing.T) {
		plan := chaosPlan{
			cluster:  true,
			faults:   map[faultKind]int{faultKill: 1, faultTerm: 1, faultBroker: 1, faultRedis: 1, faultPause: 1},
			rate:     chaosRate(),
			planned:  50 * time.Second,
			pauseMin: 3500 * time.Millisecond, pauseMax: 4500 * time.Millisecond,
		}
		if long() {
			plan.faults = map[faultKind]int{faultKill: 20, faultTerm: 5, faultBroker: 4, faultRedis: 4, faultPause: 4}
			plan.planned = 7 * time.Minute
		}
		runChaos(t, bin, plan)
	})
	t.Run("crashloop", func(t *testing.T) {
		plan := chaosPlan{crashLoop: 5, rate: chaosRate(), planned: 40 * time.Second}
		if long() {
			plan.crashLoop, plan.planned = 25, 2*time.Minute
		}
		runChaos(t, bin, plan)
	})
	t.Run("overload", func(t *testing.T) { runOverload(t, bin) })
}

// TestRecoveryDefaults measures, with rankd's default group timings
// (session 10s, heartbeat 1s, rebalance 10s), the recovery from one
// SIGKILL, one SIGTERM, a restart within the session timeout and a crash
// loop, for docs/recovery.md; RANKD_CHAOS=recovery runs it (a few
// minutes). RANKD_RECOVERY_ARGS adds `rankd run` flags, for example
// "--session-timeout 6s" to measure other timings.
func TestRecoveryDefaults(t *testing.T) {
	testenv.OptIn(t, "RANKD_CHAOS", "recovery", "measures the recoveries with rankd's default group timings (minutes)")
	bin := testenv.BuildRankd(t)
	args := strings.Fields(os.Getenv("RANKD_RECOVERY_ARGS"))
	t.Logf("rankd run flags: %q (the rest: rankd's defaults, session 10s, heartbeat 1s, rebalance 10s)", args)
	runChaos(t, bin, chaosPlan{measure: true, defaultTimings: true, groupArgs: args, rate: 2000, planned: 4 * time.Minute})
}

// fault is one injected fault and its recovery.
type fault struct {
	kind     faultKind
	target   string
	at       time.Duration // since the first fault's run started
	outage   time.Duration // injection to repair (restart, SIGCONT)
	recovery time.Duration // injection to recovered
	afterFix time.Duration // repair to recovered
	note     string
}

// sinceRepair describes when the recovery came relative to the repair: the
// rest of the group may take over the partitions of a killed instance
// before it is restarted.
func (f fault) sinceRepair() string {
	if f.afterFix < 0 {
		return fmt.Sprintf("%.2fs before the repair", -f.afterFix.Seconds())
	}
	return fmt.Sprintf("%.2fs after the repair", f.afterFix.Seconds())
}

// redisTarget is a redis-server that faults may kill or pause.
type redisTarget struct {
	name string
	srv  *testenv.RedisServer
}

type chaos struct {
	t         *testing.T
	plan      chaosPlan
	rng       *rand.Rand
	broker    *testenv.BrokerProcess
	redis     []redisTarget
	cluster   *testenv.RedisCluster
	instances []*instance
	off       *offsetReader
	start     time.Time
	faults    []fault
	down      *instance // an instance kept down on purpose, not checked by checkAlive
}

func runChaos(t *testing.T, bin string, plan chaosPlan) {
	seed := chaosSeed(t)
	c := &chaos{t: t, plan: plan, rng: rand.New(rand.NewPCG(uint64(seed), 0xc4a05))}

	c.broker = testenv.StartBrokerProcess(t, testenv.BrokerProcessOptions{
		Topics: append(append([]string(nil), chaosTopics...), chaosDLQ), Partitions: chaosPartitions,
		KfakeDeadMembers: os.Getenv("RANKD_KFAKE_DEAD_MEMBERS") == "1"})
	brokers := c.broker.Addrs()
	var redisAddrs []string
	var rdb redis.UniversalClient
	setup := "Redis: one redis-server, appendonly yes, appendfsync always"
	if plan.cluster {
		c.cluster = testenv.NewCluster(t, testenv.RedisClusterOptions{Persist: true})
		redisAddrs = c.cluster.Addrs()
		for i, n := range c.cluster.Nodes() {
			c.redis = append(c.redis, redisTarget{name: fmt.Sprintf("node%d", i+1), srv: n})
		}
		rdb = c.cluster.Client(t)
		setup = "Redis: 3-master cluster, every node appendonly yes, appendfsync always"
	} else {
		srv := testenv.NewRedis(t, testenv.RedisOptions{Persist: true})
		redisAddrs = []string{srv.Addr()}
		c.redis = []redisTarget{{name: "redis", srv: srv}}
		rdb = srv.Client(t)
	}

	var cfg *config.Config
	for i := range chaosInstances {
		listen := freeAddr(t)
		path := writeConfig(t, fmt.Sprintf("rankd%d", i+1), brokers[0], redisAddrs, listen)
		if i == 0 {
			var err error
			if cfg, err = config.Load(path); err != nil {
				t.Fatal(err)
			}
		}
		timings := shortGroupTimings
		if plan.defaultTimings {
			timings = plan.groupArgs
		}
		c.instances = append(c.instances, newInstance(t, fmt.Sprintf("rankd%d", i+1), bin, path, listen, timings...))
	}
	c.off = newOffsetReader(t, brokers, cfg.Kafka.Group, chaosTopics)

	clock := newEventClock(30*time.Hour, plan.planned)
	wl := newWorkload(seed, clock.now)
	prod := newProducer(brokers, wl, plan.rate)
	t.Cleanup(func() { _ = prod.w.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// A backlog before the first start, then the steady stream.
	prod.send(ctx, int(plan.rate)*3)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); prod.run(ctx) }()

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
	// Wait until the group applies everywhere before the first fault.
	c.start = time.Now()
	if _, err := c.watchRecovery(c.snapshot(), time.Now(), "start").wait(c); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; %d instances up and applying after %v; %d messages sent",
		setup, chaosInstances, time.Since(c.start).Round(time.Millisecond), prod.acknowledged())

	var schedule []faultKind
	for _, k := range faultKinds {
		for range plan.faults[k] {
			schedule = append(schedule, k)
		}
	}
	c.rng.Shuffle(len(schedule), func(i, j int) { schedule[i], schedule[j] = schedule[j], schedule[i] })
	c.start = time.Now()
	switch {
	case plan.measure:
		c.measureRecovery()
	case plan.crashLoop > 0:
		f := c.crashLoop(plan.crashLoop, shortRebalance+shortSession+crashLoopSlack)
		c.faults = append(c.faults, f)
	}
	for i, kind := range schedule {
		time.Sleep(time.Duration(500+c.rng.IntN(2500)) * time.Millisecond)
		c.checkAlive()
		f := c.inject(kind)
		c.faults = append(c.faults, f)
		t.Logf("fault %2d/%d %-6s %-7s at %6.1fs: outage %5.2fs, recovered %5.2fs after the injection (%s) %s",
			i+1, len(schedule), f.kind, f.target, f.at.Seconds(), f.outage.Seconds(), f.recovery.Seconds(), f.sinceRepair(), f.note)
	}
	faultsDone := time.Since(c.start)

	// The end: stop the producer, drain, stop the instances.
	cancel()
	wg.Wait()
	c.checkAlive()
	drainStart := time.Now()
	var last offsetSnap
	for {
		s, err := c.off.read(t.Context())
		if err == nil {
			last = s
			if s.drained() {
				break
			}
		}
		if time.Since(drainStart) > drainTimeout {
			c.failWithLogs("not drained after %v: lag %d (%v)", drainTimeout, last.lag(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(drainStart)
	behind := 0.0
	for _, in := range c.instances {
		if err := in.waitHealthy(60 * time.Second); err != nil { // just restarted
			t.Fatal(err)
		}
	}
	for _, in := range c.instances {
		m, err := in.metrics()
		if err != nil {
			t.Errorf("%s /metrics: %v", in.name, err)
			continue
		}
		behind += sumMetric(m, "rankd_sink_partitions_behind")
	}
	for _, in := range c.instances {
		code, err := in.term(30 * time.Second)
		if err != nil || code != 0 {
			t.Errorf("%s: exit %d after SIGTERM (%v), want 0:\n%s", in.name, code, err, in.tail(30))
		}
	}
	for _, in := range c.instances {
		out := in.output()
		// No loss, so no rewind or halt: Redis runs with AOF fsynced on
		// every write, and a kill, a restart or a pause loses nothing.
		for _, bad := range []string{"panic:", "DATA RACE", "redis lost", "not applying the partition"} {
			if i := strings.Index(out, bad); i >= 0 {
				t.Errorf("%s printed %q:\n%s", in.name, bad, out[max(0, i-2000):min(len(out), i+3000)])
			}
		}
	}
	if behind > 0 {
		t.Errorf("rankd_sink_partitions_behind = %v: rankd halted partitions without a cause", behind)
	}

	// The checks.
	checkStart := time.Now()
	exp := expect(t, cfg, brokers, chaosTopics, prod)
	expected := time.Since(checkStart)
	checkMarks(t, rdb, cfg.Redis.Prefix, exp.log, exp.res)
	diff := compareBoards(t, cfg, rdb, exp.res.Oracle)
	t.Logf("checks: log read and oracle in %v, boards compared in %v", expected.Round(time.Millisecond), (time.Since(checkStart) - expected).Round(time.Millisecond))
	dlWhere, dlReasons := deadLetters(t, brokers, chaosDLQ)
	checkDeadLetters(t, dlWhere, exp.res)

	// The summary.
	counts := map[faultKind]int{}
	worst := map[faultKind]fault{}
	var worstAll fault
	for _, f := range c.faults {
		counts[f.kind]++
		if f.recovery > worst[f.kind].recovery {
			worst[f.kind] = f
		}
		if f.recovery > worstAll.recovery {
			worstAll = f
		}
	}
	restarts := 0
	for _, in := range c.instances {
		restarts += in.runs - 1
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "chaos summary\tseed %d, %s, %d x `rankd run` (2 workers), %d partitions, race %v\n",
		seed, map[bool]string{false: "standalone Redis (AOF, fsync always)", true: "3-master Redis Cluster (AOF, fsync always)"}[plan.cluster],
		chaosInstances, chaosPartitions*len(chaosTopics), testenv.RaceEnabled)
	fmt.Fprintf(tw, "faults (events)\t%d in %v (then drained in %v)\n", len(c.faults), faultsDone.Round(time.Second), drained.Round(time.Millisecond))
	fmt.Fprintf(tw, "rankd SIGKILL + restart\t%d\n", counts[faultKill])
	fmt.Fprintf(tw, "rankd SIGTERM + restart\t%d (all exited 0)\n", counts[faultTerm])
	fmt.Fprintf(tw, "rankd starts\t%d (%d restarts)\n", restarts+chaosInstances, restarts)
	fmt.Fprintf(tw, "broker SIGKILL + restart\t%d\n", counts[faultBroker])
	fmt.Fprintf(tw, "Redis SIGKILL + restart\t%d\n", counts[faultRedis])
	fmt.Fprintf(tw, "Redis SIGSTOP .. SIGCONT\t%d (%v-%v)\n", counts[faultPause], plan.pauseMin, plan.pauseMax)
	if plan.crashLoop > 0 {
		fmt.Fprintf(tw, "crash loop\t%d SIGKILLs of one instance 1-2 s apart, during the rebalances its restarts cause\n", plan.crashLoop)
	}
	st := wl.stats
	fmt.Fprintf(tw, "produced\t%d messages acknowledged at %.0f/s (%d fresh events, %d duplicates, %d disordered, %d late, %d bad); %d writes retried\n",
		prod.acknowledged(), plan.rate, st.Fresh, st.Dups, st.Disordered, st.Late, st.Bad, prod.retries.Load())
	fmt.Fprintf(tw, "log\t%d messages, %d with an ID seen before (workload duplicates + producer retries); %d cut short at the stop; every acknowledged message is there\n",
		len(exp.log), exp.dups, prod.cutShort())
	fmt.Fprintf(tw, "boards compared\t%d (stream x period), %d rows\n", diff.boards, diff.rows)
	fmt.Fprintf(tw, "differing members\t%d\n", diff.members)
	fmt.Fprintf(tw, "worst recovery\t%.2fs (%s %s, outage %.2fs)\n", worstAll.recovery.Seconds(), worstAll.kind, worstAll.target, worstAll.outage.Seconds())
	for _, k := range faultKinds {
		if f, ok := worst[k]; ok {
			fmt.Fprintf(tw, "  worst after %s\t%.2fs from the injection, %s (outage %.2fs)\n", k, f.recovery.Seconds(), f.sinceRepair(), f.outage.Seconds())
		}
	}
	dlTotal := 0
	for _, n := range dlReasons {
		dlTotal += n
	}
	fmt.Fprintf(tw, "dead letters\t%d: %s (%d distinct messages, as the oracle says: %d rejected, %d invalid)\n",
		dlTotal, reasonsLine(dlReasons), len(dlWhere), len(exp.res.Rejected), len(exp.res.Invalid))
	tw.Flush()
	t.Log("recovery: from the fault's injection until every partition has committed a message produced after it\n" + b.String())
	if diff.members > 0 {
		t.Fatalf("%d members differ from the oracle:\n%s", diff.members, strings.Join(diff.details, "\n"))
	}
}

// snapshot reads the offsets, retrying until they can be read.
func (c *chaos) snapshot() offsetSnap {
	deadline := time.Now().Add(recoveryTimeout)
	for {
		s, err := c.off.read(c.t.Context())
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			c.failWithLogs("offsets unreadable for %v: %v", recoveryTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recoveryWatch watches, from the injection of a fault on and while the
// fault is repaired, for the moment every partition has committed beyond
// the log end it had before the fault.
type recoveryWatch struct {
	done  chan struct{}
	at    time.Time // when the recovery was seen
	err   error
	parts map[partKey]time.Time // when each partition was seen past its end
	// stall is each partition's longest time without its committed
	// offset moving while messages waited, within the watch.
	stall map[partKey]time.Duration
}

func (c *chaos) watchRecovery(before offsetSnap, since time.Time, what string) *recoveryWatch {
	return c.watchRecoveryFor(before, since, what, 0)
}

// watchRecoveryFor is watchRecovery that goes on watching the stalls at
// least for window from since, even once recovered.
func (c *chaos) watchRecoveryFor(before offsetSnap, since time.Time, what string, window time.Duration) *recoveryWatch {
	w := &recoveryWatch{done: make(chan struct{}), parts: make(map[partKey]time.Time), stall: make(map[partKey]time.Duration)}
	go func() {
		defer close(w.done)
		var last offsetSnap
		var lastErr error
		moved := make(map[partKey]time.Time) // when the committed offset last moved, or nothing waited
		committed := make(map[partKey]int64)
		for k := range before.end {
			moved[k], committed[k] = since, before.committed[k]
		}
		for {
			s, err := c.off.read(c.t.Context())
			if err == nil {
				for k, e := range before.end {
					if _, ok := w.parts[k]; !ok && s.committed[k] > e {
						w.parts[k] = s.at
					}
					if s.committed[k] != committed[k] || s.committed[k] >= s.end[k] {
						committed[k], moved[k] = s.committed[k], s.at
					}
					w.stall[k] = max(w.stall[k], s.at.Sub(moved[k]))
				}
				if w.at.IsZero() && s.progressedPast(before) {
					w.at = s.at
				}
				if !w.at.IsZero() && s.at.Sub(since) >= window {
					return
				}
				last = s
			}
			lastErr = err
			if time.Since(since) > recoveryTimeout || c.t.Context().Err() != nil {
				var stuck []string
				for k, e := range before.end {
					if last.committed[k] <= e {
						stuck = append(stuck, fmt.Sprintf("%s committed %d, end then %d, now %d", k, last.committed[k], e, last.end[k]))
					}
				}
				w.err = fmt.Errorf("%s: not recovered after %v (last error %v); partitions not past the end at the fault: %s",
					what, recoveryTimeout, lastErr, strings.Join(stuck, "; "))
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

// wait waits for the recovery, checking meanwhile that every instance
// runs.
func (w *recoveryWatch) wait(c *chaos) (time.Time, error) {
	for {
		select {
		case <-w.done:
			return w.at, w.err
		case <-time.After(200 * time.Millisecond):
			c.checkAlive()
		}
	}
}

// checkAlive fails the test if an instance that should run has exited.
func (c *chaos) checkAlive() {
	for _, in := range c.instances {
		if in.runs > 0 && !in.running() && in != c.down {
			c.failWithLogs("%s exited by itself: %v", in.name, in.exitErr())
		}
	}
}

func (c *chaos) failWithLogs(format string, args ...any) {
	c.t.Helper()
	var b strings.Builder
	for _, in := range c.instances {
		fmt.Fprintf(&b, "\n--- %s (last lines; full log %s)\n%s\n", in.name, in.logPath, in.tail(25))
	}
	c.t.Fatalf(format+"%s", append(args, b.String())...)
}

// inject injects one fault, repairs it and waits for the recovery.
func (c *chaos) inject(kind faultKind) fault {
	t := c.t
	before := c.snapshot()
	f := fault{kind: kind}
	injected := time.Now()
	f.at = injected.Sub(c.start)
	watch := c.watchRecovery(before, injected, string(kind))
	var repaired time.Time
	switch kind {
	case faultKill, faultTerm:
		in := c.instances[c.rng.IntN(len(c.instances))]
		f.target = in.name
		var down time.Duration
		if kind == faultKill {
			down = time.Duration(c.rng.IntN(3000)) * time.Millisecond
			in.kill()
		} else {
			down = time.Duration(c.rng.IntN(1000)) * time.Millisecond
			code, err := in.term(30 * time.Second)
			if err != nil || code != 0 {
				c.failWithLogs("%s: exit %d after SIGTERM (%v), want 0", in.name, code, err)
			}
			f.note = fmt.Sprintf("(exited 0 in %v)", time.Since(injected).Round(time.Millisecond))
		}
		time.Sleep(down)
		if err := in.start(); err != nil {
			t.Fatal(err)
		}
		repaired = time.Now()
	case faultBroker:
		f.target = "broker"
		down := time.Duration(500+c.rng.IntN(1500)) * time.Millisecond
		c.broker.Kill()
		time.Sleep(down)
		if err := c.broker.Restart(); err != nil {
			t.Fatalf("broker restart: %v", err)
		}
		repaired = time.Now()
	case faultRedis:
		r := c.redis[c.rng.IntN(len(c.redis))]
		f.target = r.name
		down := time.Duration(200+c.rng.IntN(1800)) * time.Millisecond
		if err := r.srv.Kill(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(down)
		if err := r.srv.Start(); err != nil {
			t.Fatalf("%s restart: %v", r.name, err)
		}
		if c.cluster != nil {
			if err := c.cluster.WaitReady(60 * time.Second); err != nil {
				t.Fatalf("cluster after restarting %s: %v", r.name, err)
			}
		}
		repaired = time.Now()
	case faultPause:
		r := c.redis[c.rng.IntN(len(c.redis))]
		f.target = r.name
		d := c.plan.pauseMin + time.Duration(c.rng.Int64N(int64(c.plan.pauseMax-c.plan.pauseMin)+1))
		pid := r.srv.PID()
		if pid == 0 {
			t.Fatalf("%s is not running", r.name)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		repaired = time.Now()
	}
	f.outage = repaired.Sub(injected)
	at, err := watch.wait(c)
	if err != nil {
		c.failWithLogs("%v", err)
	}
	f.recovery = at.Sub(injected)
	f.afterFix = at.Sub(repaired)
	return f
}
