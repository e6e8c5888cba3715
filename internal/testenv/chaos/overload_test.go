package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
)

// The overload test: Redis is stopped (SIGSTOP) while a producer sends a
// burst far faster than rankd could apply it even with Redis up. rankd must
// hold its memory bounded (it fetches no further than its in-flight caps:
// per worker the reader's queue of QueueCapacity (1000) messages, the
// fetches in progress (at most MaxBytes, 1 MB, per partition assigned) and
// the batch in hand (batch.count 1000 / batch.bytes 4 MiB); the backlog
// stays in Kafka), report the growing lag on /metrics, and after SIGCONT
// drain the backlog with every board equal to the oracle and nothing
// dropped.
//
// rankd computes rankd_consumer_lag_messages every 15 s (not
// configurable), so the pause lasts the burst plus 17 s: after the burst
// the true lag (log end - committed) is constant, and some computation
// during that quiet part must report it exactly.
const (
	overloadQuiet = 17 * time.Second
	// overloadRSSBoundMiB bounds rankd's resident memory while Redis is
	// stopped and while it drains, in MiB, without and with -race.
	//
	// Measured (1 instance, 2 workers, 18 partitions, ~125-byte messages):
	// 36 MiB after the warm-up, at most 42 MiB while stopped and 53 MiB
	// while draining a backlog of 400,000 messages (49 MiB of keys and
	// values); with -race 93-105, 114-121 and 135-150 MiB (120,000 messages). The
	// in-flight caps explain the flat line: per worker the reader's queue
	// (1000 messages) and the batch in hand (1000 messages or 4 MiB), plus
	// the fetches in progress (at most 1 MB per partition, 18 partitions):
	// about 20 MB at worst, twice that with the garbage collector's
	// headroom, on top of the baseline. Buffering the backlog instead
	// would take its 49 MiB plus the Go objects around every message and
	// the same headroom: far above the bound.
	overloadRSSBoundMiB     = 100
	overloadRSSBoundRaceMiB = 300
)

func runOverload(t *testing.T, bin string) {
	seed := chaosSeed(t)
	// The burst: 400,000 messages (about 50 MiB of keys and values, far
	// more as decoded Go objects: buffering it would show); 60,000 with
	// -race, which slows everything (the checks most).
	overloadWarmup, overloadBurst := 20_000, 400_000
	if testenv.RaceEnabled {
		overloadWarmup, overloadBurst = 10_000, 60_000
	}
	broker := testenv.StartBrokerProcess(t, testenv.BrokerProcessOptions{
		Topics: append(append([]string(nil), chaosTopics...), chaosDLQ), Partitions: chaosPartitions})
	brokers := broker.Addrs()
	srv := testenv.NewRedis(t, testenv.RedisOptions{})
	listen := freeAddr(t)
	path := writeConfig(t, "rankd", brokers[0], []string{srv.Addr()}, listen)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, "rankd", bin, path, listen)
	off := newOffsetReader(t, brokers, cfg.Kafka.Group, chaosTopics)
	clock := newEventClock(30*time.Hour, 60*time.Second)
	wl := newWorkload(seed, clock.now)
	prod := newProducer(brokers, wl, 0)
	t.Cleanup(func() { _ = prod.w.Close() })
	ctx := t.Context()

	waitDrained := func(what string, timeout time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			s, err := off.read(ctx)
			if err == nil && s.drained() {
				return time.Since(start)
			}
			if !in.running() {
				t.Fatalf("%s: rankd exited: %v\n%s", what, in.exitErr(), in.tail(30))
			}
			if time.Since(start) > timeout {
				t.Fatalf("%s: not drained after %v (lag %d, %v)\n%s", what, timeout, s.lag(), err, in.tail(30))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := in.start(); err != nil {
		t.Fatal(err)
	}
	if err := in.waitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	prod.send(ctx, overloadWarmup)
	warm := waitDrained("warm-up", 2*time.Minute)
	pid := in.pid()
	baseline, err := rssKiB(pid)
	if err != nil {
		t.Fatal(err)
	}

	// The sampler: rankd's RSS, its lag metric and the true lag, every
	// 100 ms from the pause to the end of the drain.
	type sample struct {
		at     time.Time
		rss    int64 // KiB
		metric float64
		scrape bool // metric read
		snap   offsetSnap
		snapOK bool
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for sctx.Err() == nil {
			s := sample{at: time.Now()}
			s.rss, _ = rssKiB(pid)
			if m, err := in.metrics(); err == nil {
				s.metric, s.scrape = sumMetric(m, "rankd_consumer_lag_messages"), true
			}
			if snap, err := off.read(sctx); err == nil {
				s.snap, s.snapOK = snap, true
			}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
			sleepCtx(sctx, 100*time.Millisecond)
		}
	}()
	defer func() { stopSampling(); wg.Wait() }()

	redisPID := srv.PID()
	if err := syscall.Kill(redisPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	bytesBefore := prod.ackedBytes()
	prod.send(ctx, overloadBurst)
	burst := time.Since(paused)
	backlogBytes := prod.ackedBytes() - bytesBefore
	quietStart := time.Now()
	quiet, err := off.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(overloadQuiet)
	quietEnd, err := off.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(redisPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	drain := waitDrained("after SIGCONT", 5*time.Minute)
	stopSampling()
	wg.Wait()
	after, _ := rssKiB(pid)

	// The lag during the quiet part of the pause is constant, and rankd
	// must have reported it.
	qc, qe := quiet.totals()
	qc2, qe2 := quietEnd.totals()
	if qc != qc2 || qe != qe2 {
		t.Fatalf("offsets moved while Redis was stopped and nothing was produced: committed %d -> %d, end %d -> %d", qc, qc2, qe, qe2)
	}
	trueLag := qe - qc
	var rssPause, rssDrain int64
	var lagMax, lagQuiet float64
	var lagSeries []string
	mu.Lock()
	for _, s := range samples {
		if s.at.Before(resumed) {
			rssPause = max(rssPause, s.rss)
		} else {
			rssDrain = max(rssDrain, s.rss)
		}
		if s.scrape {
			lagMax = max(lagMax, s.metric)
			if s.at.After(quietStart.Add(time.Second)) && s.at.Before(resumed) && s.metric == float64(trueLag) {
				lagQuiet = s.metric
			}
		}
	}
	step := max(1, len(samples)/12)
	for i := 0; i < len(samples); i += step {
		s := samples[i]
		metric, truth := "?", "?" // not read in time
		if s.scrape {
			metric = fmt.Sprint(s.metric)
		}
		if s.snapOK {
			truth = fmt.Sprint(s.snap.lag())
		}
		lagSeries = append(lagSeries, fmt.Sprintf("%+.0fs rss %.0fMiB metric %s true %s",
			s.at.Sub(paused).Seconds(), float64(s.rss)/1024, metric, truth))
	}
	mu.Unlock()
	if lagQuiet == 0 {
		t.Errorf("rankd_consumer_lag_messages never reported the lag of %d while Redis was stopped (max seen %.0f); samples:\n%s",
			trueLag, lagMax, strings.Join(lagSeries, "\n"))
	}
	if trueLag < int64(overloadBurst) {
		t.Errorf("lag while stopped %d, want at least the burst of %d", trueLag, overloadBurst)
	}

	code, err := in.term(30 * time.Second)
	if err != nil || code != 0 {
		t.Errorf("rankd: exit %d after SIGTERM (%v), want 0:\n%s", code, err, in.tail(30))
	}
	out := in.output()
	for _, bad := range []string{"panic:", "DATA RACE", "redis is behind kafka"} {
		if strings.Contains(out, bad) {
			t.Errorf("rankd printed %q:\n%s", bad, out)
		}
	}

	checkStart := time.Now()
	exp := expect(t, cfg, brokers, chaosTopics, prod)
	expected := time.Since(checkStart)
	checkMarks(t, srv.Client(t), cfg.Redis.Prefix, exp.log, exp.res)
	diff := compareBoards(t, cfg, srv.Client(t), exp.res.Oracle)
	t.Logf("checks: log read and oracle in %v, boards compared in %v", expected.Round(time.Millisecond), (time.Since(checkStart) - expected).Round(time.Millisecond))
	dlWhere, dlReasons := deadLetters(t, brokers, chaosDLQ)
	checkDeadLetters(t, dlWhere, exp.res)

	bound := int64(overloadRSSBoundMiB)
	if testenv.RaceEnabled {
		bound = overloadRSSBoundRaceMiB
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "overload summary\tseed %d, 1 x `rankd run` (2 workers), %d partitions, race %v\n", seed, chaosPartitions*len(chaosTopics), testenv.RaceEnabled)
	fmt.Fprintf(tw, "warm-up\t%d messages drained in %v; RSS %.0f MiB\n", overloadWarmup, warm.Round(time.Millisecond), float64(baseline)/1024)
	fmt.Fprintf(tw, "Redis stopped\t%v: burst of %d messages (%.1f MiB of keys and values) in %v, then %v quiet\n",
		resumed.Sub(paused).Round(time.Millisecond), overloadBurst, float64(backlogBytes)/(1<<20), burst.Round(time.Millisecond), overloadQuiet)
	fmt.Fprintf(tw, "RSS max\t%.0f MiB while stopped, %.0f MiB while draining, %.0f MiB after (bound %d MiB)\n",
		float64(rssPause)/1024, float64(rssDrain)/1024, float64(after)/1024, bound)
	fmt.Fprintf(tw, "lag max\t%.0f messages on /metrics (true lag while stopped: %d)\n", lagMax, trueLag)
	fmt.Fprintf(tw, "drained\tin %v after SIGCONT (%.0f messages/s)\n", drain.Round(time.Millisecond), float64(trueLag)/drain.Seconds())
	fmt.Fprintf(tw, "boards compared\t%d, %d rows; differing members %d\n", diff.boards, diff.rows, diff.members)
	fmt.Fprintf(tw, "dead letters\t%s\n", reasonsLine(dlReasons))
	tw.Flush()
	t.Log("\n" + b.String() + "samples:\n" + strings.Join(lagSeries, "\n"))
	if max(rssPause, rssDrain) > bound<<10 {
		t.Errorf("rankd's RSS reached %.0f MiB, above the bound of %d MiB", float64(max(rssPause, rssDrain))/1024, bound)
	}
	if diff.members > 0 {
		t.Fatalf("%d members differ from the oracle:\n%s", diff.members, strings.Join(diff.details, "\n"))
	}
}
