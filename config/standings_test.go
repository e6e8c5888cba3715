package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/config"
)

func TestPublish(t *testing.T) {
	base := "kafka: {brokers: [\"localhost:9092\"]}\nredis: {addr: \"localhost:6379\"}\n" +
		"routes:\n  - topic: gift\n    member: anchor_id\n    boards: [b]\n"
	c, err := config.LoadBytes("t.yaml", []byte(base+"standings: {topic: payouts, interval: 1s, lock_ttl: 5s}\n"+
		"boards:\n  - name: b\n    every: 30m\n    publish: {top: 20, retention: 35d}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Standings.Boards["b"]; p.Top != 20 || p.Retention != 35*24*time.Hour || c.Standings.Topic != "payouts" || c.Standings.Interval != time.Second {
		t.Fatalf("got %+v", c.Standings)
	}
	for _, tc := range []struct{ board, want string }{
		{"  - name: b\n    publish: {top: 5}\n", "t.yaml:9:14: boards[0].publish: a total board is never final"},
		{"  - name: b\n    every: 1h\n    publish: {retention: 1d}\n", "boards[0].publish.top: required"},
		{"  - name: b\n    every: 1h\n    publish: {top: 1001}\n", "boards[0].publish.top: must be 1..1000, got 1001"},
	} {
		_, err := config.LoadBytes("t.yaml", []byte(base+"boards:\n"+tc.board))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.board, err, tc.want)
		}
	}
}
