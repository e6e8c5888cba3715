package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/ranking"
)

const devHelp = `
Run everything on this machine with nothing but Go installed: an in-process
Kafka-protocol broker (franz-go's kfake, memory only), a Redis (redis-server
from PATH on a free port with a temp dir, else the in-process miniredis),
the example config (config/example.yaml), a producer of the standard
workload at --rate events/s, the consumer, the rollover timer and the HTTP
API. It prints the URLs and shows a live top 10 of two boards (a snapshot
line every few seconds when stdout is not a terminal, or with --no-tui).

Ctrl-C stops it cleanly and removes what it started. Nothing is kept; the
broker holds every event in memory (about 0.5 GB per million events).`

// devBoards are the boards `rankd dev` shows.
var devBoards = []string{"anchor_hot_30m", "anchor_7d"}

func devMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev", "dev [--http ADDR] [--rate N] [--seed N] [--no-tui] [--log-format F] [--log-level L]", devHelp, stderr)
	httpAddr := fs.String("http", "127.0.0.1:8080", "`address` of the HTTP API, metrics and health")
	rate := fs.Float64("rate", 200, "generated events per second (0: as fast as possible)")
	noTUI := fs.Bool("no-tui", false, "print a snapshot line every few seconds instead of redrawing the screen")
	seed := fs.Int64("seed", 0, "workload seed (0: random)")
	var lf logFlags
	lf.register(fs, "text", "warn")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *rate < 0 {
		return usagef("--rate must not be negative")
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := config.LoadBytes("config/example.yaml", config.Example())
	if err != nil {
		return err
	}

	topics := append(slices.Clone(cfg.Kafka.Topics), cfg.Kafka.DeadLetterTopic)
	broker, err := startBroker(6, topics...)
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
			fmt.Fprintf(stderr, "rankd dev: %v\n", err)
		}
	}()
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Redis.Addr, cfg.Redis.Addrs = rds.Addr, nil
	cfg.HTTP.Listen = *httpAddr

	s, err := newStack(cfg, log, groupTuning{})
	if err != nil {
		return err
	}
	ln, err := s.listen()
	if err != nil {
		_ = s.rdb.Close()
		return fmt.Errorf("%w (another rankd dev running? try --http 127.0.0.1:8081)", err)
	}
	wc := workloadConfig{Seed: *seed}
	if wc.Seed == 0 {
		wc.Seed = rand.Int64N(1 << 40)
	}
	wl, err := newWorkload(wc)
	if err != nil {
		return err
	}
	var boards []*ranking.Board
	for _, name := range devBoards {
		if b := cfg.Board(name); b != nil {
			boards = append(boards, b)
		}
	}
	base := "http://" + ln.Addr().String()
	rateText := fmt.Sprintf("%g events/s", *rate)
	if *rate == 0 {
		rateText = "full speed"
	}
	var sent atomic.Int64
	view := &devView{
		out: stdout, tui: !*noTUI && isTerminal(stdout), store: s.store, boards: boards, sent: &sent, start: time.Now(),
		banner: []string{
			"rankd dev: everything embedded; nothing is kept",
			fmt.Sprintf("  kafka  kfake (in process) on %s, topics %s", strings.Join(broker.Addrs(), ","), strings.Join(topics, ",")),
			fmt.Sprintf("  redis  %s on %s", rds.Kind, rds.Addr),
			fmt.Sprintf("  load   standard workload at %s (seed %d)", rateText, wc.Seed),
			fmt.Sprintf("  open   %s/            boards page", base),
			fmt.Sprintf("         %s/v1/boards   JSON API", base),
			fmt.Sprintf("         %s/metrics     Prometheus metrics", base),
		},
	}

	writer := newWriter(cfg.Kafka.Brokers)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.run(gctx, ln) })
	g.Go(func() error {
		_, err := pace(gctx, writer, workloadSource(wl), paceOptions{Rate: *rate, Sent: &sent})
		if cerr := writer.Close(); err == nil && gctx.Err() == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		return nil
	})
	g.Go(func() error { return view.run(gctx) })
	err = g.Wait()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rankd dev: stopped (%d events sent)\n", sent.Load())
	return nil
}
