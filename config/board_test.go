package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
)

// TestWrittenZeros checks that a board setting written with a zero value is
// checked as written (the model reads zero as "not set"; the file knows
// better), each error at the setting's position.
func TestWrittenZeros(t *testing.T) {
	for _, tt := range []struct {
		name, old, new string
		want           []string
	}{
		{"retention 0", "every: 1d", "every: 1d\n    retention: 0s", []string{
			`t.yaml:6:16: boards[0].retention: retention 0s is shorter than grace 5m0s`}},
		{"periods 0 on a periodic board", "every: 1d", "every: 1d\n    periods: 0", []string{
			`t.yaml:6:14: boards[0].periods: periods is only for rolling boards`}},
		{"periods on a total board", "every: 1d", "window: total\n    periods: 3", []string{
			`t.yaml:6:14: boards[0].periods: periods is only for rolling boards`}},
		{"tie_horizon 0", "every: 1d", "window: total\n    tie_horizon: 0s", []string{
			`t.yaml:6:18: boards[0].tie_horizon: must be positive, got 0s`}},
		{"negative tie_horizon, once", "every: 1d", "window: total\n    tiebreak: first\n    tie_horizon: -1h", []string{
			`t.yaml:7:18: boards[0].tie_horizon: must be positive, got -1h0m0s`}},
		{"rolling window too long", "every: 1d", "every: 1mo\n    window: rolling\n    periods: 5000", []string{
			`t.yaml:7:14: boards[0].periods: rolling window of 5000 periods is too long`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(base, tt.old, tt.new, 1)
			_, err := LoadBytes("t.yaml", []byte(src))
			var got []string
			for _, e := range unjoin(err) {
				if e != nil {
					got = append(got, e.Error())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q\nconfig:\n%s", got, tt.want, src)
			}
		})
	}
}

// TestBoardsAreNormalized checks that Load returns boards with their
// defaults resolved by the model, which the store accepts as they are.
func TestBoardsAreNormalized(t *testing.T) {
	c, err := LoadBytes("example.yaml", Example())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Boards() {
		n := *b
		n.Normalize()
		if n.Retention != b.Retention || n.TieEpoch != b.TieEpoch || n.TieHorizon != b.TieHorizon ||
			n.Location != b.Location || n.TieUnit != b.TieUnit {
			t.Errorf("board %s is not normalized: %+v", b.Name, b)
		}
		if err := b.Validate(); err != nil {
			t.Errorf("board %s: %v", b.Name, err)
		}
	}
	if b := c.Board("anchor_total"); b.Window != ranking.WindowTotal || !b.TieEpoch.Equal(ranking.DefaultTieEpoch()) ||
		b.TieHorizon != ranking.DefaultTieHorizon {
		t.Errorf("anchor_total tie range: %v for %v", b.TieEpoch, b.TieHorizon)
	}
}

// TestSectionDefaults checks that a file without kafka, redis and rollover
// settings gets the defaults that the README's table documents: those of
// the packages that own them (consumer, ranking/ingest, ranking/store).
func TestSectionDefaults(t *testing.T) {
	c, err := LoadBytes("t.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kafka
	want := Kafka{Brokers: []string{"localhost:9092"}, Group: "rankd", Topics: []string{"gift"},
		Workers: 2, Batch: Batch{Count: 1000, Bytes: 4 << 20, Linger: 20 * time.Millisecond},
		DeadLetterTopic: "rankd-dead-letter", MaxMessageBytes: 1 << 20, FutureSkew: time.Minute,
		MinBytes: 1, MaxWait: 250 * time.Millisecond, SessionTimeout: 10 * time.Second,
		HeartbeatInterval: time.Second, RebalanceTimeout: 10 * time.Second, ShutdownTimeout: 10 * time.Second}
	if !slices.Equal(k.Brokers, want.Brokers) || !slices.Equal(k.Topics, want.Topics) {
		t.Errorf("kafka brokers %v, topics %v", k.Brokers, k.Topics)
	}
	k.Brokers, k.Topics, want.Brokers, want.Topics = nil, nil, nil, nil
	if !reflect.DeepEqual(k, want) {
		t.Errorf("kafka defaults\n got %+v\nwant %+v", k, want)
	}
	if c.Redis.Prefix != "rankd" || c.Redis.DedupeTTL != 24*time.Hour {
		t.Errorf("redis defaults %+v", c.Redis)
	}
	if c.Rollover != (Rollover{Lead: 10 * time.Minute, Interval: time.Minute}) {
		t.Errorf("rollover defaults %+v", c.Rollover)
	}
}

// TestEnvNames checks the list of environment variables: every name is
// RANKD_*, listed once, and each override reaches its setting.
func TestEnvNames(t *testing.T) {
	names := EnvNames()
	seen := map[string]bool{}
	for _, n := range names {
		if !strings.HasPrefix(n, "RANKD_") || seen[n] {
			t.Errorf("environment variable %q: not RANKD_* or listed twice", n)
		}
		seen[n] = true
	}
	if want := []string{"RANKD_KAFKA_BROKERS", "RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS",
		"RANKD_REDIS_SENTINEL_ADDRS", "RANKD_REDIS_SENTINEL_USERNAME", "RANKD_REDIS_SENTINEL_PASSWORD", "RANKD_REDIS_USERNAME",
		"RANKD_REDIS_PASSWORD", "RANKD_KAFKA_SASL_USERNAME", "RANKD_KAFKA_SASL_PASSWORD", "RANKD_HTTP_TOKEN",
		"RANKD_HTTP_LISTEN", "RANKD_HTTP_METRICS_LISTEN", "RANKD_CONFIG"}; !slices.Equal(names, want) {
		t.Errorf("EnvNames() = %v, want %v", names, want)
	}
	for _, n := range names {
		t.Setenv(n, "")
	}
	t.Setenv(EnvRedisAddr, "r0:6379")
	c, err := LoadBytes("t.yaml", []byte(base))
	if err != nil || c.Redis.Addr != "r0:6379" {
		t.Fatalf("%s: %+v, %v", EnvRedisAddr, c, err)
	}
}
