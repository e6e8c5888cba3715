//go:build !nodev

// `rankd dev` links the embedded servers (miniredis, gopher-lua, franz-go's
// kfake); a build with -tags nodev (the image) leaves them out and has
// cmd_dev_nodev.go instead.

package main

import (
	"context"
	"io"
	"math/rand/v2"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/cmd/rankd/internal/devstack"
	"github.com/rankd/rankd/cmd/rankd/internal/produce"
	"github.com/rankd/rankd/internal/workload"
	"github.com/spf13/pflag"
)

const devHelp = `
Run everything on this machine with nothing but Go installed: an in-process
Kafka-protocol broker (franz-go's kfake, memory only), a Redis (redis-server
from PATH on a free port with a temp dir, else the in-process miniredis),
the example config (config/example.yaml), a producer of the standard
workload at --rate events/s, the consumer, the rollover timer and the HTTP
API. It prints the URLs and shows a live top 10 of two boards (a snapshot
line every few seconds when stdout is not a terminal, or with --no-tui).

The broker listens on --kafka (127.0.0.1:9092, the address the example
config and "rankd produce" default to; 127.0.0.1:0 picks a free port). The
config it runs, the example with the addresses of its servers, is written
to --write-config (rankd-dev.yaml in the current directory), so that
"rankd replay --config rankd-dev.yaml" and "rankd config check
rankd-dev.yaml" work against it; the file is removed when dev stops.
Logs go to stderr as text (--log-format json for JSON).

Ctrl-C stops it cleanly and removes what it started. Nothing is kept; the
broker holds every event in memory (about 0.5 GB per million events).`

// devSpec is `rankd dev` (cmd_dev_nodev.go without dev tooling).
var devSpec = cli.Spec{Use: "dev [--http ADDR] [--kafka ADDR] [--rate N] [--seed N] [--no-tui] [--write-config FILE] [--log-format F] [--log-level L]", Short: "embedded broker, Redis, traffic, consumer and API for a first look", Long: devHelp, Flags: devFlags}

func devFlags(fs *pflag.FlagSet) cli.RunFunc {
	httpAddr := fs.String("http", "127.0.0.1:8080", "`address` of the HTTP API, metrics and health")
	kafkaAddr := fs.String("kafka", "127.0.0.1:9092", "`address` the embedded Kafka broker listens on and advertises (port 0: a free one)")
	configOut := fs.String("write-config", "rankd-dev.yaml", "write the config dev runs (the example with its servers' addresses) to this `file`, removed on exit (\"\": none)")
	rate := fs.Float64("rate", 200, "generated events per second (0: as fast as possible)")
	noTUI := fs.Bool("no-tui", false, "print a snapshot line every few seconds instead of redrawing the screen")
	seed := fs.Int64("seed", 0, "workload seed (0: random)")
	var lf cli.LogFlags
	lf.Register(fs, "text", "warn")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if *rate < 0 {
			return cli.Usagef("--rate must not be negative")
		}
		log, err := lf.Logger(stderr)
		if err != nil {
			return err
		}
		wc := workload.Config{Seed: *seed}
		if wc.Seed == 0 {
			wc.Seed = rand.Int64N(1 << 40)
		}
		wl, err := workload.New(wc)
		if err != nil {
			return err
		}
		return devstack.Run(ctx, devstack.Options{
			HTTPAddr: *httpAddr, KafkaAddr: *kafkaAddr, ConfigOut: *configOut, Rate: *rate, TUI: !*noTUI, Workload: produce.Workload(wl), Seed: wc.Seed,
			Log: log, Stdout: stdout, Stderr: stderr,
		})
	}
}
