package assembly

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// NewRedis returns the client of cfg: a failover client when
// redis.sentinel is set (it asks the sentinels for the primary and follows
// a promotion by itself), a cluster client when redis.addrs (cluster seeds)
// is set, else a client of redis.addr.
func NewRedis(cfg config.Redis) redis.UniversalClient {
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

// NewStore returns the store of cfg's boards on rdb, as every command
// builds it (prefix, dedupe TTL, the topics feeding each board).
func NewStore(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) (*store.Store, error) {
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
		store.WithCallSize(cfg.Redis.CallUpdates),
		store.WithBoardTopics(feeds),
		store.WithLogger(log))
}

// Tuning holds command-line overrides of the kafka section's group
// timings; zero values keep the config's.
type Tuning struct {
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	ShutdownTimeout   time.Duration
}

func or(flag, cfg time.Duration) time.Duration {
	if flag > 0 {
		return flag
	}
	return cfg
}

// ConsumerConfig maps the kafka section of cfg onto the consumer's Config.
// The schemas carry max_message_bytes and future_skew (config.Schemas).
func ConsumerConfig(cfg *config.Config, tune Tuning) consumer.Config {
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
		SessionTimeout:    or(tune.SessionTimeout, k.SessionTimeout),
		HeartbeatInterval: or(tune.HeartbeatInterval, k.HeartbeatInterval),
		RebalanceTimeout:  or(tune.RebalanceTimeout, k.RebalanceTimeout),
		ShutdownTimeout:   or(tune.ShutdownTimeout, k.ShutdownTimeout),
		Dialer:            secure.KafkaDialer(k), // TLS, SASL
	}
}

// Stack is a running rankd wired from a config: Redis client, store,
// consumer with its ranking sink, rollover and finality timers and HTTP
// servers (API, /metrics, /healthz, /readyz). `rankd run`, `rankd dev`,
// `rankd bench` and the tests run this one.
type Stack struct {
	cfg   *config.Config
	log   *slog.Logger
	reg   *prometheus.Registry
	rdb   redis.UniversalClient
	store *store.Store
	cons  *consumer.Consumer
	srv   *fasthttp.Server
	msrv  *fasthttp.Server        // of http.metrics_listen, or nil (http.go)
	mln   net.Listener            // its listener, opened by Listen
	check *httpapi.BackgroundPing // Redis readiness, checked in the background
	conns *httpapi.ConnLimit      // of srv (http.max_conns)
	// changes takes the boards' change notices to the API's cache
	// (api.cache_refresh); nil: the cache's TTL alone
	changes *httpapi.Changes
}

// New wires cfg's components; it connects to nothing yet (Listen, then
// Run). Metrics go to a private registry with the process and Go
// collectors.
func New(cfg *config.Config, log *slog.Logger, tune Tuning) (*Stack, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	router, err := cfg.Router()
	if err != nil {
		return nil, err
	}
	rdb := NewRedis(cfg.Redis)
	st, err := NewStore(cfg, rdb, log)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	for _, r := range []string{"held", "replanned"} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "sink", Name: "packed_calls_total", ConstLabels: prometheus.Labels{"result": r},
			Help: "Packed apply calls (sum boards folded per member by rankd), by result: held, or replanned (a duplicate or a member near its range: sent again per update)."},
			func() float64 {
				held, replanned := st.PackedCalls()
				if r == "held" {
					return float64(held)
				}
				return float64(replanned)
			}))
	}
	copts := []consumer.Option{consumer.WithRegisterer(reg), consumer.WithLogger(log)}
	sink, err := consumer.NewRankingSink(cfg.Schemas(), router, st, copts...)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	cons, err := consumer.New(ConsumerConfig(cfg, tune), sink, copts...)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	// the API yields to the consumer when it falls behind, and gently
	// while its batches take longer than api.yield_latency
	var changes *httpapi.Changes
	if cfg.API.CacheTTL > 0 && cfg.API.CacheRefresh > 0 {
		changes = httpapi.NewChanges()
	}
	api := httpapi.New(st, append([]httpapi.Option{httpapi.WithRegisterer(reg), httpapi.WithLogger(log), httpapi.WithPriority(cons.Behind),
		httpapi.WithLatencyTarget(cons.Latency, cfg.API.YieldLatency)},
		apiOptions(cfg.API, changes)...)...)
	metrics := GetOnly(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// /readyz answers from the last background ping, never waiting for Redis
	check := httpapi.NewBackgroundPing(&quietPinger{p: st, name: "redis", log: log}, httpapi.DefaultPingEvery, httpapi.DefaultPingTimeout)
	srv, msrv := newHTTPServers(cfg.HTTP, log, api, metrics, HealthHandler(), ReadyHandler(cons, check))
	return &Stack{cfg: cfg, log: log, reg: reg, rdb: rdb, store: st, cons: cons, srv: srv, msrv: msrv,
		check: check, conns: httpapi.NewConnLimit(cfg.HTTP.MaxConns), changes: changes}, nil
}

// Listen opens the HTTP address before anything starts, so that a taken
// port fails at once.
func (s *Stack) Listen() (net.Listener, error) {
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

// Run consumes, rolls over and serves on ln until ctx is done or a part
// fails, then shuts down in order: stop consuming (the consumer applies and
// commits the batch in hand), stop the rollover timer, drain HTTP, close
// Redis. It returns the first failure, or nil after a clean stop.
func (s *Stack) Run(ctx context.Context, ln net.Listener) error {
	defer s.rdb.Close()
	g, gctx := errgroup.WithContext(ctx)
	var work sync.WaitGroup // the parts that write to Redis
	work.Add(3)
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
		defer work.Done()
		return s.runStandings(gctx)
	})
	g.Go(func() error {
		return store.RunFinality(gctx, s.store, s.cfg.Boards(), store.Schedule{Registerer: s.reg, Logger: s.log})
	})
	g.Go(func() error {
		s.check.Run(gctx)
		return nil
	})
	if s.changes != nil {
		g.Go(func() error {
			// the boards other instances (and this one) changed: the
			// cache reads them again (api.cache_refresh)
			return s.store.WatchChanges(gctx, s.changes.Changed)
		})
	}
	g.Go(func() error {
		if err := s.srv.Serve(s.conns.Limit(s.srv, ln)); err != nil {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	if s.mln != nil {
		g.Go(func() error {
			if err := s.msrv.Serve(s.mln); err != nil {
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
			_ = s.msrv.ShutdownWithContext(sctx)
		}
		if err := s.srv.ShutdownWithContext(sctx); err != nil {
			return fmt.Errorf("http shutdown: %w", err)
		}
		return nil
	})
	return g.Wait()
}

// Redis returns the stack's Redis client.
func (s *Stack) Redis() redis.UniversalClient { return s.rdb }

// Store returns the stack's store.
func (s *Stack) Store() *store.Store { return s.store }

// Consumer returns the stack's consumer.
func (s *Stack) Consumer() *consumer.Consumer { return s.cons }

// Metrics returns the stack's metrics registry.
func (s *Stack) Metrics() *prometheus.Registry { return s.reg }

// MetricsAddr returns the address of the http.metrics_listen listener
// opened by Listen, or "".
func (s *Stack) MetricsAddr() string { return metricsAddr(s.mln) }

// Close closes the Redis client of a stack that will not Run.
func (s *Stack) Close() error { return s.rdb.Close() }

// Topics returns the Kafka topics of cfg's routes that feed boards (all
// of them when boards is empty), sorted: what a replay of those boards
// reads.
func Topics(cfg *config.Config, boards []string) []string {
	want := map[string]bool{}
	for _, b := range boards {
		want[b] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range cfg.Routes {
		feeds := len(boards) == 0
		for _, b := range r.Boards {
			feeds = feeds || want[b]
		}
		t := r.Topic
		if feeds && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// runStandings seals and publishes the final periods of the boards with a
// publish section (store.RunStandings) until ctx is done; without such
// boards it only waits.
func (s *Stack) runStandings(ctx context.Context) error {
	sc := s.cfg.Standings
	if len(sc.Boards) == 0 {
		<-ctx.Done()
		return nil
	}
	boards := make(map[string]store.Publish, len(sc.Boards))
	for name, p := range sc.Boards {
		boards[name] = store.Publish{Top: p.Top, Retention: p.Retention}
	}
	w := consumer.NewStandingsWriter(s.cfg.Kafka.Brokers, secure.KafkaDialer(s.cfg.Kafka), sc.Topic)
	defer w.Close()
	return store.RunStandings(ctx, s.store, store.StandingsSchedule{
		Boards: boards, Publisher: w, Interval: sc.Interval, LockTTL: sc.LockTTL,
		Registerer: s.reg, Logger: s.log})
}

// apiOptions are the read API's options of cfg's api section: the response
// cache, the Redis-time budget (which replaces the fixed rate of expensive
// reads), the bound on concurrent reads and that on concurrent writes,
// and, given changes, the reads again of changed boards.
func apiOptions(a config.API, changes *httpapi.Changes) []httpapi.Option {
	opts := []httpapi.Option{httpapi.WithCache(a.CacheTTL, a.CacheMaxBytes), httpapi.WithConcurrentReads(a.ConcurrentReads)}
	if changes != nil {
		opts = append(opts, httpapi.WithChanges(changes, a.CacheRefresh))
	}
	if a.RedisBudget > 0 {
		opts = append(opts, httpapi.WithRedisBudget(a.RedisBudget), httpapi.WithExpensiveRate(0))
	}
	return opts
}
