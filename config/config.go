package config

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // time zones on machines without a zoneinfo database

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
)

//go:embed example.yaml
var example []byte

// Example returns the example configuration for a live-streaming platform
// (config/example.yaml), the embedded default of `rankd dev`.
func Example() []byte { return append([]byte(nil), example...) }

// Config is a loaded and validated configuration.
type Config struct {
	// File is the name errors are reported with.
	File     string
	Kafka    Kafka
	Redis    Redis
	HTTP     HTTP
	API      API // the read API's cache and budget (api.go)
	Rollover Rollover
	// Standings is the publication of sealed standings (standings.go).
	Standings Standings
	// Routes are the routing rules, in file order.
	Routes []ingest.Route

	boards  []*ranking.Board
	schemas map[string]*ingest.Schema
}

// Kafka configures the consumer.
type Kafka struct {
	Brokers []string // RANKD_KAFKA_BROKERS (comma-separated) overrides
	Group   string   // consumer group; default "rankd"
	// Topics to consume; default: the topics of the routes, sorted.
	Topics  []string
	Workers int // readers per process; default 2
	Batch   Batch
	// DeadLetterTopic receives messages that fail permanently; default
	// "rankd-dead-letter".
	DeadLetterTopic string
	// MaxMessageBytes: larger messages are dead-lettered as too_large;
	// default ingest.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// FutureSkew: events whose time is further ahead of the clock are
	// dead-lettered as future; default ingest.DefaultFutureSkew; 0
	// disables the check.
	FutureSkew time.Duration
	MinBytes   int           // fetch min bytes; default 1
	MaxWait    time.Duration // fetch max wait; default 250ms
	// SessionTimeout: a worker that stops heartbeating (a crash) loses its
	// partitions after this long; default 10s.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration // default 1s
	RebalanceTimeout  time.Duration // default 10s
	// ShutdownTimeout bounds finishing the batch in hand on SIGTERM; default 10s.
	ShutdownTimeout time.Duration
	TLS             TLS  // kafka.tls (see secure.go)
	SASL            SASL // kafka.sasl
}

// Batch bounds a batch of messages applied together: it is flushed when it
// holds Count messages or Bytes bytes, or Linger after its first message.
type Batch struct {
	Count  int           // default 1000
	Bytes  int           // default 4 MiB
	Linger time.Duration // default 20ms
}

// Redis configures the store's client. Redis is reached in one of three
// ways: a standalone server (Addr), a cluster (Addrs) or the primary that
// Redis Sentinel names (Sentinel); the loader accepts exactly one.
type Redis struct {
	Addr  string   // standalone server; RANKD_REDIS_ADDR overrides
	Addrs []string // cluster seeds; RANKD_REDIS_ADDRS (comma-separated) overrides
	// Sentinel, when set (redis.sentinel), reaches the primary through
	// Redis Sentinel; Addr and Addrs are then empty.
	Sentinel Sentinel
	DB       int    // standalone and Sentinel only
	Username string // ACL user of the data nodes; RANKD_REDIS_USERNAME overrides
	// Password comes from RANKD_REDIS_PASSWORD or, without it, from
	// PasswordFile; a password written in the config file is refused
	// (see secure.go).
	Password     Secret
	PasswordFile string
	TLS          TLS
	// Prefix starts every key; no '{', '}' or ':'. Default "rankd".
	Prefix    string
	DedupeTTL time.Duration // how long message IDs are remembered; default 24h
	PoolSize  int           // 0: the client's default
	// CallUpdates bounds the board updates one apply script call carries,
	// which bounds how long one call keeps Redis from other clients;
	// default DefaultCallUpdates.
	CallUpdates int
}

// Cluster reports whether Redis is a cluster (Addrs set).
func (r Redis) Cluster() bool { return len(r.Addrs) > 0 }

// Servers names r's servers for a log line: the sentinel master and its
// sentinels, the cluster seeds, or the address.
func (r Redis) Servers() string {
	switch {
	case r.Sentinel.Enabled():
		return "sentinel " + r.Sentinel.MasterName + " via " + strings.Join(r.Sentinel.Addrs, ",")
	case r.Cluster():
		return strings.Join(r.Addrs, ",")
	}
	return r.Addr
}

// Sentinel configures Redis Sentinel (redis.sentinel): the client asks the
// sentinels for the address of the primary monitored as MasterName and
// follows it when Sentinel promotes a replica. The data nodes' ACL user
// and password stay Redis.Username and Redis.Password; Username and
// Password here are the sentinels' own. Redis.TLS applies to both.
type Sentinel struct {
	MasterName string   // the name of "sentinel monitor <name> ..."
	Addrs      []string // sentinels, host:port; RANKD_REDIS_SENTINEL_ADDRS (comma-separated) overrides
	Username   string   // the sentinels' ACL user; RANKD_REDIS_SENTINEL_USERNAME overrides
	// Password comes from RANKD_REDIS_SENTINEL_PASSWORD or, without it,
	// from PasswordFile, read at load time (go-redis takes the sentinels'
	// password as a fixed string); a password in the file is refused.
	Password     Secret
	PasswordFile string

	declared bool // the file has a redis.sentinel section, or the environment sets its addresses
}

// Enabled reports whether Redis is reached through Sentinel.
func (s Sentinel) Enabled() bool { return s.declared || s.MasterName != "" || len(s.Addrs) > 0 }

// HTTP configures the query API and metrics server.
type HTTP struct {
	Listen string // default ":8080"; RANKD_HTTP_LISTEN overrides
	// MetricsListen, if set, serves /metrics (and /healthz, /readyz) on
	// its own address instead of Listen; RANKD_HTTP_METRICS_LISTEN overrides.
	MetricsListen string
	// Token, if set, is the bearer token the API and /metrics require
	// (/healthz and /readyz stay open); from RANKD_HTTP_TOKEN or TokenFile.
	Token     Secret
	TokenFile string
	// Server limits; defaults 10s, 30s, 30s, 2m and 16 KiB. A request
	// (its line and headers: bodies are refused) must arrive within the
	// shorter of the two read timeouts; MaxHeaderBytes is also each
	// connection's read buffer.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// MaxConns caps the open connections of the listen address; default
	// 4096 (DefaultMaxConns).
	MaxConns int
}

// Rollover schedules the prefill of rolling boards.
type Rollover struct {
	Lead     time.Duration // prefill this long before a boundary; default 10m
	Interval time.Duration // how often the scheduler checks; default 1m
}

// Boards returns the declared boards, in file order, with defaults
// resolved. The boards are shared: do not modify them.
func (c *Config) Boards() []*ranking.Board { return c.boards }

// Board returns the named board, or nil.
func (c *Config) Board(name string) *ranking.Board {
	for _, b := range c.boards {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// BoardNames returns names, checked and without repeats, or the names of
// every board when names is empty.
func (c *Config) BoardNames(names []string) ([]string, error) {
	var out []string
	if len(names) == 0 {
		for _, b := range c.boards {
			out = append(out, b.Name)
		}
		return out, nil
	}
	for _, name := range names {
		if slices.Contains(out, name) {
			continue
		}
		if c.Board(name) == nil {
			return nil, fmt.Errorf("no board %q in %s", name, c.File)
		}
		out = append(out, name)
	}
	return out, nil
}

// RollingBoards returns the rolling boards, the ones a rollover prefills:
// all of them, or only name's when name is not empty.
func (c *Config) RollingBoards(name string) ([]*ranking.Board, error) {
	if name != "" {
		switch b := c.Board(name); {
		case b == nil:
			return nil, fmt.Errorf("no such board in %s", c.File)
		case b.Window != ranking.WindowRolling:
			return nil, fmt.Errorf("a %s board; only rolling boards roll over", b.Window)
		}
	}
	var out []*ranking.Board
	for _, b := range c.boards {
		if (name == "" || b.Name == name) && b.Window == ranking.WindowRolling {
			out = append(out, b)
		}
	}
	return out, nil
}

// Schemas returns the event schema of every known topic (gift, like,
// comment and those of the topics section), with the Kafka limits applied
// and the per-topic limits: max_id_len and max_key_len (default
// ingest.DefaultMaxIDLen and ingest.DefaultMaxKeyLen), min_time (default
// ingest.DefaultMinTime()) and the fields' min, max and max_len (the
// defaults of gift, like and comment as in ingest.DefaultSchemas).
// The schemas are shared; a caller may set their Now clock before use.
func (c *Config) Schemas() map[string]*ingest.Schema { return c.schemas }

// Router compiles the routes into a new Router.
func (c *Config) Router() (*ingest.Router, error) {
	r, err := ingest.NewRouter(c.boards, c.schemas, c.Routes)
	if err != nil {
		return nil, fmt.Errorf("%s: routes: %w", c.File, err)
	}
	return r, nil
}

// The defaults of the file's settings. config owns them: the consumer and
// the store have defaults of their own for callers that build them without
// a config, and internal/assembly checks that the two agree.
const (
	DefaultGroup             = "rankd"
	DefaultWorkers           = 2
	DefaultBatchCount        = 1000
	DefaultBatchBytes        = 4 << 20
	DefaultLinger            = 20 * time.Millisecond
	DefaultDeadLetterTopic   = "rankd-dead-letter"
	DefaultMinBytes          = 1
	DefaultMaxWait           = 250 * time.Millisecond
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
	DefaultRebalanceTimeout  = 10 * time.Second
	DefaultShutdownTimeout   = 10 * time.Second
	DefaultPrefix            = "rankd"
	DefaultDedupeTTL         = 24 * time.Hour
	DefaultCallUpdates       = 1000 // as store.DefaultCallSize (internal/assembly checks)
	MinCallUpdates           = 50
	MaxCallUpdates           = 10_000
	DefaultRolloverLead      = 10 * time.Minute
	DefaultRolloverInterval  = time.Minute
	DefaultStandingsTopic    = "rankd-standings"
	DefaultStandingsInterval = 10 * time.Second
	DefaultStandingsLockTTL  = 30 * time.Second
)

// defaults returns a Config holding every default; the file overrides it.
// The per-board defaults are ranking.NewBoard's and
// ranking.Board.Normalize's; the decoding limits ranking/ingest's.
func defaults() *Config {
	return &Config{
		Kafka: Kafka{
			Group:   DefaultGroup,
			Workers: DefaultWorkers,
			Batch: Batch{Count: DefaultBatchCount, Bytes: DefaultBatchBytes,
				Linger: DefaultLinger},
			DeadLetterTopic:   DefaultDeadLetterTopic,
			MaxMessageBytes:   ingest.DefaultMaxMessageBytes,
			FutureSkew:        ingest.DefaultFutureSkew,
			MinBytes:          DefaultMinBytes,
			MaxWait:           DefaultMaxWait,
			SessionTimeout:    DefaultSessionTimeout,
			HeartbeatInterval: DefaultHeartbeatInterval,
			RebalanceTimeout:  DefaultRebalanceTimeout,
			ShutdownTimeout:   DefaultShutdownTimeout,
		},
		Redis:    Redis{Prefix: DefaultPrefix, DedupeTTL: DefaultDedupeTTL, CallUpdates: DefaultCallUpdates},
		HTTP:     defaultHTTP(),
		API:      defaultAPI(),
		Rollover: Rollover{Lead: DefaultRolloverLead, Interval: DefaultRolloverInterval},
		Standings: Standings{Topic: DefaultStandingsTopic, Interval: DefaultStandingsInterval,
			LockTTL: DefaultStandingsLockTTL},
	}
}
