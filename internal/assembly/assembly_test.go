package assembly

import (
	"fmt"
	"testing"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking/store"
)

// TestDefaultsAgree: config owns the file's defaults and imports neither
// consumer nor store, which keep defaults of their own for callers without
// a config; the two must say the same.
func TestDefaultsAgree(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cfg, lib any
	}{
		{"kafka.workers", config.DefaultWorkers, consumer.DefaultWorkers},
		{"kafka.batch.count", config.DefaultBatchCount, consumer.DefaultBatchCount},
		{"kafka.batch.bytes", config.DefaultBatchBytes, consumer.DefaultBatchBytes},
		{"kafka.batch.linger", config.DefaultLinger, consumer.DefaultLinger},
		{"kafka.dead_letter_topic", config.DefaultDeadLetterTopic, consumer.DefaultDeadLetterTopic},
		{"kafka.min_bytes", config.DefaultMinBytes, consumer.DefaultMinBytes},
		{"kafka.max_wait", config.DefaultMaxWait, consumer.DefaultMaxWait},
		{"kafka.session_timeout", config.DefaultSessionTimeout, consumer.DefaultSessionTimeout},
		{"kafka.heartbeat_interval", config.DefaultHeartbeatInterval, consumer.DefaultHeartbeatInterval},
		{"kafka.rebalance_timeout", config.DefaultRebalanceTimeout, consumer.DefaultRebalanceTimeout},
		{"kafka.shutdown_timeout", config.DefaultShutdownTimeout, consumer.DefaultShutdownTimeout},
		{"redis.prefix", config.DefaultPrefix, store.DefaultPrefix},
		{"redis.dedupe_ttl", config.DefaultDedupeTTL, store.DefaultDedupeTTL},
		{"redis.call_updates", config.DefaultCallUpdates, store.DefaultCallSize},
		{"rollover.lead", config.DefaultRolloverLead, store.DefaultRolloverLead},
		{"rollover.interval", config.DefaultRolloverInterval, store.DefaultRolloverInterval},
		{"standings.topic", config.DefaultStandingsTopic, consumer.DefaultStandingsTopic},
		{"standings.interval", config.DefaultStandingsInterval, store.DefaultStandingsInterval},
		{"standings.lock_ttl", config.DefaultStandingsLockTTL, store.DefaultStandingsLockTTL},
		{"publish.retention", config.DefaultStandingsRetention, store.DefaultStandingsRetention},
		{"publish.top (most)", config.MaxPublishTop, store.MaxLimit},
	} {
		if tt.cfg != tt.lib {
			t.Errorf("%s: config's default %v, the library's %v", tt.name, tt.cfg, tt.lib)
		}
	}
	if err := store.ValidatePrefix(config.DefaultPrefix); err != nil {
		t.Errorf("config.DefaultPrefix: %v", err)
	}
}

// TestTopics: the topics a replay of some boards reads are the topics of
// the routes that feed them.
func TestTopics(t *testing.T) {
	cfg, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		boards []string
		want   string
	}{
		{nil, "[comment gift like]"},
		{[]string{"anchor_hot_30m"}, "[gift]"},
	} {
		if got := fmt.Sprint(Topics(cfg, tt.boards)); got != tt.want {
			t.Errorf("Topics(%v) = %s, want %s", tt.boards, got, tt.want)
		}
	}
}
