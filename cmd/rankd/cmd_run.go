package main

import (
	"context"
	"io"
	"strings"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/assembly"
	"github.com/spf13/pflag"
)

const runHelp = `
Consume the configured Kafka topics with a consumer group, apply every
event to the boards in Redis (exactly once per message ID) and serve the
HTTP API on http.listen: the JSON API and HTML page at / and /v1/...,
Prometheus metrics at /metrics, liveness at /healthz and readiness (group
joined, Redis answering) at /readyz.

--http overrides http.listen (and $RANKD_HTTP_LISTEN). Logs go to stderr
as JSON (--log-format text for text; the other commands log text).

SIGINT or SIGTERM stops it cleanly: it stops fetching, applies and commits
the batch in hand (within --shutdown-timeout), drains HTTP requests, then
closes Redis. The environment overrides addresses and secrets of the file:
RANKD_KAFKA_BROKERS, RANKD_REDIS_ADDR, RANKD_REDIS_ADDRS,
RANKD_REDIS_SENTINEL_ADDRS, RANKD_REDIS_SENTINEL_USERNAME,
RANKD_REDIS_SENTINEL_PASSWORD, RANKD_REDIS_USERNAME, RANKD_REDIS_PASSWORD,
RANKD_KAFKA_SASL_USERNAME, RANKD_KAFKA_SASL_PASSWORD, RANKD_HTTP_LISTEN,
RANKD_HTTP_METRICS_LISTEN, RANKD_HTTP_TOKEN.

At start it checks that Redis and Kafka accept its credentials and TLS
settings: a wrong password, an untrusted certificate or TLS on one side only
stops it with an error naming the setting (exit 1); a server that is down
does not (it retries, and /readyz says not ready).`

// runSpec is `rankd run`.
var runSpec = cli.Spec{Use: "run --config FILE [--http ADDR] [flags]", Short: "consume events, apply them to the boards, serve the HTTP API", Long: runHelp, Flags: runFlags}

func runFlags(fs *pflag.FlagSet) cli.RunFunc {
	cfgFlag := fs.String("config", "", "config `file` (default $RANKD_CONFIG)")
	httpFlag := fs.String("http", "", "`address` of the HTTP API, page, metrics and health, e.g. 127.0.0.1:8081 (default: http.listen, or $RANKD_HTTP_LISTEN)")
	var lf cli.LogFlags
	lf.Register(fs, "json", "info")
	var tune assembly.Tuning
	fs.DurationVar(&tune.SessionTimeout, "session-timeout", 0,
		"consumer group session timeout: how long a crashed instance keeps its partitions (0: kafka.session_timeout)")
	fs.DurationVar(&tune.HeartbeatInterval, "heartbeat-interval", 0,
		"consumer group heartbeat interval, well below --session-timeout (0: kafka.heartbeat_interval)")
	fs.DurationVar(&tune.RebalanceTimeout, "rebalance-timeout", 0,
		"how long a rebalance waits for members to rejoin (0: kafka.rebalance_timeout)")
	fs.DurationVar(&tune.ShutdownTimeout, "shutdown-timeout", 0,
		"on SIGINT/SIGTERM, time allowed to apply and commit the batch in hand (0: kafka.shutdown_timeout)")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		cfg, log, path, err := cli.Setup(*cfgFlag, &lf, stderr)
		if err != nil {
			return err
		}
		if *httpFlag != "" {
			cfg.HTTP.Listen = *httpFlag
		}
		s, err := assembly.New(cfg, log, tune)
		if err != nil {
			return err
		}
		if err := assembly.Preflight(ctx, cfg, s.Redis(), log); err != nil {
			_ = s.Close()
			return err
		}
		ln, err := s.Listen()
		if err != nil {
			_ = s.Close()
			return err
		}
		log.Info("rankd running", "config", path, "brokers", strings.Join(cfg.Kafka.Brokers, ","),
			"group", cfg.Kafka.Group, "topics", strings.Join(cfg.Kafka.Topics, ","), "workers", cfg.Kafka.Workers,
			"redis", cfg.Redis.Servers(), "cluster", cfg.Redis.Cluster(), "prefix", cfg.Redis.Prefix,
			"http", ln.Addr().String(), "metrics_http", s.MetricsAddr(), "boards", len(cfg.Boards()))
		err = s.Run(ctx, ln)
		if err != nil {
			return err
		}
		log.Info("rankd stopped")
		return nil
	}
}
