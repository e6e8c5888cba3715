package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Config wires a Consumer. Zero values take the defaults named on each
// field.
type Config struct {
	Brokers []string // bootstrap brokers; required
	Group   string   // consumer group; required
	Topics  []string // topics to consume; required
	// Workers is the number of group readers (members) in this process;
	// default 2. Partitions are the unit of parallelism: workers beyond the
	// partition count idle.
	Workers int

	// A batch is applied when it holds BatchCount messages or BatchBytes
	// bytes (keys, values and headers; the message that crosses the limit
	// is included), or Linger after its first message, whichever comes
	// first. Defaults: 1000, 4 MiB, 20ms.
	BatchCount int
	BatchBytes int
	Linger     time.Duration

	// DeadLetterTopic receives permanently failed messages; default
	// "rankd-dead-letter". The DLQ writer may create it (auto topic
	// creation) where the brokers allow.
	DeadLetterTopic string
	// DeadLetterMaxBytes bounds the value copied to the dead-letter topic;
	// a larger value (a too_large message) is replaced by an empty one and
	// the header "truncated" gives its size: the original stays in its topic
	// at the offset the headers name. Default 1 MiB - 64 KiB.
	DeadLetterMaxBytes int

	// ShutdownTimeout bounds, once Run's context is done, the time spent
	// applying and committing the batch in hand; default 10s.
	ShutdownTimeout time.Duration

	// Fetch and group settings. Defaults: MinBytes 1, MaxBytes 1 MB (of a
	// fetch's response), MaxWait 250ms (a fetch's wait for MinBytes),
	// QueueCapacity 1000 (messages fetched ahead per worker, in chunks of
	// 256: at least one chunk, plus one per partition being read),
	// StartOffset kafka.FirstOffset (where a new group starts;
	// kafka.LastOffset for the end), HeartbeatInterval 1s, SessionTimeout
	// 10s (a crashed worker's partitions move after this long) and
	// RebalanceTimeout 10s.
	MinBytes          int
	MaxBytes          int
	MaxWait           time.Duration
	QueueCapacity     int
	StartOffset       int64
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
	RebalanceTimeout  time.Duration
	// Dialer connects readers, the DLQ writer and the lag client (TLS,
	// SASL); nil: kafka-go's defaults.
	Dialer *kafka.Dialer

	// Transient failures are retried with exponential backoff from
	// RetryMin to RetryMax, with jitter; defaults 100ms and 5s.
	RetryMin time.Duration
	RetryMax time.Duration
	// CommitAttempts is how often a batch's commit is tried before it is
	// given up (see the package doc); default 5.
	CommitAttempts int
	// CommitTimeout bounds one commit attempt; default 10s.
	CommitTimeout time.Duration

	// JoinGroupBackoff is how long a reader waits before joining the group
	// again after an error (a broker restart); default 1s (kafka-go's own
	// default of 5s made recovery from a broker restart take 5-8 s).
	JoinGroupBackoff time.Duration
	// LagInterval is how often the group's lag is computed for
	// rankd_consumer_lag_messages; default 15s; negative disables it (and
	// with it the stall check of readiness).
	LagInterval time.Duration
	// StallTimeout: the consumer is not applying (unready, see
	// Consumer.Applying) when messages wait and nothing was committed for
	// this long, or when the lag could not be read for this long; default
	// 30s.
	StallTimeout time.Duration
}

// Defaults of Config, taken by its zero values. They are the only copy:
// the config package's kafka section refers to them.
const (
	DefaultWorkers            = 2
	DefaultBatchCount         = 1000
	DefaultBatchBytes         = 4 << 20
	DefaultLinger             = 20 * time.Millisecond
	DefaultDeadLetterTopic    = "rankd-dead-letter"
	DefaultDeadLetterMaxBytes = 1<<20 - 64<<10
	DefaultShutdownTimeout    = 10 * time.Second
	DefaultMinBytes           = 1
	DefaultMaxBytes           = 1_000_000
	DefaultMaxWait            = 250 * time.Millisecond
	DefaultQueueCapacity      = 1000
	DefaultHeartbeatInterval  = time.Second
	DefaultSessionTimeout     = 10 * time.Second
	DefaultRebalanceTimeout   = 10 * time.Second
	DefaultRetryMin           = 100 * time.Millisecond
	DefaultRetryMax           = 5 * time.Second
	DefaultCommitAttempts     = 5
	DefaultCommitTimeout      = 10 * time.Second
	DefaultLagInterval        = 15 * time.Second
	DefaultJoinGroupBackoff   = time.Second
	DefaultStallTimeout       = 30 * time.Second
)

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.Workers, DefaultWorkers)
	set(&c.BatchCount, DefaultBatchCount)
	set(&c.BatchBytes, DefaultBatchBytes)
	setD(&c.Linger, DefaultLinger)
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = DefaultDeadLetterTopic
	}
	set(&c.DeadLetterMaxBytes, DefaultDeadLetterMaxBytes)
	setD(&c.ShutdownTimeout, DefaultShutdownTimeout)
	set(&c.MinBytes, DefaultMinBytes)
	set(&c.MaxBytes, DefaultMaxBytes)
	setD(&c.MaxWait, DefaultMaxWait)
	set(&c.QueueCapacity, DefaultQueueCapacity)
	setD(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	setD(&c.SessionTimeout, DefaultSessionTimeout)
	setD(&c.RebalanceTimeout, DefaultRebalanceTimeout)
	if c.StartOffset == 0 {
		c.StartOffset = kafka.FirstOffset
	}
	setD(&c.RetryMin, DefaultRetryMin)
	setD(&c.RetryMax, DefaultRetryMax)
	set(&c.CommitAttempts, DefaultCommitAttempts)
	setD(&c.CommitTimeout, DefaultCommitTimeout)
	setD(&c.LagInterval, DefaultLagInterval)
	setD(&c.JoinGroupBackoff, DefaultJoinGroupBackoff)
	setD(&c.StallTimeout, DefaultStallTimeout)
	return c
}

// validate reports every problem of a Config with its defaults applied.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Brokers) == 0 {
		bad("brokers: none")
	}
	if c.Group == "" {
		bad("group: empty")
	}
	if len(c.Topics) == 0 {
		bad("topics: none")
	}
	for _, t := range c.Topics {
		if t == c.DeadLetterTopic {
			bad("topics: %q is also the dead-letter topic", t)
		}
	}
	if c.Workers < 1 || c.BatchCount < 1 || c.BatchBytes < 1 || c.Linger < 0 {
		bad("workers, batch count, batch bytes and linger must be positive")
	}
	if c.MaxWait > 500*time.Millisecond {
		bad("max wait %v: at most 500ms (Reader.Close waits for it)", c.MaxWait)
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		bad("retry backoff [%v, %v]: want 0 < min <= max", c.RetryMin, c.RetryMax)
	}
	if c.StartOffset != kafka.FirstOffset && c.StartOffset != kafka.LastOffset {
		bad("start offset %d: want kafka.FirstOffset or kafka.LastOffset", c.StartOffset)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumer config: %w", err)
	}
	return nil
}
