package assembly

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestRedisLogger checks that go-redis's internal log lines become slog
// records at warn level (issue 11: pool.go lines in plain text among
// rankd's JSON logs).
func TestRedisLogger(t *testing.T) {
	for _, tt := range []struct {
		format string
		args   []any
		want   string // the record, without the time
	}{
		{"redis: connection pool: failed to dial after %d attempts: %v", []any{5, "connection refused"},
			`{"level":"WARN","msg":"connection pool: failed to dial after 5 attempts: connection refused","component":"go-redis"}`},
		{"Conn has unread data (not push notification), removing it", nil,
			`{"level":"WARN","msg":"Conn has unread data (not push notification), removing it","component":"go-redis"}`},
		{"autopipeline: full-duplex push drain: %v\n", []any{"EOF"},
			`{"level":"WARN","msg":"autopipeline: full-duplex push drain: EOF","component":"go-redis"}`},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime}))
		redisLogger{log}.Printf(context.Background(), tt.format, tt.args...)
		if got := strings.TrimSpace(buf.String()); got != tt.want {
			t.Errorf("Printf(%q):\n got %s\nwant %s", tt.format, got, tt.want)
		}
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
