package main

import (
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/assembly"
	"github.com/redis/go-redis/v9"
)

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
	lf := cli.LogFlags{Format: "json", Level: "warn"}
	if _, err := lf.Logger(&out); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assembly.SetRedisLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))) })

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
