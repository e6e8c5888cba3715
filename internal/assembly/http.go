package assembly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/ranking/httpapi"
)

// newHTTPServers returns the HTTP server of http.listen and, when
// http.metrics_listen is set, the one of /metrics (nil otherwise). With
// http.token the API and /metrics require it as a bearer token; /healthz
// and /readyz stay open (probes), on both servers. Request bodies are
// refused (nothing reads one), headers are capped at
// http.max_header_bytes and every phase of a request has its timeout.
// Cache hits of the API are served before the server's routing (with the
// same token check): routing would send them to the API.
func newHTTPServers(h config.HTTP, log *slog.Logger, api, metrics, health, ready http.Handler) (srv, msrv *http.Server) {
	auth := func(next http.Handler) http.Handler { return secure.Bearer(h.Token, next) }
	newServer := func(root http.Handler) *http.Server {
		return &http.Server{
			Handler:           secure.NoBody(root),
			ReadHeaderTimeout: h.ReadHeaderTimeout,
			ReadTimeout:       h.ReadTimeout,
			WriteTimeout:      h.WriteTimeout,
			IdleTimeout:       h.IdleTimeout,
			MaxHeaderBytes:    h.MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/", auth(api))
	mux.Handle("/v1/", auth(api))
	mux.Handle("/healthz", health)
	mux.Handle("/readyz", ready)
	root := http.Handler(mux)
	if cs, ok := api.(httpapi.CachedServer); ok {
		authorized := secure.BearerCheck(h.Token)
		root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (authorized == nil || authorized(r)) && cs.ServeCached(w, r) {
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	if h.MetricsListen == "" {
		mux.Handle("/metrics", auth(metrics))
		return newServer(root), nil
	}
	mmux := http.NewServeMux()
	mmux.Handle("/metrics", auth(metrics))
	mmux.Handle("/healthz", health)
	mmux.Handle("/readyz", ready)
	return newServer(root), newServer(mmux)
}

// quietPinger is the readiness check of a dependency whose errors name
// internal details (addresses, server messages): /readyz, which is open,
// answers "<name> is unavailable", and the error itself is logged (at most
// every 30s).
type quietPinger struct {
	p      httpapi.Pinger
	name   string
	log    *slog.Logger
	logged atomic.Int64 // unix ns of the last log line
}

func (q *quietPinger) Ping(ctx context.Context) error {
	err := q.p.Ping(ctx)
	if err == nil {
		return nil
	}
	now := time.Now().UnixNano()
	if last := q.logged.Load(); now-last > int64(30*time.Second) && q.logged.CompareAndSwap(last, now) {
		q.log.Warn("readiness: "+q.name+" check failed", "err", err)
	}
	return errors.New(q.name + " is unavailable")
}

// Preflight checks at start that the Redis and Kafka settings work: a
// misconfiguration (wrong password, untrusted certificate, TLS on one side
// only) is returned, to stop with a clear error instead of retrying
// forever; an outage is logged and rankd starts anyway (its clients retry
// and /readyz says not ready). It also logs the settings that weaken
// security (config.Warnings).
func Preflight(ctx context.Context, cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) error {
	for _, w := range cfg.Warnings() {
		log.Warn("config: " + strings.TrimPrefix(w, "warning: "))
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var errs []error
	check := func(service string, err error) {
		var me *secure.MisconfigError
		switch {
		case err == nil:
		case errors.As(err, &me):
			errs = append(errs, err)
		default:
			log.Warn(service+" is not reachable at start; starting anyway, retrying", "err", err)
		}
	}
	check("redis", secure.CheckRedis(ctx, rdb, cfg.Redis))
	check("kafka", secure.CheckKafka(ctx, secure.KafkaDialer(cfg.Kafka), cfg.Kafka.Brokers))
	return errors.Join(errs...)
}

// listenMetrics opens http.metrics_listen, if set.
func listenMetrics(cfg config.HTTP) (net.Listener, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("http metrics listen: %w", err)
	}
	return ln, nil
}

// metricsAddr is the address of the metrics listener for the log, or "".
func metricsAddr(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}
