//go:build !nodev

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/rankd/rankd/cmd/rankd/internal/bench"
	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
)

// TestBench runs `rankd bench` once on a small workload, in process: its
// own broker child process, a dedicated redis-server given with --redis.
// After the rankd drain and after the replay, every board equals the
// oracle's recomputation from the topics. It checks the JSON's fields and
// the counts that do not depend on speed; no figure is asserted.
func TestBench(t *testing.T) {
	testenv.Slow(t, "real rankd processes, minutes with -race")
	srv := testenv.NewRedis(t, testenv.RedisOptions{})
	dir := t.TempDir()
	jsonFile, profile := filepath.Join(dir, "bench.json"), filepath.Join(dir, "rankd.pprof")
	args := []string{"--events", "20000", "--naive-events", "2000", "--rollover-members", "20000",
		"--latency-duration", "2s", "--read-clients", "20", "--read-rate", "2000", "--read-duration", "2s",
		"--redis", srv.Addr(), "--json", jsonFile, "--cpuprofile", profile}
	var checked []string
	check := func(ctx context.Context, phase string, env bench.CheckEnv) error {
		cfg := env.Config
		router, err := cfg.Router()
		if err != nil {
			t.Fatal(err)
		}
		log := testenv.ReadLog(t, cfg.Kafka.Brokers, env.Topics...)
		if len(log) != 20000 {
			t.Fatalf("%s: the topics hold %d messages, want 20000", phase, len(log))
		}
		res := oracle.Log{Schemas: cfg.Schemas(), Router: router}.FromLog(cfg.Boards(), log)
		if len(res.Invalid)+len(res.Rejected) > 0 {
			t.Fatalf("%s: the oracle rejects messages: %d invalid, %d late or out of range", phase, len(res.Invalid), len(res.Rejected))
		}
		rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis.Addr})
		defer rdb.Close()
		compareStore(t, cfg, rdb, res.Oracle, nil, phase)
		checked = append(checked, phase)
		return nil
	}
	// the progress line and the logger both write stderr, from their own
	// goroutines (an *os.File takes that; a bytes.Buffer does not)
	var stdout, stderr syncBuffer
	c := cli.Spec{Use: "bench", Flags: func(fs *pflag.FlagSet) cli.RunFunc {
		return benchFlags(fs, func(o *bench.Options) { o.Check = check })
	}}.Command()
	c.SetArgs(args)
	c.SetOut(&stdout)
	c.SetErr(&stderr)
	err := c.ExecuteContext(t.Context())
	t.Logf("rankd bench %s:\n%s", strings.Join(args, " "), stdout.String())
	if err != nil {
		t.Fatalf("rankd bench: %v\nstderr:\n%s", err, stderr.String())
	}
	if want := []string{bench.PhaseRankd, bench.PhaseReplay}; !slices.Equal(checked, want) {
		t.Errorf("boards checked after %v, want %v", checked, want)
	}
	for _, row := range []string{"rankd", "naive", "seed pipelined", "replay", "latency:", "rollover:", "memory:"} {
		if !strings.Contains(stdout.String(), "\n"+row) && !strings.Contains(stdout.String(), " "+row+" ") {
			t.Errorf("the table has no %q row", row)
		}
	}
	if !strings.Contains(stderr.String(), "bench: rankd drain") {
		t.Errorf("no progress line on stderr:\n%s", stderr.String())
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("--cpuprofile: %v, %v", fi, err)
	}

	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, data)
	}
	num := func(path string) float64 {
		t.Helper()
		var v any = doc
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				t.Errorf("JSON %s: %s is not an object", path, k)
				return 0
			}
			if v, ok = m[k]; !ok {
				t.Errorf("JSON %s: no %s", path, k)
				return 0
			}
		}
		f, ok := v.(float64)
		if !ok {
			t.Errorf("JSON %s = %v: not a number", path, v)
		}
		return f
	}
	for _, d := range []string{"drain.rankd", "drain.naive", "drain.seed_pipelined", "replay"} {
		for _, f := range []string{"events", "seconds", "events_per_sec", "redis_busy", "redis_cpu_us_per_event",
			"redis_cpu_us_per_update", "process_cpu_us_per_event", "broker_cpu_us_per_event",
			"redis_commands.scripts_us_per_event", "redis_commands.commands_in_scripts_us_per_event",
			"redis_commands.lua_us_per_event", "redis_commands.outside_commands_us_per_event"} {
			num(d + "." + f)
		}
		stats, _ := doc[strings.Split(d, ".")[0]].(map[string]any)
		if d != "replay" {
			stats, _ = stats[strings.TrimPrefix(d, "drain.")].(map[string]any)
		}
		cmds, _ := stats["redis_commands"].(map[string]any)
		list, _ := cmds["stats"].([]any)
		if !slices.ContainsFunc(list, func(s any) bool {
			m, _ := s.(map[string]any)
			_, calls := m["calls"].(float64)
			_, per := m["usec_per_call"].(float64)
			return m["command"] == "evalsha" && calls && per
		}) {
			t.Errorf("JSON %s.redis_commands.stats: no evalsha with calls and usec_per_call: %v", d, list)
		}
	}
	for _, f := range []string{"drain.rankd_over_naive", "drain.rankd_over_seed", "preload.events_per_sec",
		"latency.rate", "latency.produced_rate", "latency.markers", "latency.produce_p50_ms", "latency.lag_at_end",
		"latency.redis.p50_ms", "latency.redis.p99_ms", "latency.redis.max_ms", "latency.redis.poll_ms", "latency.redis.read_p50_ms",
		"latency.api.p50_ms", "latency.api.p99_ms", "latency.api.max_ms", "latency.api.poll_ms", "latency.api.read_p50_ms",
		"rollover.seconds", "rollover.members_per_sec", "rollover.reader_calls", "rollover.reader_p99_ms", "rollover.reader_max_ms", "rollover.slowest_call_ms",
		"memory.used_memory", "memory.bytes_per_board_member", "memory.bytes_per_dedupe_id", "memory.bytes_per_dedupe_id_all",
		"memory.board_members", "memory.dedupe_ids", "machine.cpus"} {
		num(f)
	}
	// Counts that do not depend on speed.
	if n := num("drain.rankd.events"); n != 20000 {
		t.Errorf("drain.rankd.events = %v, want 20000", n)
	}
	if n := num("drain.naive.events"); n != 2000 {
		t.Errorf("drain.naive.events = %v, want 2000", n)
	}
	if n := num("replay.events"); n != 20000 {
		t.Errorf("replay.events = %v, want 20000", n)
	}
	if n := num("rollover.members"); n != 20000 {
		t.Errorf("rollover.members = %v, want 20000", n)
	}
	if a, b := num("drain.rankd.updates"), num("drain.seed_pipelined.updates"); a != b || a == 0 {
		t.Errorf("updates: rankd %v, seed %v; want equal (same events, same routes)", a, b)
	}
	if n := num("latency.markers"); n < 1 {
		t.Errorf("latency.markers = %v", n)
	}
}
