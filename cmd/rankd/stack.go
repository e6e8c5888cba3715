package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/cmd/rankd/internal/secure"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// loadConfig loads the config file; its errors, one per line with
// file:line:column, go to stderr and make a usage error (exit 2).
func loadConfig(path string, stderr io.Writer) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, &usageError{}
	}
	return cfg, nil
}

// newRedis returns the client of cfg: a failover client when
// redis.sentinel is set (it asks the sentinels for the primary and follows
// a promotion by itself), a cluster client when redis.addrs (cluster seeds)
// is set, else a client of redis.addr.
func newRedis(cfg config.Redis) redis.UniversalClient {
	// MaxRetries -1: go-redis must not resend a pipeline after a read
	// timeout (Redis has usually run the apply scripts by then, and the
	// resent calls would count applied messages as duplicates); rankd's
	// own retry decides, visibly, with backoff.
	opts := &redis.UniversalOptions{PoolSize: cfg.PoolSize, MaxRetries: -1}
	switch {
	case cfg.Sentinel.Enabled():
		// MasterName without IsClusterMode or routing options: go-redis's
		// NewFailoverClient, a single client of whichever node is primary.
		opts.MasterName, opts.Addrs, opts.DB = cfg.Sentinel.MasterName, cfg.Sentinel.Addrs, cfg.DB
	case cfg.Cluster():
		opts.Addrs, opts.IsClusterMode = cfg.Addrs, true
	default:
		opts.Addrs, opts.DB = []string{cfg.Addr}, cfg.DB
	}
	secure.ApplyRedis(cfg, opts) // username, password, TLS; the sentinels' credentials
	return redis.NewUniversalClient(opts)
}

// newStore returns the store of cfg's boards on rdb.
func newStore(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) (*store.Store, error) {
	feeds := map[string][]string{}
	for _, r := range cfg.Routes {
		for _, b := range r.Boards {
			if !slices.Contains(feeds[b], r.Topic) {
				feeds[b] = append(feeds[b], r.Topic)
			}
		}
	}
	return store.New(rdb, cfg.Boards(),
		store.WithPrefix(cfg.Redis.Prefix),
		store.WithDedupeTTL(cfg.Redis.DedupeTTL),
		store.WithBoardTopics(feeds),
		store.WithLogger(log))
}

// groupTuning holds command-line overrides of the kafka section's group
// timings; zero values keep the config's.
type groupTuning struct {
	sessionTimeout    time.Duration
	heartbeatInterval time.Duration
	rebalanceTimeout  time.Duration
	shutdownTimeout   time.Duration
}

func or(flag, cfg time.Duration) time.Duration {
	if flag > 0 {
		return flag
	}
	return cfg
}

// consumerConfig maps the kafka section of cfg onto the consumer's Config.
// The schemas carry max_message_bytes and future_skew (config.Schemas).
func consumerConfig(cfg *config.Config, tune groupTuning) consumer.Config {
	k := cfg.Kafka
	return consumer.Config{
		Brokers:           k.Brokers,
		Group:             k.Group,
		Topics:            k.Topics,
		Workers:           k.Workers,
		BatchCount:        k.Batch.Count,
		BatchBytes:        k.Batch.Bytes,
		Linger:            k.Batch.Linger,
		DeadLetterTopic:   k.DeadLetterTopic,
		MinBytes:          k.MinBytes,
		MaxWait:           k.MaxWait,
		SessionTimeout:    or(tune.sessionTimeout, k.SessionTimeout),
		HeartbeatInterval: or(tune.heartbeatInterval, k.HeartbeatInterval),
		RebalanceTimeout:  or(tune.rebalanceTimeout, k.RebalanceTimeout),
		ShutdownTimeout:   or(tune.shutdownTimeout, k.ShutdownTimeout),
		Dialer:            secure.KafkaDialer(k), // TLS, SASL
	}
}

// stack is a running rankd wired from a config: Redis client, store,
// consumer with its ranking sink, rollover timer and HTTP server (API,
// /metrics, /healthz, /readyz). `rankd run` and `rankd dev` both run one.
type stack struct {
	cfg   *config.Config
	log   *slog.Logger
	reg   *prometheus.Registry
	rdb   redis.UniversalClient
	store *store.Store
	cons  *consumer.Consumer
	srv   *http.Server
	msrv  *http.Server            // of http.metrics_listen, or nil (secure.go)
	mln   net.Listener            // its listener, opened by listen
	check *httpapi.BackgroundPing // Redis readiness, checked in the background
	conns *httpapi.ConnLimit      // of srv (http.max_conns)
}

// newStack wires cfg's components; it connects to nothing yet. Metrics
// go to a private registry with the process and Go collectors.
func newStack(cfg *config.Config, log *slog.Logger, tune groupTuning) (*stack, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	router, err := cfg.Router()
	if err != nil {
		return nil, err
	}
	rdb := newRedis(cfg.Redis)
	st, err := newStore(cfg, rdb, log)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	copts := []consumer.Option{consumer.WithRegisterer(reg), consumer.WithLogger(log)}
	sink, err := consumer.NewRankingSink(cfg.Schemas(), router, st, copts...)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	cons, err := consumer.New(consumerConfig(cfg, tune), sink, copts...)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	api := httpapi.New(st, append([]httpapi.Option{httpapi.WithRegisterer(reg), httpapi.WithLogger(log)}, apiOptions(cfg.API)...)...)
	metrics := consumer.GetOnly(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// /readyz answers from the last background ping, never waiting for Redis
	check := httpapi.NewBackgroundPing(&quietPinger{p: st, name: "redis", log: log}, httpapi.DefaultPingEvery, httpapi.DefaultPingTimeout)
	ready := cons.ReadyHandler(check)
	srv, msrv := newHTTPServers(cfg.HTTP, log, api, metrics, cons.HealthHandler(), ready)
	return &stack{cfg: cfg, log: log, reg: reg, rdb: rdb, store: st, cons: cons, srv: srv, msrv: msrv,
		check: check, conns: httpapi.NewConnLimit(cfg.HTTP.MaxConns)}, nil
}

// listen opens the HTTP address before anything starts, so that a taken
// port fails at once.
func (s *stack) listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	if s.mln, err = listenMetrics(s.cfg.HTTP); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// httpShutdownTimeout bounds the wait for in-flight HTTP requests.
const httpShutdownTimeout = 5 * time.Second

// run consumes, rolls over and serves on ln until ctx is done or a part
// fails, then shuts down in order: stop consuming (the consumer applies and
// commits the batch in hand), stop the rollover timer, drain HTTP, close
// Redis. It returns the first failure, or nil after a clean stop.
func (s *stack) run(ctx context.Context, ln net.Listener) error {
	defer s.rdb.Close()
	g, gctx := errgroup.WithContext(ctx)
	var work sync.WaitGroup // the parts that write to Redis
	work.Add(2)
	g.Go(func() error {
		defer work.Done()
		if err := s.cons.Run(gctx); err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		defer work.Done()
		return store.RunRollover(gctx, s.store, s.cfg.Boards(), store.Schedule{
			Lead: s.cfg.Rollover.Lead, Interval: s.cfg.Rollover.Interval, Registerer: s.reg, Logger: s.log})
	})
	g.Go(func() error {
		return store.RunFinality(gctx, s.store, s.cfg.Boards(), store.Schedule{Registerer: s.reg, Logger: s.log})
	})
	g.Go(func() error {
		s.check.Run(gctx)
		return nil
	})
	g.Go(func() error {
		if err := s.srv.Serve(s.conns.Limit(s.srv, ln)); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	if s.mln != nil {
		g.Go(func() error {
			if err := s.msrv.Serve(s.mln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http metrics: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		work.Wait()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
		defer cancel()
		if s.mln != nil {
			_ = s.msrv.Shutdown(sctx)
		}
		if err := s.srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("http shutdown: %w", err)
		}
		return nil
	})
	return g.Wait()
}
