package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// TestRedisPoolErrorLogged checks the whole path: the logger a command
// builds from its flags becomes go-redis's, and a pool error (a dial that
// fails) ends up as a structured record in it.
func TestRedisPoolErrorLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	var out syncBuffer
	lf := logFlags{format: "json", level: "warn"}
	if _, err := lf.logger(&out); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { setRedisLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))) })

	rdb := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	if err := rdb.Ping(t.Context()).Err(); err == nil {
		t.Fatalf("PING %s answered", addr)
	}
	var records []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q (%v)", line, err)
		}
		records = append(records, rec)
	}
	want := "connection pool: failed to dial after 1 attempts: dial tcp " + addr + ": connect: connection refused"
	for _, rec := range records {
		if rec["msg"] == want {
			if rec["level"] != "WARN" || rec["component"] != "go-redis" || rec["time"] == nil {
				t.Errorf("record %v: want level WARN, component go-redis and a time", rec)
			}
			return
		}
	}
	t.Fatalf("no record with msg %q in:\n%s", want, out.String())
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
