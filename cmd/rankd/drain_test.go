package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// BenchmarkDrain is the end-to-end performance benchmark of issue 3: the
// standard workload is preloaded into a broker, then drained into Redis by
// rankd (the consumer stack of `rankd run`, in process) and by a naive
// consumer (one Redis round trip per update), each from its own consumer
// group into an emptied Redis:
//
//	go test -run '^$' -bench BenchmarkDrain -benchtime 1x -timeout 30m ./cmd/rankd/
//
// Setup, done once: a Kafka-protocol broker in its own process (kbroker:
// kfake, so its CPU is measured apart) with gift, like and comment (6
// partitions each), their naive-* copies and the dead-letter topic; a
// dedicated redis-server; N events of the standard workload
// (RANKD_DRAIN_EVENTS, default 1,000,000; fixed seed) with event times
// spread evenly over 4 hours of yesterday morning in Asia/Shanghai,
// produced by RANKD_DRAIN_PRODUCERS goroutines (default 4) through one
// Writer tuned as `rankd produce` tunes it (BatchSize 1000, BatchTimeout
// 5ms, sync); then the first M of the same events to the naive-* topics.
//
// rankd: config.Example() with the benchmark's addresses, group and key
// prefix, a 72h grace on the Shanghai boards (as in the crash test; see
// drainEnv.config; RANKD_DRAIN_GRACE=example keeps the example's 5m),
// RANKD_DRAIN_WORKERS workers (default 3) and batches of
// RANKD_DRAIN_BATCH messages (default 2000) with RANKD_DRAIN_LINGER linger
// (default 20ms), wired by newStack as `rankd run` wires it. Timed from
// the start of the stack (group join included) until every partition's
// committed offset is its end offset (consumer.GroupLag, polled every
// 50ms). It checks that every event was consumed, nothing was
// dead-lettered and the updates applied per board are those the router
// gives for the produced events. RANKD_DRAIN_CPUPROFILE=FILE writes a CPU
// profile of the drain alone.
//
// naive: a kafka-go group Reader on the naive-* topics, FetchMessage one
// at a time, the same schemas and router, then one EVALSHA per update (SET
// NX PX of the message ID and board, ZINCRBY of the period's sorted set)
// and a commit every 1000 messages, for the first RANKD_DRAIN_NAIVE_EVENTS
// events of the workload (default 100,000).
//
// Each reports events/s and CPU per event of Redis (INFO cpu), of this
// process (getrusage: the consumer, plus the lag polling) and of the broker
// process (/proc), Redis' command statistics, and the ratio rankd/naive.
// RANKD_DRAIN_BROKER=inprocess runs kfake inside the test process instead
// (its CPU then counts as the consumer's).
func BenchmarkDrain(b *testing.B) {
	for _, k := range []string{"RANKD_KAFKA_BROKERS", "RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS", "RANKD_REDIS_PASSWORD", "RANKD_HTTP_LISTEN"} {
		b.Setenv(k, "") // the config must take the benchmark's addresses
	}
	env := setupDrain(b, drainSettingsFromEnv(b))
	var rankd, naive *drainResult
	b.Run("rankd", func(b *testing.B) {
		for i := range b.N {
			rankd = env.drainRankd(b, i)
		}
		rankd.report(b)
		env.table(b, rankd, nil, rankd)
	})
	b.Run("naive", func(b *testing.B) {
		for i := range b.N {
			naive = env.drainNaive(b, i)
		}
		naive.report(b)
		if rankd != nil {
			b.ReportMetric(rankd.rate()/naive.rate(), "rankd/naive")
		}
		env.table(b, rankd, naive, naive)
	})
}

const (
	drainPartitions = 6
	drainSeed       = 20261121
	drainSpan       = 4 * time.Hour // of event times, in one day
	drainChunk      = 5000          // messages per WriteMessages call
	drainPoll       = 50 * time.Millisecond
	drainTimeout    = 10 * time.Minute // per drain
	naiveCommit     = 1000             // messages per naive commit
)

var drainTopics = []string{"gift", "like", "comment"}

// naiveTopicPrefix names the naive consumer's copies of the topics: they
// hold the first M events of the workload, so that it consumes the
// workload's mix (the first M messages of all 18 partitions would be a
// third gifts, at 2.1 updates per event instead of 1.3).
const naiveTopicPrefix = "naive-"

func naiveTopics() []string {
	var ts []string
	for _, t := range drainTopics {
		ts = append(ts, naiveTopicPrefix+t)
	}
	return ts
}

// drainSettings are the benchmark's knobs (environment variables).
type drainSettings struct {
	events      int           // RANKD_DRAIN_EVENTS
	naiveEvents int           // RANKD_DRAIN_NAIVE_EVENTS
	workers     int           // RANKD_DRAIN_WORKERS: kafka.workers
	batch       int           // RANKD_DRAIN_BATCH: kafka.batch.count
	linger      time.Duration // RANKD_DRAIN_LINGER: kafka.batch.linger
	producers   int           // RANKD_DRAIN_PRODUCERS: preload goroutines
	inProcess   bool          // RANKD_DRAIN_BROKER=inprocess
	keepGrace   bool          // RANKD_DRAIN_GRACE=example
	profile     string        // RANKD_DRAIN_CPUPROFILE
}

func drainSettingsFromEnv(b *testing.B) drainSettings {
	s := drainSettings{events: 1_000_000, naiveEvents: 100_000, workers: 3, batch: 2000,
		linger: 20 * time.Millisecond, producers: 4}
	ints := []struct {
		name string
		dst  *int
	}{
		{"RANKD_DRAIN_EVENTS", &s.events},
		{"RANKD_DRAIN_NAIVE_EVENTS", &s.naiveEvents},
		{"RANKD_DRAIN_WORKERS", &s.workers},
		{"RANKD_DRAIN_BATCH", &s.batch},
		{"RANKD_DRAIN_PRODUCERS", &s.producers},
	}
	for _, v := range ints {
		if e := os.Getenv(v.name); e != "" {
			n, err := strconv.Atoi(e)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a positive integer", v.name, e)
			}
			*v.dst = n
		}
	}
	if e := os.Getenv("RANKD_DRAIN_LINGER"); e != "" {
		d, err := time.ParseDuration(e)
		if err != nil || d <= 0 {
			b.Fatalf("RANKD_DRAIN_LINGER=%q: want a positive duration", e)
		}
		s.linger = d
	}
	switch e := os.Getenv("RANKD_DRAIN_BROKER"); e {
	case "", "process":
	case "inprocess":
		s.inProcess = true
	default:
		b.Fatalf("RANKD_DRAIN_BROKER=%q: want process or inprocess", e)
	}
	switch e := os.Getenv("RANKD_DRAIN_GRACE"); e {
	case "", "72h":
	case "example":
		s.keepGrace = true
	default:
		b.Fatalf("RANKD_DRAIN_GRACE=%q: want 72h or example", e)
	}
	s.naiveEvents = min(s.naiveEvents, s.events)
	s.profile = os.Getenv("RANKD_DRAIN_CPUPROFILE")
	return s
}

// drainEnv is the preloaded broker and the Redis server.
type drainEnv struct {
	set       drainSettings
	brokers   []string
	brokerPID int // 0 for an in-process broker
	srv       *testenv.RedisServer
	admin     *redis.Client
	start     time.Time // ts of the first event
	step      time.Duration
	// expect is the updates per board that routing the N events gives.
	expect      map[string]int64
	expectTotal int64
	preload     time.Duration
}

func setupDrain(b *testing.B, set drainSettings) *drainEnv {
	env := &drainEnv{set: set}
	if set.inProcess {
		seeds := map[string]int{consumer.DefaultDeadLetterTopic: drainPartitions}
		for _, t := range append(naiveTopics(), drainTopics...) {
			seeds[t] = drainPartitions
		}
		env.brokers = testenv.NewKafka(b, testenv.KafkaOptions{SeedTopics: seeds, Partitions: drainPartitions}).Addrs()
	} else {
		bp := testenv.StartBrokerProcess(b, testenv.BrokerProcessOptions{
			Topics: append(append(naiveTopics(), drainTopics...), consumer.DefaultDeadLetterTopic), Partitions: drainPartitions})
		env.brokers, env.brokerPID = bp.Addrs(), bp.PID()
	}
	env.srv = testenv.NewRedis(b, testenv.RedisOptions{})
	env.admin = redis.NewClient(&redis.Options{Addr: env.srv.Addr()})
	b.Cleanup(func() { _ = env.admin.Close() })

	// Yesterday 08:00-12:00 in Shanghai: one day for the day boards, in
	// the past (future_skew), eight 30m periods.
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		b.Fatal(err)
	}
	y, m, d := time.Now().In(sh).AddDate(0, 0, -1).Date()
	env.start = time.Date(y, m, d, 8, 0, 0, 0, sh)
	env.step = drainSpan / time.Duration(set.events)

	env.preload = env.produce(b, "", set.events)
	env.produce(b, naiveTopicPrefix, set.naiveEvents)
	env.route(b)
	return env
}

func (env *drainEnv) workload(b *testing.B) *workload {
	wl, err := newWorkload(workloadConfig{Seed: drainSeed, Start: env.start, Step: env.step})
	if err != nil {
		b.Fatal(err)
	}
	return wl
}

// produce preloads the first n events of the workload to the topics named
// prefix+topic and returns how long it took: one goroutine generates
// chunks, several write them through one Writer (BatchSize 1000,
// BatchTimeout 5ms, sync).
func (env *drainEnv) produce(b *testing.B, prefix string, n int) time.Duration {
	wl := env.workload(b)
	w := newWriter(env.brokers)
	defer w.Close()
	chunks := make(chan []kafka.Message, 2*env.set.producers)
	start := time.Now()
	g, ctx := errgroup.WithContext(b.Context())
	g.Go(func() error {
		defer close(chunks)
		for sent := 0; sent < n; {
			c := make([]kafka.Message, min(drainChunk, n-sent))
			for i := range c {
				ev := wl.next()
				c[i] = kafka.Message{Topic: prefix + ev.Topic, Key: ev.Key, Value: ev.Value}
			}
			sent += len(c)
			select {
			case chunks <- c:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	for range env.set.producers {
		g.Go(func() error {
			for c := range chunks {
				if err := w.WriteMessages(ctx, c...); err != nil {
					return fmt.Errorf("preload: writing %d messages: %w", len(c), writeErr(err))
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// route counts the updates per board of the N events, routed as rankd
// routes them (same generator and seed: the same events).
func (env *drainEnv) route(b *testing.B) {
	cfg := env.config(b, "count", "count")
	router, err := cfg.Router()
	if err != nil {
		b.Fatal(err)
	}
	wl := env.workload(b)
	env.expect = map[string]int64{}
	for range env.set.events {
		ev := wl.next()
		e, err := cfg.Schemas()[ev.Topic].Decode(ev.Topic, 0, 0, ev.Value, nil, time.Now())
		if err != nil {
			b.Fatalf("generated event does not decode: %v: %s", err, ev.Value)
		}
		ups, err := router.Route(e)
		if err != nil {
			b.Fatalf("generated event does not route: %v: %s", err, ev.Value)
		}
		for _, u := range ups {
			env.expect[u.Board]++
		}
		env.expectTotal += int64(len(ups))
	}
}

// config is the example config with the benchmark's addresses, group, key
// prefix and batching. The Shanghai boards get a 72h grace, as in the
// crash test: partitions are keyed by anchor, and zipf anchors make them
// very unequal in size; kafka-go hands out messages of all partitions of a
// reader at about the same rate, so the small partitions reach the end of
// the 4 hours of event time while the big ones are an hour or more behind,
// and with the default 5m grace the 30m boards would seal periods the big
// partitions still have events for (late, dead-lettered).
func (env *drainEnv) config(b *testing.B, group, prefix string) *config.Config {
	b.Helper()
	text := string(config.Example())
	repl := [][2]string{
		{"brokers: [localhost:9092]", "brokers: [" + strings.Join(env.brokers, ", ") + "]"},
		{"addr: localhost:6379", "addr: " + env.srv.Addr()},
		{`listen: ":8080"`, `listen: "127.0.0.1:0"`},
		{"\n  group: rankd\n", "\n  group: " + group + "\n"},
		{"\n  prefix: rankd\n", "\n  prefix: " + prefix + "\n"},
		{"\n  workers: 2\n", fmt.Sprintf("\n  workers: %d\n", env.set.workers)},
		{"\n    count: 1000 ", fmt.Sprintf("\n    count: %d ", env.set.batch)},
		{"\n    linger: 20ms ", "\n    linger: " + env.set.linger.String() + " "},
	}
	if !env.set.keepGrace {
		repl = append(repl, [2]string{"x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n", "x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n  grace: 72h\n"})
	}
	for _, r := range repl {
		if strings.Count(text, r[0]) != 1 {
			b.Fatalf("config/example.yaml: %q is not there exactly once; update BenchmarkDrain", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	cfg, err := config.LoadBytes("drain.yaml", []byte(text))
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// drainResult is one measured drain.
type drainResult struct {
	events     int64
	updates    int64
	elapsed    time.Duration
	redisCPU   time.Duration
	selfCPU    time.Duration
	brokerCPU  time.Duration
	haveSelf   bool
	haveBroker bool
	notes      []string
}

func (r *drainResult) rate() float64 { return float64(r.events) / r.elapsed.Seconds() }

// us returns d per event in microseconds (= ms per 1k events).
func (r *drainResult) us(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(r.events)
}

func (r *drainResult) report(b *testing.B) {
	b.ReportMetric(r.rate(), "events/s")
	b.ReportMetric(r.us(r.redisCPU), "redis-cpu-us/event")
	if r.haveSelf {
		b.ReportMetric(r.us(r.selfCPU), "consumer-cpu-us/event")
	}
	if r.haveBroker {
		b.ReportMetric(r.us(r.brokerCPU), "broker-cpu-us/event")
	}
}

// cpuMeter reads the CPU times of Redis, this process and the broker.
type cpuMeter struct {
	redis, self, broker time.Duration
	haveSelf, haveBrk   bool
}

func (env *drainEnv) cpu(b *testing.B) cpuMeter {
	var m cpuMeter
	s, err := env.srv.UsedCPU(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	m.redis = time.Duration(s * float64(time.Second))
	m.self, m.haveSelf = selfCPU()
	m.broker, m.haveBrk = pidCPU(env.brokerPID)
	return m
}

func (r *drainResult) setCPU(before, after cpuMeter) {
	r.redisCPU = after.redis - before.redis
	r.selfCPU, r.haveSelf = after.self-before.self, before.haveSelf && after.haveSelf
	r.brokerCPU, r.haveBroker = after.broker-before.broker, before.haveBrk && after.haveBrk
}

// flushRedis empties Redis and resets its command statistics, so that
// every drain starts from the same state.
func (env *drainEnv) flushRedis(b *testing.B) {
	if err := env.admin.FlushAll(b.Context()).Err(); err != nil {
		b.Fatal(err)
	}
	if err := env.admin.ConfigResetStat(b.Context()).Err(); err != nil {
		b.Fatal(err)
	}
}

// commandStats returns a note on where Redis spent its time since the
// last flushRedis (INFO commandstats: commands called by scripts are
// counted on their own and within the script's time).
func (env *drainEnv) commandStats(b *testing.B, who string, events int64, cpu time.Duration) string {
	info, err := env.admin.Info(b.Context(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	type stat struct {
		name        string
		calls, usec int64
	}
	var stats []stat
	var scripts, inner int64
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		st := stat{name: name}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
		switch name {
		case "evalsha", "eval":
			scripts += st.usec
		case "info", "config|resetstat", "ping", "script|load", "flushall", "hello", "client|setinfo", "sadd":
		default:
			inner += st.usec
		}
		stats = append(stats, st)
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].usec > stats[j].usec })
	per := func(usec int64) float64 { return float64(usec) / float64(events) }
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: redis cpu %.2f µs/event = scripts %.2f (commands inside %.2f + Lua %.2f) + outside scripts (network, parsing, other) %.2f; by command, µs/event (calls/event):",
		who, per(cpu.Microseconds()), per(scripts), per(inner), per(scripts-inner), per(cpu.Microseconds()-scripts))
	for i, st := range stats {
		if i == 8 {
			break
		}
		fmt.Fprintf(&sb, " %s %.2f (%.2f)", st.name, per(st.usec), float64(st.calls)/float64(events))
	}
	return sb.String()
}

// drainRankd runs rankd's stack on a new group until it has committed every
// message.
func (env *drainEnv) drainRankd(b *testing.B, iter int) *drainResult {
	b.StopTimer()
	env.flushRedis(b)
	group := fmt.Sprintf("drain-rankd-%d", iter)
	cfg := env.config(b, group, "drain")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := newStack(cfg, log, groupTuning{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := s.listen()
	if err != nil {
		b.Fatal(err)
	}
	lag := newDrainLag(env.brokers, group)
	defer lag.close()

	profiling := false
	if env.set.profile != "" {
		f, err := os.Create(env.set.profile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Logf("RANKD_DRAIN_CPUPROFILE: %v (not profiling)", err)
		} else {
			profiling = true
			defer pprof.StopCPUProfile() // when failing early; a second stop does nothing
		}
	}
	before := env.cpu(b)
	b.StartTimer()
	start := time.Now()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.run(ctx, ln) }()
	first := lag.wait(b, done, int64(env.set.events))
	elapsed := time.Since(start)
	b.StopTimer()
	after := env.cpu(b)
	if profiling {
		pprof.StopCPUProfile()
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("rankd: %v", err)
	}

	r := &drainResult{events: int64(env.set.events), elapsed: elapsed}
	r.setCPU(before, after)
	consumed := counterSum(b, s.reg, "rankd_consumer_messages_total")
	dead := counterSum(b, s.reg, "rankd_consumer_dead_letters_total")
	dups := counterSum(b, s.reg, "rankd_sink_duplicates_total")
	applied := counterByLabel(b, s.reg, "rankd_sink_updates_applied_total", "board")
	batches, batchMsgs := histogram(b, s.reg, "rankd_consumer_batch_messages")
	_, applySecs := histogram(b, s.reg, "rankd_consumer_apply_duration_seconds")
	for _, v := range applied {
		r.updates += int64(v)
	}
	if consumed < float64(env.set.events) {
		b.Errorf("rankd consumed %.0f messages, want %d", consumed, env.set.events)
	}
	if dead != 0 {
		b.Errorf("rankd dead-lettered %.0f messages, want none", dead)
	}
	boards := make([]string, 0, len(env.expect))
	for board := range env.expect {
		boards = append(boards, board)
	}
	sort.Strings(boards)
	for _, board := range boards {
		if got := int64(applied[board]); got != env.expect[board] {
			b.Errorf("board %s: %d updates applied, want %d (routed from the produced events)", board, got, env.expect[board])
		}
	}
	if r.updates != env.expectTotal {
		b.Errorf("rankd applied %d updates, want %d", r.updates, env.expectTotal)
	}
	r.notes = append(r.notes,
		fmt.Sprintf("rankd: workers %d, batch count %d (bytes 4 MiB), linger %v, max_wait %v, min_bytes %d; group joined and first batch committed after %v",
			cfg.Kafka.Workers, cfg.Kafka.Batch.Count, cfg.Kafka.Batch.Linger, cfg.Kafka.MaxWait, cfg.Kafka.MinBytes, first.Round(time.Millisecond)),
		fmt.Sprintf("rankd: %.0f messages consumed, %.0f duplicates skipped, %.0f dead letters; %d updates applied (%.3f per event), as routed: %v",
			consumed, dups, dead, r.updates, float64(r.updates)/float64(r.events), r.updates == env.expectTotal),
		fmt.Sprintf("rankd: %.0f batches of %.0f messages on average; Sink.Apply (decode+route+Store.Apply) busy %.1fs of %d workers x %.1fs (%.0f%%)",
			batches, batchMsgs/max(batches, 1), applySecs, cfg.Kafka.Workers, elapsed.Seconds(),
			100*applySecs/(float64(cfg.Kafka.Workers)*elapsed.Seconds())),
		env.commandStats(b, "rankd", r.events, r.redisCPU))
	return r
}

// naiveScript is the naive consumer's per-update script: dedupe on the
// message ID (and board: one event may feed several boards) and increment.
const naiveScript = `
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return redis.call('ZINCRBY', KEYS[2], ARGV[2], ARGV[3])
end
return false`

// drainNaive consumes the first M messages the naive way.
func (env *drainEnv) drainNaive(b *testing.B, iter int) *drainResult {
	b.StopTimer()
	env.flushRedis(b)
	group := fmt.Sprintf("drain-naive-%d", iter)
	cfg := env.config(b, group, "naive")
	router, err := cfg.Router()
	if err != nil {
		b.Fatal(err)
	}
	schemas := cfg.Schemas()
	prefix := cfg.Redis.Prefix
	ttl := strconv.FormatInt(cfg.Redis.DedupeTTL.Milliseconds(), 10)
	rdb := redis.NewClient(&redis.Options{Addr: env.srv.Addr()})
	defer rdb.Close()
	script := redis.NewScript(naiveScript)
	if err := script.Load(b.Context(), rdb).Err(); err != nil {
		b.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:         env.brokers,
		GroupID:         group,
		GroupTopics:     naiveTopics(),
		QueueCapacity:   1000,
		MinBytes:        1,
		MaxBytes:        1e6,
		MaxWait:         250 * time.Millisecond,
		ReadLagInterval: -1,
		CommitInterval:  0,
		StartOffset:     kafka.FirstOffset,
	})
	defer r.Close()

	ctx := b.Context()
	n := env.set.naiveEvents
	res := &drainResult{events: int64(n)}
	before := env.cpu(b)
	b.StartTimer()
	start := time.Now()
	pending := make([]kafka.Message, 0, naiveCommit)
	var ups []ranking.Update
	for i := 0; i < n; i++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			b.Fatalf("naive: fetching: %v", err)
		}
		topic := strings.TrimPrefix(m.Topic, naiveTopicPrefix)
		ev, err := schemas[topic].Decode(topic, m.Partition, m.Offset, m.Value, nil, m.Time)
		if err != nil {
			b.Fatalf("naive: decoding %s/%d@%d: %v", m.Topic, m.Partition, m.Offset, err)
		}
		if ups, err = router.AppendRoute(ups[:0], ev); err != nil {
			b.Fatalf("naive: routing %s/%d@%d: %v", m.Topic, m.Partition, m.Offset, err)
		}
		for k := range ups {
			u := &ups[k]
			board := cfg.Board(u.Board)
			tag := store.Tag(u.Board, u.Dims)
			zkey := store.Key(prefix, tag, "t", "all")
			if board.Window != ranking.WindowTotal {
				zkey = store.Key(prefix, tag, "p", board.Calendar().At(u.Time).ID)
			}
			err := script.Run(ctx, rdb, []string{prefix + ":d:" + u.MsgID + ":" + u.Board, zkey}, ttl, u.Value, u.Member).Err()
			if err != nil && !errors.Is(err, redis.Nil) {
				b.Fatalf("naive: applying: %v", err)
			}
			res.updates++
		}
		pending = append(pending, m)
		if len(pending) == naiveCommit || i == n-1 {
			if err := r.CommitMessages(ctx, pending...); err != nil {
				b.Fatalf("naive: committing: %v", err)
			}
			pending = pending[:0]
		}
	}
	res.elapsed = time.Since(start)
	b.StopTimer()
	after := env.cpu(b)
	res.setCPU(before, after)
	res.notes = append(res.notes, fmt.Sprintf("naive: one group Reader, %d messages, %d updates (%.3f per event), one EVALSHA per update, commit every %d messages",
		n, res.updates, float64(res.updates)/float64(n), naiveCommit),
		env.commandStats(b, "naive", res.events, res.redisCPU))
	return res
}

// table logs the results of rankd and naive (either may be nil) side by
// side, with the notes of notesOf. (Only leaf benchmarks print their logs
// without -v, so each sub-benchmark logs the table it can.)
func (env *drainEnv) table(b *testing.B, rankd, naive, notesOf *drainResult) {
	results := []*drainResult{rankd, naive}
	var sb strings.Builder
	brokerKind := "kbroker process"
	if env.set.inProcess {
		brokerKind = "kfake in process (its CPU counts as the consumer's)"
	}
	fmt.Fprintf(&sb, "broker: %s, %d topics x %d partitions; redis-server %s; GOMAXPROCS %d\n",
		brokerKind, len(drainTopics), drainPartitions, env.srv.Addr(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&sb, "preload: %d events in %v = %.0f events/s (%d goroutines, one Writer: BatchSize 1000, BatchTimeout 5ms, sync); event times %s + %v (step %v)\n",
		env.set.events, env.preload.Round(time.Millisecond), float64(env.set.events)/env.preload.Seconds(), env.set.producers,
		env.start.Format(time.RFC3339), drainSpan, env.step)
	fmt.Fprintf(&sb, "CPU per event in µs (= ms per 1k events); redis busy = Redis CPU / wall time (its one thread)\n")
	fmt.Fprintf(&sb, "%-6s %9s %9s %8s %9s %11s %13s %15s %12s\n",
		"", "events", "updates", "seconds", "events/s", "redis busy", "redis cpu/ev", "consumer cpu/ev", "broker cpu/ev")
	names := []string{"rankd", "naive"}
	var rates [2]float64
	for i, r := range results {
		if r == nil {
			continue
		}
		rates[i] = r.rate()
		self, brk := "-", "-"
		if r.haveSelf {
			self = fmt.Sprintf("%.2f", r.us(r.selfCPU))
		}
		if r.haveBroker {
			brk = fmt.Sprintf("%.2f", r.us(r.brokerCPU))
		}
		fmt.Fprintf(&sb, "%-6s %9d %9d %8.2f %9.0f %10.0f%% %13.2f %15s %12s\n",
			names[i], r.events, r.updates, r.elapsed.Seconds(), r.rate(), 100*r.redisCPU.Seconds()/r.elapsed.Seconds(),
			r.us(r.redisCPU), self, brk)
	}
	if rates[0] > 0 && rates[1] > 0 {
		fmt.Fprintf(&sb, "ratio rankd/naive events/s: %.1fx\n", rates[0]/rates[1])
	}
	for _, n := range notesOf.notes {
		sb.WriteString(n + "\n")
	}
	// Benchmarks print at most 10 lines of log: this is 9.
	b.Log(strings.TrimRight(sb.String(), "\n"))
}

// drainLag watches a group's committed offsets.
type drainLag struct {
	tr     *kafka.Transport
	client *kafka.Client
	group  string
}

func newDrainLag(brokers []string, group string) *drainLag {
	tr := &kafka.Transport{}
	return &drainLag{tr: tr, client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second}, group: group}
}

func (l *drainLag) close() { l.tr.CloseIdleConnections() }

// wait polls until every partition is committed up to its end offset and
// the end offsets add up to events; it returns when the first commit was
// seen (relative to its start). It fails when the consumer exits first
// (done) or after drainTimeout.
func (l *drainLag) wait(b *testing.B, done <-chan error, events int64) time.Duration {
	start := time.Now()
	var first time.Duration
	for {
		lags, err := consumer.GroupLag(b.Context(), l.client, l.group, drainTopics)
		if err != nil && !errors.Is(err, kafka.GroupIdNotFound) {
			b.Fatalf("group lag: %v", err)
		}
		var end, committed, lag int64
		for _, pl := range lags {
			end += pl.End
			committed += max(pl.Committed, 0)
			lag += pl.Lag
		}
		if first == 0 && committed > 0 {
			first = time.Since(start)
		}
		if err == nil && lag == 0 && end == events {
			return first
		}
		if end > events {
			b.Fatalf("the topics hold %d messages, want %d", end, events)
		}
		select {
		case err := <-done:
			b.Fatalf("the consumer stopped before draining (%d of %d committed): %v", committed, end, err)
		case <-time.After(drainPoll):
		}
		if time.Since(start) > drainTimeout {
			b.Fatalf("not drained after %v: %d of %d committed", drainTimeout, committed, end)
		}
	}
}

// counterSum returns the sum of a counter family's series.
func counterSum(b *testing.B, g prometheus.Gatherer, name string) float64 {
	var sum float64
	for _, v := range counterByLabel(b, g, name, "") {
		sum += v
	}
	return sum
}

// counterByLabel returns a counter family's values by the value of label.
func counterByLabel(b *testing.B, g prometheus.Gatherer, name, label string) map[string]float64 {
	mfs, err := g.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					key = lp.GetValue()
				}
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// histogram returns a histogram's sample count and sum.
func histogram(b *testing.B, g prometheus.Gatherer, name string) (count, sum float64) {
	mfs, err := g.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			count += float64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}
