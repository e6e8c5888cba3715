// Package devstack is `rankd dev`: everything on this machine with nothing
// but Go installed. It starts an in-process Kafka-protocol broker (franz-go's
// kfake, memory only) and a Redis (redis-server from PATH on a free port
// with a temp dir, else the in-process miniredis), wires the example config
// to them, runs the rankd the caller builds from that config (consumer,
// rollover timer, HTTP API), produces a workload into the broker and shows
// a live top of two boards on the terminal.
//
// It links miniredis, gopher-lua and franz-go: production builds
// (-tags nodev) leave it out.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rankd/rankd/internal/assembly"

	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/cmd/rankd/internal/produce"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/ranking"
)

// Boards are the boards the dev screen shows.
var Boards = []string{"anchor_hot_30m", "anchor_7d"}

// Options configure Run.
type Options struct {
	// HTTPAddr is the address of the HTTP API, metrics and health.
	HTTPAddr string
	// KafkaAddr is the address the embedded broker listens on and
	// advertises (port 0: a free one).
	KafkaAddr string
	// ConfigOut, if not empty, is a file Run writes the config it runs to
	// (the example with the addresses of the embedded servers), for
	// "rankd replay --config" and the like; it is removed when Run ends.
	ConfigOut string
	// Rate is the events per second produced; 0: as fast as possible.
	Rate float64
	// TUI redraws a screen every second when Stdout is a terminal;
	// otherwise a snapshot line is printed every few seconds.
	TUI bool
	// Workload is the traffic produced; Seed, its seed, is shown in the
	// banner.
	Workload produce.Source
	Seed     int64
	Log      *slog.Logger
	Stdout   io.Writer // banner and screen
	Stderr   io.Writer // problems while stopping
}

// Run runs `rankd dev` until ctx is done, then stops everything it
// started and removes its files.
func Run(ctx context.Context, o Options) error {
	if o.Rate < 0 {
		return errors.New("the rate must not be negative")
	}
	example, err := config.LoadBytes("config/example.yaml", config.Example())
	if err != nil {
		return err
	}
	topics := append(slices.Clone(example.Kafka.Topics), example.Kafka.DeadLetterTopic)
	kafkaAddr := o.KafkaAddr
	if kafkaAddr == "" {
		kafkaAddr = "127.0.0.1:0"
	}
	broker, err := startBroker(kafkaAddr, 6, topics...)
	if err != nil {
		return err
	}
	defer broker.Close()
	rds, err := startRedis(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := rds.Close(); err != nil {
			fmt.Fprintf(o.Stderr, "rankd dev: %v\n", err)
		}
	}()
	src, err := Config(config.Example(), broker.Addrs()[0], rds.Addr, o.HTTPAddr)
	if err != nil {
		return err
	}
	name := "config/example.yaml"
	if o.ConfigOut != "" {
		name = o.ConfigOut
	}
	cfg, err := config.LoadBytes(name, src)
	if err != nil {
		return err
	}
	// The environment (RANKD_*) does not move dev's servers.
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Redis.Addr, cfg.Redis.Addrs = rds.Addr, nil
	cfg.HTTP.Listen = o.HTTPAddr

	// The HTTP address first, so that a taken port fails at once.
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http listen: %w (another rankd dev running? try --http 127.0.0.1:8081)", err)
	}
	app, err := assembly.New(cfg, o.Log, assembly.Tuning{})
	if err != nil {
		ln.Close()
		return err
	}
	var boards []*ranking.Board
	for _, name := range Boards {
		if b := cfg.Board(name); b != nil {
			boards = append(boards, b)
		}
	}
	base := "http://" + ln.Addr().String()
	configLine := "  config the example config with these addresses (--write-config FILE writes it)"
	if o.ConfigOut != "" {
		if err := os.WriteFile(o.ConfigOut, src, 0o644); err != nil {
			ln.Close()
			return fmt.Errorf("--write-config: %w", err)
		}
		defer os.Remove(o.ConfigOut)
		configLine = fmt.Sprintf("  config %s (for rankd replay --config, rankd config check; removed on exit)", o.ConfigOut)
	}
	rateText := fmt.Sprintf("%g events/s", o.Rate)
	if o.Rate == 0 {
		rateText = "full speed"
	}
	var sent atomic.Int64
	v := &view{
		out: o.Stdout, tui: o.TUI && isTerminal(o.Stdout), store: app.Store(), boards: boards, sent: &sent, start: time.Now(),
		banner: []string{
			"rankd dev: everything embedded; nothing is kept",
			fmt.Sprintf("  kafka  kfake (in process) on %s, topics %s", strings.Join(broker.Addrs(), ","), strings.Join(topics, ",")),
			fmt.Sprintf("  redis  %s on %s", rds.Kind, rds.Addr),
			fmt.Sprintf("  load   standard workload at %s (seed %d)", rateText, o.Seed),
			configLine,
			fmt.Sprintf("  open   %s/            boards page", base),
			fmt.Sprintf("         %s/v1/boards   JSON API", base),
			fmt.Sprintf("         %s/metrics     Prometheus metrics", base),
		},
	}

	configNote := ""
	if o.ConfigOut != "" {
		configNote = " · config " + o.ConfigOut
	}
	v.tuiBanner = []string{
		fmt.Sprintf("rankd dev · kafka %s · redis %s · %s", strings.Join(broker.Addrs(), ","), rds.Addr, rateText),
		fmt.Sprintf("  %s/            boards page", base),
		fmt.Sprintf("  %s/v1/boards   JSON API", base),
		fmt.Sprintf("  %s/metrics     metrics%s", base, configNote),
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return app.Run(gctx, ln) })
	g.Go(func() error {
		if _, err := produce.Run(gctx, cfg.Kafka.Brokers, o.Workload, produce.Options{Rate: o.Rate, Sent: &sent}, nil); err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		return nil
	})
	g.Go(func() error { return v.run(gctx) })
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "rankd dev: stopped (%d events sent)\n", sent.Load())
	return nil
}

// Config returns the example config src with the addresses of dev's
// servers: kafka.brokers, redis.addr and http.listen. It fails when src
// lacks one of those lines.
func Config(src []byte, broker, redisAddr, listen string) ([]byte, error) {
	text := string(src)
	for _, r := range []struct{ old, new string }{
		{"\n  brokers: [localhost:9092]\n", "\n  brokers: [" + broker + "]\n"},
		{"\n  addr: localhost:6379 ", "\n  addr: " + redisAddr + " "},
		{"\n  listen: \":8080\"\n", "\n  listen: \"" + listen + "\"\n"},
	} {
		if strings.Count(text, r.old) != 1 {
			return nil, fmt.Errorf("the example config has no line %q to set", strings.TrimSpace(r.old))
		}
		text = strings.Replace(text, r.old, r.new, 1)
	}
	return []byte("# Written by rankd dev: the example config with the addresses of its\n" +
		"# embedded servers. It is removed when rankd dev stops.\n\n" + text), nil
}
