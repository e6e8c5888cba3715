package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/cmd/rankd/internal/produce"
	"github.com/rankd/rankd/internal/workload"
)

const produceHelp = `
Send events to Kafka: the standard workload (default) or the lines of a file.

The standard workload is the traffic of a live-streaming platform in the JSON
of the example config: 70% like, 20% comment, 10% gift; anchors zipf(1.1)
over 100,000, users zipf(1.05) over 1,000,000; room and zone derived from
the anchor; gift coins from a price table; 30% of comments on a news item.
Each event has a unique id ("<seed>-<n>": the same seed gives the same
events and ids) and ts = now, or --start advancing by --step per event for
reproducible runs. Messages are keyed by anchor id.

With --file, every line is one message: a JSON object goes to the topic in
its "topic" field (else --topic) keyed by --key-field; any other line goes
as is to --topic. "-" reads stdin. --restamp moves the "ts" of every line
by one offset so that the latest is now (the gaps stay): a file of past
events then feeds the current periods instead of being dead-lettered as
late. Ids stay: a second run of the same file is deduplicated.

--rate (1000 events/s by default) paces both; when it holds events back,
a line says so (--rate 0: as fast as possible).

Without --count or --duration it runs until interrupted. It ends with one
line: events sent, duration, events/s.`

// produceSpec is `rankd produce`.
var produceSpec = cli.Spec{Use: "produce [--brokers B] [--rate N] [--duration D | --count N] [flags]", Short: "generate the standard workload (or send a file) to Kafka", Long: produceHelp, Flags: produceFlags}

func produceFlags(fs *pflag.FlagSet) cli.RunFunc {
	// The default is resolved after parsing so that --help shows one.
	brokers := fs.String("brokers", "", "comma-separated bootstrap `brokers` (default: $RANKD_KAFKA_BROKERS if set, else localhost:9092)")
	rate := fs.Float64("rate", 1000, "events per second; 0: as fast as possible")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	count := fs.Int64("count", 0, "stop after this many events (0: no limit)")
	topics := fs.String("topics", "gift,like,comment", "workload topics to generate (the mix is renormalized over them)")
	seed := fs.Int64("seed", 0, "workload seed: same seed, same events and ids (0: random, printed)")
	startFlag := fs.String("start", "", "RFC 3339 ts of the first event, advancing by --step per event (default: each event's wall-clock time)")
	step := fs.Duration("step", time.Millisecond, "ts increment per event with --start")
	file := fs.String("file", "", "send the JSON lines of this `file` instead of the workload (\"-\": stdin)")
	topic := fs.String("topic", "", "--file: topic of lines without a \"topic\" field")
	keyField := fs.String("key-field", "anchor_id", "--file: JSON field whose value is the message key")
	restamp := fs.Bool("restamp", false, "--file: move every line's \"ts\" by one offset so that the latest is now")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if !fs.Changed("brokers") {
			*brokers = os.Getenv("RANKD_KAFKA_BROKERS")
			if *brokers == "" {
				*brokers = "localhost:9092"
			}
		}
		if *rate < 0 || *count < 0 || *duration < 0 {
			return cli.Usagef("--rate, --count and --duration must not be negative")
		}
		brokerList := cli.SplitList(*brokers)
		if len(brokerList) == 0 {
			return cli.Usagef("--brokers: none given")
		}

		if *restamp && *file == "" {
			return cli.Usagef("--restamp: only with --file")
		}
		so := produce.SourceOptions{File: *file, Topic: *topic, KeyField: *keyField, Restamp: *restamp, Stdin: os.Stdin,
			Workload: workload.Config{Seed: *seed, Topics: cli.SplitList(*topics), Step: *step}}
		if *file == "" && *startFlag != "" {
			t, err := time.Parse(time.RFC3339, *startFlag)
			if err != nil {
				return cli.Usagef("--start %q: want RFC 3339, e.g. 2026-11-21T12:00:00+08:00", *startFlag)
			}
			so.Workload.Start = t
		}
		src, closeSrc, err := produce.Open(so, stderr)
		if err != nil {
			return &cli.UsageError{Err: err}
		}
		defer closeSrc()

		opts := produce.Options{Rate: *rate, Count: *count, Duration: *duration}
		opts.Throttled = func() {
			fmt.Fprintf(stderr, "rankd produce: throttled to --rate %g events/s (--rate 0: as fast as possible)\n", *rate)
		}
		res, err := produce.Run(ctx, brokerList, src, opts, stderr)
		fmt.Fprintln(stdout, res)
		return err
	}
}
