// Package bench is `rankd bench`: rankd's end-to-end benchmark. It starts
// its own Kafka-protocol broker (kfake in a child process) and redis-server
// (or uses given ones), preloads the standard workload and measures, in one
// run against the same servers:
//
//   - drain: events/s end to end, Redis CPU per event and per update, this
//     process's and the broker's CPU per event and Redis' command
//     statistics, for rankd (the consumer stack of `rankd run`, in
//     process), a naive consumer (one Redis round trip per event and board)
//     and the seed script pipelined (one EVALSHA per update, pipelined per
//     batch), each from its own consumer group into an emptied Redis;
//   - memory: Redis bytes per board member and per dedupe key after the
//     rankd drain;
//   - replay: the rebuild of every board from the preloaded log into a new
//     key generation, as `rankd replay` does it;
//   - latency: event-to-visible latency at a fixed produce rate (half the
//     rankd drain rate), from marker events whose effect is polled through
//     the HTTP API;
//   - rollover: the prefill of a rolling board of a million members, with
//     the worst latency a concurrent reader saw;
//   - cost: the Redis time of each kind of API read, estimated, modelled
//     and measured (cost.go);
//   - reads: the read API under 1,000 clients while ingestion runs
//     (reads.go).
//
// It prints one table and can write the results as JSON.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/servers"
)

// The phases, in the order they run.
const (
	PhaseNaive    = "naive"    // drain by the naive consumer
	PhaseSeed     = "seed"     // drain by the seed script, pipelined
	PhaseRankd    = "rankd"    // drain by rankd
	PhaseMemory   = "memory"   // Redis memory after the rankd drain
	PhaseReplay   = "replay"   // rebuild into a new generation
	PhaseLatency  = "latency"  // event-to-visible latency
	PhaseRollover = "rollover" // rollover of a big rolling board
)

// Phases lists the phases in the order they run.
var Phases = []string{PhaseNaive, PhaseSeed, PhaseRankd, PhaseMemory, PhaseReplay, PhaseLatency, PhaseRollover, PhaseCost, PhaseReads}

// CheckEnv is what Options.Check gets.
type CheckEnv struct {
	// Config is rankd's config of the run: brokers, Redis address, key
	// prefix, boards and routes.
	Config *config.Config
	// Topics are the preloaded topics (gift, like, comment).
	Topics []string
}

// Options configures Run. Zero values take the defaults.
type Options struct {
	// Events of the standard workload preloaded and drained; default
	// 1,000,000.
	Events int
	// NaiveEvents is how many of them the naive consumer drains (it is
	// slow); default min(100,000, Events).
	NaiveEvents int
	// Seed of the workload; default 20261121.
	Seed int64
	// Brokers: a Kafka cluster to use instead of starting a broker. It must
	// not hold the benchmark's topics with messages already.
	Brokers []string
	// Redis: the address of a Redis to use instead of starting one. Its
	// databases must be empty: the benchmark flushes it between phases.
	Redis string
	// Partitions per topic; default 6.
	Partitions int
	// TopicPartitions overrides Partitions for some of the workload's
	// topics (gift, comment, like; their naive copies follow). With
	// partitions in proportion to the topics' volumes (like=14, comment=4,
	// gift=2) every drained batch carries the workload's mix, as live
	// traffic does; with equal counts the small topics run dry first and
	// the drain ends on likes alone.
	TopicPartitions map[string]int
	// Workers, Batch and Linger are rankd's kafka.workers,
	// kafka.batch.count and kafka.batch.linger; default 3, 2000, 20ms.
	// Batch is the seed consumer's batch too.
	Workers int
	Batch   int
	Linger  time.Duration
	// Producers write the preload; default 4.
	Producers int
	// RedisNice, if not 0, is the nice value given to the redis-server
	// child (every thread): negative gives Redis more of the CPUs than
	// the benchmark's other processes when they contend, as a Redis with
	// a core of its own would have. Needs CAP_SYS_NICE; not with Redis.
	RedisNice int
	// RolloverMembers of the rolling board rolled over; default 1,000,000.
	RolloverMembers int
	// LatencyDuration is how long the latency phase produces; default 30s.
	LatencyDuration time.Duration
	// LatencyRate in events/s; default half the rankd drain rate (10,000
	// when the rankd drain is skipped).
	LatencyRate float64
	// PollInterval between two polls of the marker's score; default 1ms.
	PollInterval time.Duration
	// LatencyCacheTTL, if set, is rankd's api.cache_ttl in the latency
	// phase (negative: 0, no cache); default the config's.
	LatencyCacheTTL time.Duration
	// ReadClients, ReadRate and ReadDuration configure the reads phase
	// (reads.go): clients, ingestion events/s, seconds per run; default
	// 1000, 20,000 and 20s.
	ReadClients  int
	ReadRate     float64
	ReadDuration time.Duration
	// YieldLatency, if set, is rankd's api.yield_latency in every phase
	// (negative: 0, off); default the config's.
	YieldLatency time.Duration
	// CacheRefresh, if set, is rankd's api.cache_refresh in every phase
	// (negative: 0, off); default the config's.
	CacheRefresh time.Duration
	// Skip lists phases not to run (see Phases).
	Skip []string
	// CPUProfile, if set, is the file the CPU profile of the rankd drain
	// is written to.
	CPUProfile string
	// ReplayCPUProfile, if set, is the file the CPU profile of the replay
	// goes to.
	ReplayCPUProfile string
	// ReadsCPUProfile, if set, is the file the CPU profile of this
	// process (rankd, the producer, the pollers) during the reads phase's
	// top-20 run is written to.
	ReadsCPUProfile string
	// LatencyCPUProfile, if set, is the file the CPU profile of rankd
	// (this process) while the latency phase produces is written to.
	LatencyCPUProfile string
	// JSON, if set, is the file the results are written to as JSON.
	JSON string
	// Stdout receives the table, Stderr the progress line. Default: the
	// process's.
	Stdout, Stderr io.Writer
	// Log receives rankd's logs; default: warnings and errors to Stderr.
	Log *slog.Logger
	// Check, if set, is called after the rankd drain and after the replay
	// (phase PhaseRankd or PhaseReplay) with the boards in Redis, before
	// anything else changes them; an error stops the run.
	Check func(ctx context.Context, phase string, env CheckEnv) error
}

// Defaults.
const (
	DefaultEvents      = 1_000_000
	DefaultNaiveEvents = 100_000
	DefaultSeed        = 20261121
)

// withDefaults returns o with the defaults filled in.
func (o Options) withDefaults() Options {
	if o.Events == 0 {
		o.Events = DefaultEvents
	}
	if o.NaiveEvents == 0 {
		o.NaiveEvents = min(DefaultNaiveEvents, o.Events)
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Partitions == 0 {
		o.Partitions = 6
	}
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.Batch == 0 {
		o.Batch = 2000
	}
	if o.Linger == 0 {
		o.Linger = 20 * time.Millisecond
	}
	if o.Producers == 0 {
		o.Producers = 4
	}
	if o.RolloverMembers == 0 {
		o.RolloverMembers = 1_000_000
	}
	if o.LatencyDuration == 0 {
		o.LatencyDuration = 30 * time.Second
	}
	if o.ReadClients == 0 {
		o.ReadClients = 1000
	}
	if o.ReadRate == 0 {
		o.ReadRate = 20_000
	}
	if o.ReadDuration == 0 {
		o.ReadDuration = 20 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Millisecond
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return o
}

// Validate reports bad options (before defaults: zero means default).
func (o Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Events >= 0, "events %d: want a positive number", o.Events)
	check(o.NaiveEvents >= 0, "naive events %d: want a positive number", o.NaiveEvents)
	events := o.Events
	if events == 0 {
		events = DefaultEvents
	}
	check(o.NaiveEvents <= events, "naive events %d: at most the events (%d)", o.NaiveEvents, events)
	check(o.Partitions >= 0, "partitions %d: want a positive number", o.Partitions)
	for t, n := range o.TopicPartitions {
		check(slices.Contains(topics, t), "topic partitions: %q is not a topic of the workload (%s)", t, strings.Join(topics, ", "))
		check(n > 0, "topic partitions: %s=%d: want a positive number", t, n)
	}
	check(o.Workers >= 0 && o.Batch >= 0 && o.Linger >= 0 && o.Producers >= 0, "workers, batch, linger and producers must be positive")
	check(o.RolloverMembers >= 0, "rollover members %d: want a positive number", o.RolloverMembers)
	check(o.RedisNice >= -20 && o.RedisNice <= 19, "redis nice %d: want -20 to 19", o.RedisNice)
	check(o.RedisNice == 0 || o.Redis == "", "redis nice: only for the redis-server the benchmark starts, not with a given Redis")
	check(o.LatencyDuration >= 0 && o.LatencyRate >= 0 && o.PollInterval >= 0, "latency duration, rate and poll interval must be positive")
	for _, p := range o.Skip {
		check(slices.Contains(Phases, p), "skip %q: not a phase (%s)", p, strings.Join(Phases, ", "))
	}
	check(!slices.Contains(o.Skip, PhaseRankd) || slices.Contains(o.Skip, PhaseMemory),
		"the %s phase measures what the %s drain leaves: skip it too", PhaseMemory, PhaseRankd)
	return errors.Join(errs...)
}

func (o Options) skipped(phase string) bool { return slices.Contains(o.Skip, phase) }

// Run runs the benchmark: setup, preload, the phases not skipped, then the
// table on Stdout and the JSON file. Its error says which phase failed.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	began := time.Now()
	prog := newProgress(o.Stderr)
	defer prog.stop()
	e, err := setup(ctx, o, prog)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	defer e.close()
	res := &Result{Started: began.UTC().Format(time.RFC3339), Machine: e.machine(ctx), Settings: e.settings()}
	steal := readSteal()
	if res.Preload, err = e.preload(ctx); err != nil {
		return nil, fmt.Errorf("preload: %w", err)
	}
	run := func(phase string, f func() error) error {
		if o.skipped(phase) {
			return nil
		}
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", phase, err)
		}
		return nil
	}
	steps := []struct {
		phase string
		f     func() error
	}{
		{PhaseNaive, func() (err error) { res.Drain.Naive, err = e.drainNaive(ctx); return }},
		{PhaseSeed, func() (err error) { res.Drain.Seed, err = e.drainSeed(ctx); return }},
		{PhaseRankd, func() (err error) { res.Drain.Rankd, err = e.drainRankd(ctx); return }},
		{PhaseMemory, func() (err error) { res.Memory, err = e.memory(ctx); return }},
		{PhaseReplay, func() (err error) { res.Replay, err = e.replay(ctx); return }},
		{PhaseLatency, func() (err error) {
			rate := o.LatencyRate
			if rate == 0 {
				rate = 10_000
				if res.Drain.Rankd != nil {
					rate = res.Drain.Rankd.EventsPerSec / 2
				}
			}
			res.Latency, err = e.latency(ctx, rate)
			return
		}},
		{PhaseRollover, func() (err error) { res.Rollover, err = e.rollover(ctx); return }},
		{PhaseCost, func() (err error) { res.Cost, err = e.cost(ctx); return }},
		{PhaseReads, func() (err error) { res.Reads, err = e.reads(ctx); return }},
	}
	for _, s := range steps {
		if err := run(s.phase, s.f); err != nil {
			return res, err
		}
	}
	res.Drain.ratios()
	res.Seconds = round(time.Since(began).Seconds(), 1)
	res.Machine.StealPct = steal.stealPct()
	prog.stop()
	res.WriteTable(o.Stdout)
	if res.Cost != nil {
		res.Cost.Write(o.Stdout)
	}
	if res.Reads != nil {
		res.Reads.Write(o.Stdout)
	}
	if o.JSON != "" {
		if err := res.WriteJSON(o.JSON); err != nil {
			return res, err
		}
	}
	return res, nil
}

// topics are the preloaded topics, sorted.
var topics = []string{"comment", "gift", "like"}

// naivePrefix names the naive consumer's copies of the topics: they hold
// the first NaiveEvents events of the workload, so that it consumes the
// workload's mix (the first M messages of all partitions would be a third
// gifts, at 2.1 updates per event instead of 1.3).
const naivePrefix = "naive-"

func naiveTopics() []string {
	var out []string
	for _, t := range topics {
		out = append(out, naivePrefix+t)
	}
	return out
}

// env is the servers and what the phases share.
type env struct {
	o         Options
	prog      *progress
	brokers   []string
	brokerPID int // 0: not ours
	redisAddr string
	redisPID  int // 0: not ours
	admin     *redis.Client
	closers   []func()

	start time.Time     // event time of the first event
	step  time.Duration // between two events
	// expect is the updates per board that routing the Events gives.
	expect      map[string]int64
	expectTotal int64
	// emptyMemory is used_memory of the emptied Redis before the rankd
	// drain.
	emptyMemory int64
}

func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

func setup(ctx context.Context, o Options, prog *progress) (_ *env, err error) {
	e := &env{o: o, prog: prog}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	all := append(append(append([]string(nil), topics...), naiveTopics()...), consumer.DefaultDeadLetterTopic)
	if len(o.Brokers) > 0 {
		e.brokers = o.Brokers
	} else {
		prog.set("starting the broker", nil)
		b, err := servers.StartBroker(ctx, servers.BrokerOptions{Partitions: o.Partitions})
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, b.Close)
		e.brokers, e.brokerPID = []string{b.Addr()}, b.PID()
	}
	// the topics, each with its partition count, as on a given cluster
	if err := prepareTopics(ctx, e.brokers, all, o.partitionsOf); err != nil {
		return nil, err
	}
	if o.Redis != "" {
		e.redisAddr = o.Redis
	} else {
		prog.set("starting redis-server", nil)
		r, err := servers.StartRedis(ctx, servers.RedisOptions{})
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, r.Close)
		e.redisAddr, e.redisPID = r.Addr(), r.PID()
		if o.RedisNice != 0 {
			if err := renice(e.redisPID, o.RedisNice); err != nil {
				return nil, fmt.Errorf("redis nice %d: %w", o.RedisNice, err)
			}
		}
	}
	e.admin = redis.NewClient(&redis.Options{Addr: e.redisAddr})
	e.closers = append(e.closers, func() { _ = e.admin.Close() })
	if o.Redis != "" {
		if err := checkEmptyRedis(ctx, e.admin); err != nil {
			return nil, err
		}
		// Leave the given Redis empty, as it was.
		e.closers = append(e.closers, func() { _ = e.admin.FlushAll(context.WithoutCancel(ctx)).Err() })
	}
	// Yesterday 08:00-12:00 in Shanghai: one day for the day boards, in
	// the past (future_skew), eight 30m periods.
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		return nil, err
	}
	y, m, d := time.Now().In(sh).AddDate(0, 0, -1).Date()
	e.start = time.Date(y, m, d, 8, 0, 0, 0, sh)
	e.step = eventSpan / time.Duration(o.Events)
	return e, nil
}

// eventSpan is the event time the preloaded events cover, in one day.
const eventSpan = 4 * time.Hour

// checkEmptyRedis refuses a Redis holding keys: the benchmark flushes it.
func checkEmptyRedis(ctx context.Context, rdb *redis.Client) error {
	info, err := rdb.Info(ctx, "keyspace").Result()
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if strings.HasPrefix(line, "db") {
			return fmt.Errorf("redis %s holds keys (%s): the benchmark flushes every database between phases; give an empty, dedicated Redis", rdb.Options().Addr, strings.TrimSpace(line))
		}
	}
	return nil
}

// partitionsOf is the partition count of a topic of the benchmark (a
// naive copy has its topic's).
func (o Options) partitionsOf(topic string) int {
	if n, ok := o.TopicPartitions[strings.TrimPrefix(topic, naivePrefix)]; ok {
		return n
	}
	return o.Partitions
}

// prepareTopics creates the topics with partitions(topic) partitions, or
// checks that those that exist are empty.
func prepareTopics(ctx context.Context, brokers []string, names []string, partitions func(topic string) int) error {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 30 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil {
		return fmt.Errorf("kafka metadata: %w", err)
	}
	var create []kafka.TopicConfig
	var existing []string
	for _, t := range md.Topics {
		switch {
		case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			create = append(create, kafka.TopicConfig{Topic: t.Name, NumPartitions: partitions(t.Name), ReplicationFactor: 1})
		case t.Error != nil:
			return fmt.Errorf("topic %s: %w", t.Name, t.Error)
		case t.Name != consumer.DefaultDeadLetterTopic:
			existing = append(existing, t.Name)
		}
	}
	if len(existing) > 0 {
		ends, err := endOffsets(ctx, brokers, existing)
		if err != nil {
			return err
		}
		for tp, end := range ends {
			if end > 0 {
				return fmt.Errorf("topic partition %s has been written to (end offset %d): the benchmark preloads %s; give a broker without them", tp, end, strings.Join(names, ", "))
			}
		}
	}
	if len(create) > 0 {
		res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: create})
		if err != nil {
			return fmt.Errorf("creating topics: %w", err)
		}
		for name, err := range res.Errors {
			if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
				return fmt.Errorf("creating topic %s: %w", name, err)
			}
		}
	}
	return nil
}

// config is the example config with the benchmark's addresses, group, key
// prefix and batching. The Shanghai boards get a 72h grace: partitions are
// keyed by anchor, and zipf anchors make them very unequal in size;
// kafka-go hands out messages of all partitions of a reader at about the
// same rate, so the small partitions reach the end of the 4 hours of event
// time while the big ones are an hour or more behind, and with the
// default 5m grace the 30m boards would seal periods the big partitions
// still have events for (late, dead-lettered).
func (e *env) config(group, prefix string) (*config.Config, error) {
	text := string(config.Example())
	repl := [][2]string{
		{"\n  group: rankd\n", "\n  group: " + group + "\n"},
		{"\n  prefix: rankd\n", "\n  prefix: " + prefix + "\n"},
		{"\n  workers: 2\n", fmt.Sprintf("\n  workers: %d\n", e.o.Workers)},
		{"\n    count: 1000 ", fmt.Sprintf("\n    count: %d ", e.o.Batch)},
		{"\n    linger: 20ms ", "\n    linger: " + e.o.Linger.String() + " "},
		{"x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n", "x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n  grace: 72h\n"},
	}
	for _, r := range repl {
		if strings.Count(text, r[0]) != 1 {
			return nil, fmt.Errorf("config/example.yaml: %q is not there exactly once; update internal/bench", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	cfg, err := config.LoadBytes("bench.yaml", []byte(text))
	if err != nil {
		return nil, err
	}
	// The servers are the benchmark's, whatever RANKD_* says.
	cfg.Kafka.Brokers = e.brokers
	cfg.Redis.Addr, cfg.Redis.Addrs, cfg.Redis.Password, cfg.Redis.DB = e.redisAddr, nil, "", 0
	cfg.HTTP.Listen = "127.0.0.1:0"
	if t := e.o.YieldLatency; t != 0 {
		cfg.API.YieldLatency = max(t, 0)
	}
	if t := e.o.CacheRefresh; t != 0 {
		cfg.API.CacheRefresh = max(t, 0)
	}
	return cfg, nil
}

// flush empties Redis and resets its statistics, so that every phase
// starts from the same state.
func (e *env) flush(ctx context.Context) error {
	if err := e.admin.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	return e.resetStats(ctx)
}

func (e *env) resetStats(ctx context.Context) error {
	if err := e.admin.ConfigResetStat(ctx).Err(); err != nil {
		return fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	// every call over a millisecond is kept, for Commands' longest calls
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "1000"}, {"slowlog-max-len", "100000"}} {
		if err := e.admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return fmt.Errorf("CONFIG SET %s: %w", kv[0], err)
		}
	}
	if err := e.admin.SlowLogReset(ctx).Err(); err != nil {
		return fmt.Errorf("SLOWLOG RESET: %w", err)
	}
	return nil
}

func (e *env) machine(ctx context.Context) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Broker: "kfake in a child process", Redis: "redis-server child process"}
	if e.brokerPID == 0 {
		m.Broker = "given: " + strings.Join(e.brokers, ",")
	}
	if e.redisPID == 0 {
		m.Redis = "given: " + e.redisAddr
	}
	if info, err := e.admin.Info(ctx, "server").Result(); err == nil {
		m.RedisVersion = infoField(info, "redis_version")
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(load))[:3], " ")
	}
	return m
}

func (e *env) settings() Settings {
	o := e.o
	return Settings{Events: o.Events, NaiveEvents: o.NaiveEvents, Seed: o.Seed, Partitions: o.Partitions, TopicPartitions: o.TopicPartitions,
		Workers: o.Workers, Batch: o.Batch, Linger: o.Linger.String(), RedisNice: o.RedisNice, RolloverMembers: o.RolloverMembers,
		LatencyDuration: o.LatencyDuration.String(), Skipped: o.Skip}
}
