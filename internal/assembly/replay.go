package assembly

import (
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer/replay"
	"github.com/rankd/rankd/internal/secure"
)

// NewRebuild returns the rebuild of cfg's boards as `rankd replay` runs
// it: the topics of the routes that feed them (Topics), read with the
// kafka section's brokers, TLS and SASL, decoded and routed as live, split
// at the live group's committed offsets, dead letters to its topic, the
// rolling boards rolled over with rollover.lead. The caller sets the rest
// (the range, batch size, lock, registry, logger, observer) and checks
// that Replay.Topics is not empty.
func NewRebuild(cfg *config.Config, boards []string) (*replay.Rebuild, error) {
	router, err := cfg.Router()
	if err != nil {
		return nil, err
	}
	return &replay.Rebuild{
		Replay:  replay.Config{Brokers: cfg.Kafka.Brokers, Topics: Topics(cfg, boards), Dialer: secure.KafkaDialer(cfg.Kafka)},
		Schemas: cfg.Schemas(), Router: router, Boards: boards, Group: cfg.Kafka.Group, DeadLetterTopic: cfg.Kafka.DeadLetterTopic,
		RolloverLead: cfg.Rollover.Lead,
	}, nil
}

// ServeMetrics serves reg at addr/metrics until the returned stop (the
// metrics of a command that is not a Stack, such as `rankd replay`); it
// returns the address it listens on.
func ServeMetrics(addr string, reg *prometheus.Registry) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
