//go:build !nodev

// `rankd bench` starts its own broker (franz-go's kfake, through
// internal/servers); a build with -tags nodev (the image) leaves it out
// and has cmd_bench_nodev.go instead.

package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/servers"

	"github.com/rankd/rankd/cmd/rankd/internal/bench"
	"github.com/rankd/rankd/cmd/rankd/internal/loadgen"
	"github.com/spf13/pflag"
)

const benchHelp = `
Measure rankd end to end on this machine. It starts its own Kafka-protocol
broker (kfake, in a child process) and redis-server (from PATH), or uses
--brokers and --redis, preloads the standard workload (see rankd produce)
and runs, against the same servers:

  naive     a naive consumer: one Redis round trip per event and board
  seed      the seed 000 rolling-board script, one EVALSHA per update, pipelined
  rankd     the consumer stack of "rankd run" (in this process)
            each drains the events from its own consumer group into an
            emptied Redis: events/s, Redis CPU per event and per update
            (INFO cpu), this process's and the broker's CPU per event,
            INFO commandstats
  memory    Redis bytes per board member and per dedupe key after rankd's drain
  replay    the rebuild of every board from the log into a new generation
  latency   event-to-visible latency (HTTP API) at half rankd's drain rate
  rollover  prefill of a rolling board of --rollover-members members, with
            the worst latency of a concurrent ZREVRANGE reader, the
            slowest Redis call, and how long Redis waited for a CPU
            (a redis-server child on Linux)
  cost      the Redis time of each kind of API read (top, member, around;
            row and dense) on 200k- and 1M-member boards: estimated by the
            budget, modelled from the work counted, measured (INFO cpu)
  reads     --read-clients clients reading a 1M-member board (top-20 only,
            then a mix of top, member, around, dims) while ingestion runs at
            --read-rate events/s: reads/s, latency, cache hit rate, Redis
            time per read, ingestion rate with and without readers,
            event-to-visible p99 in Redis and through the API. The clients
            run in a child process (this binary again), one keep-alive
            connection each

It prints one table on stdout (--json FILE: also as JSON) and a progress
line on stderr. The default run takes about five minutes; run it on an
otherwise idle machine. --redis must be an empty, dedicated Redis: it is
flushed between phases and left empty. --brokers must not hold the
benchmark's topics (gift, like, comment, their naive- copies) with messages.

Examples:
  rankd bench
  rankd bench --events 200000 --skip rollover,latency --json bench.json
  rankd bench --cpuprofile rankd.pprof     # then: go tool pprof -top rankd.pprof
  rankd bench --events 500000 --skip naive,seed,latency,rollover,cost,reads --replay-cpuprofile replay.pprof
  rankd bench --events 200000 --skip naive,seed,replay,latency,rollover --reads-cpuprofile reads.pprof`

// benchSpec is `rankd bench` (cmd_bench_nodev.go without dev tooling).
var benchSpec = cli.Spec{Use: "bench [--events N] [--json FILE] [flags]", Short: "measure drain rate, Redis cost, latency, replay and rollover on this machine",
	Long: benchHelp, Flags: func(fs *pflag.FlagSet) cli.RunFunc { return benchFlags(fs, nil) }}

// benchFlags declares the flags of `rankd bench`; tests change the
// options with adjust.
func benchFlags(fs *pflag.FlagSet, adjust func(*bench.Options)) cli.RunFunc {
	var o bench.Options
	fs.IntVar(&o.Events, "events", bench.DefaultEvents, "`number` of events of the standard workload preloaded and drained")
	fs.IntVar(&o.NaiveEvents, "naive-events", 0, "`number` of them the naive consumer drains (default min(100000, --events))")
	fs.Int64Var(&o.Seed, "seed", bench.DefaultSeed, "`seed` of the workload")
	brokers := fs.String("brokers", "", "comma-separated Kafka `brokers` to use instead of starting one (the topics must not hold messages)")
	fs.StringVar(&o.Redis, "redis", "", "`host:port` of an empty Redis to use instead of starting redis-server (it is flushed)")
	fs.IntVar(&o.Partitions, "partitions", 6, "`partitions` per topic")
	fs.StringToIntVar(&o.TopicPartitions, "topic-partitions", nil, "partitions of some topics, overriding --partitions: like=14,comment=4,gift=2 gives every drained batch the workload's mix (equal counts drain gifts and comments first, likes alone last)")
	fs.IntVar(&o.Workers, "workers", 3, "rankd's kafka.workers")
	fs.IntVar(&o.RedisNice, "redis-nice", 0, "nice `value` of the redis-server the benchmark starts (negative: Redis gets more of the CPUs when the benchmark's processes contend, as with a core of its own; needs CAP_SYS_NICE)")
	fs.IntVar(&o.Batch, "batch", 2000, "rankd's kafka.batch.count (and the seed consumer's batch)")
	fs.DurationVar(&o.Linger, "linger", 20*time.Millisecond, "rankd's kafka.batch.linger")
	fs.IntVar(&o.RolloverMembers, "rollover-members", 1_000_000, "`members` of the rolling board rolled over")
	fs.DurationVar(&o.LatencyDuration, "latency-duration", 30*time.Second, "how long the latency phase produces")
	fs.Float64Var(&o.LatencyRate, "latency-rate", 0, "produce `rate` of the latency phase in events/s (default half rankd's drain rate)")
	fs.DurationVar(&o.PollInterval, "poll-interval", time.Millisecond, "pause between two reads of the latency marker")
	fs.DurationVar(&o.LatencyCacheTTL, "latency-cache-ttl", 0, "rankd's api.cache_ttl in the latency phase (-1s: no cache; default the config's, 1s)")
	fs.IntVar(&o.ReadClients, "read-clients", 1000, "`clients` of the reads phase")
	fs.Float64Var(&o.ReadRate, "read-rate", 20000, "ingestion `rate` (events/s) of the reads phase")
	fs.DurationVar(&o.ReadDuration, "read-duration", 20*time.Second, "how long each run of the reads phase lasts")
	fs.DurationVar(&o.YieldLatency, "read-yield-latency", 0, "rankd's api.yield_latency (-1s: off; default the config's, 100ms)")
	fs.DurationVar(&o.CacheRefresh, "cache-refresh", 0, "rankd's api.cache_refresh in the latency and reads phases (-1s: off, the cache TTL alone; default the config's, 50ms)")
	skip := fs.String("skip", "", "comma-separated `phases` not to run: "+strings.Join(bench.Phases, ", "))
	fs.StringVar(&o.JSON, "json", "", "write the results as JSON to `file`")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write the CPU profile of the rankd drain to `file`")
	fs.StringVar(&o.ReplayCPUProfile, "replay-cpuprofile", "", "write the CPU profile of the replay to `file`")
	fs.StringVar(&o.LatencyCPUProfile, "latency-cpuprofile", "", "write the CPU profile of rankd during the latency phase's traffic to `file`")
	fs.StringVar(&o.ReadsCPUProfile, "reads-cpuprofile", "", "write the CPU profile of rankd serving the reads phase's top-20 readers to `file`")
	var lf cli.LogFlags
	lf.Register(fs, "text", "warn")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		o.Stdout, o.Stderr = stdout, stderr
		log, err := lf.Logger(stderr)
		if err != nil {
			return err
		}
		o.Log = log
		o.Brokers, o.Skip = cli.SplitList(*brokers), cli.SplitList(*skip)
		if o.Events < 1 || o.RolloverMembers < 1 || o.Partitions < 1 || o.Workers < 1 || o.Batch < 1 {
			return cli.Usagef("--events, --rollover-members, --partitions, --workers and --batch must be at least 1")
		}
		if adjust != nil {
			adjust(&o)
		}
		if err := o.Validate(); err != nil {
			return &cli.UsageError{Err: err}
		}
		_, err = bench.Run(ctx, o)
		return err
	}
}

// child runs this process as the broker, the load generator or the
// traffic of a `rankd bench` that started it (servers.Child,
// loadgen.Child, bench.TrafficChild).
func child() (int, bool) {
	if code, ok := servers.Child(nil); ok {
		return code, true
	}
	if code, ok := loadgen.Child(); ok {
		return code, true
	}
	return bench.TrafficChild()
}
