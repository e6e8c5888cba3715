package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/assembly"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/internal/testenv"
)

// sentinelConfig returns the example config with its redis.addr replaced
// by a redis.sentinel section of master name and sentinel addresses.
func sentinelConfig(t *testing.T, name string, addrs []string) string {
	t.Helper()
	src := string(config.Example())
	const addr = "  addr: localhost:6379"
	i := strings.Index(src, addr)
	if i < 0 {
		t.Fatalf("the example has no %q", addr)
	}
	end := i + strings.IndexByte(src[i:], '\n')
	return src[:i] + "  sentinel:\n    master_name: " + name + "\n    addrs: [" + strings.Join(addrs, ", ") + "]" + src[end:]
}

// clearEnv empties every environment variable the config reads.
func clearEnv(t *testing.T) {
	for _, k := range config.EnvNames() {
		t.Setenv(k, "")
	}
}

// TestConfigCheckSentinel: `rankd config check` loads a redis.sentinel
// section and prints it, with where the sentinels' password comes from.
func TestConfigCheckSentinel(t *testing.T) {
	clearEnv(t)
	t.Setenv(config.EnvRedisSentinelPassword, "sentinel-S3CRET")
	src := sentinelConfig(t, "rankd-primary", []string{"10.0.0.1:26379", "10.0.0.2:26379"})
	src = strings.Replace(src, "    addrs: [10.0.0.1:26379, 10.0.0.2:26379]", "    addrs: [10.0.0.1:26379, 10.0.0.2:26379]\n    username: watcher", 1)
	path := writeFile(t, "rankd.yaml", src)
	code, stdout, stderr := runCLI(t, "config", "check", path)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"redis     sentinel master rankd-primary via 10.0.0.1:26379,10.0.0.2:26379 db 0, prefix rankd, dedupe TTL 24h, 1000 updates per call",
		"security  redis tls off, password: none; sentinels user watcher, password: RANKD_REDIS_SENTINEL_PASSWORD",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, "sentinel-S3CRET") {
		t.Error("config check shows the sentinels' password")
	}

	// Sentinel and an address: refused with the line.
	bad := strings.Replace(src, "  sentinel:\n", "  addr: localhost:6379\n  sentinel:\n", 1)
	line := 1 + strings.Count(bad[:strings.Index(bad, "  addr: localhost:6379\n  sentinel:")], "\n")
	code, _, stderr = runCLI(t, "config", "check", writeFile(t, "rankd.yaml", bad))
	want := "rankd.yaml:" + strconv.Itoa(line) + ":9: redis.addr: set with redis.sentinel: leave it out (the sentinels give the primary's address)"
	if code != cli.ExitUsage || !strings.Contains(stderr, want) {
		t.Errorf("addr and sentinel: exit %d, stderr\n%s\nwant %s", code, stderr, want)
	}
}

// TestSentinelFailover: the client rankd builds from a redis.sentinel
// config (assembly.NewRedis), with the sentinel's password from
// RANKD_REDIS_SENTINEL_PASSWORD, writes to the primary; after the primary
// is killed with SIGKILL and Sentinel promotes the replica, the same
// client, not recreated, writes to the new primary.
func TestSentinelFailover(t *testing.T) {
	clearEnv(t)
	const password = "sentinel-Pw-5e1d"
	s := testenv.NewSentinel(t, testenv.RedisSentinelOptions{MasterName: "rankd-primary", Password: password})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The sentinel requires its password.
	anon := redis.NewSentinelClient(&redis.Options{Addr: s.Addrs()[0], MaxRetries: -1})
	defer anon.Close()
	if err := anon.GetMasterAddrByName(ctx, s.MasterName()).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("the sentinel answers without its password: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rankd.yaml")
	if err := os.WriteFile(path, []byte(sentinelConfig(t, s.MasterName(), s.Addrs())), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without the password, rankd's client gets no primary from the
	// sentinel.
	t.Setenv(config.EnvRedisSentinelPassword, "")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	noPass := assembly.NewRedis(cfg.Redis)
	if err := noPass.Set(ctx, "k", "v", 0).Err(); err == nil {
		t.Error("a client without the sentinel's password wrote")
	} else if me := secure.Classify("redis", err); me == nil || !strings.Contains(me.Error(),
		"redis: the sentinels refused authentication (check redis.sentinel.username and RANKD_REDIS_SENTINEL_PASSWORD or redis.sentinel.password_file)") {
		t.Errorf("without the sentinel's password: %v, classified %v", err, me)
	}
	_ = noPass.Close()

	t.Setenv(config.EnvRedisSentinelPassword, password)
	if cfg, err = config.Load(path); err != nil {
		t.Fatal(err)
	}
	rdb := assembly.NewRedis(cfg.Redis)
	defer rdb.Close()
	if _, ok := rdb.(*redis.Client); !ok {
		t.Fatalf("assembly.NewRedis returned a %T for a sentinel config, want go-redis's failover *redis.Client", rdb)
	}

	old, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "before", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZIncrBy(ctx, "board", 5, "anchor1").Err(); err != nil {
		t.Fatal(err)
	}
	// The writes reached the primary and its replica.
	if got, err := s.Node(old).Client(t).Get(ctx, "before").Result(); err != nil || got != "v1" {
		t.Fatalf("GET before on the primary %s = %q, %v", old, got, err)
	}
	if n, err := rdb.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}

	if _, err := s.KillMaster(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// The same client, from the crash on: the commands fail while the
	// sentinel still names the dead primary (rankd's own retry repeats
	// them), then reach the promoted replica. A failed command reached no
	// server (the primary was dead, the replica not yet named).
	var failed int
	var lastErr error
	for {
		err := rdb.ZIncrBy(ctx, "board", 7, "anchor1").Err()
		if err == nil {
			break
		}
		failed, lastErr = failed+1, err
		if ctx.Err() != nil {
			t.Fatalf("no write through the same client after the SIGKILL: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the same client wrote %v after the SIGKILL of %s, after %d failed commands (last: %v)",
		time.Since(killed).Round(10*time.Millisecond), old, failed, lastErr)
	promoted, err := s.WaitMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "after", "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Read back from the new primary itself.
	c := s.Node(promoted).Client(t)
	if role, err := c.Do(ctx, "ROLE").Slice(); err != nil || len(role) == 0 || role[0] != "master" {
		t.Fatalf("ROLE of %s = %v, %v", promoted, role, err)
	}
	for key, want := range map[string]string{"before": "v1", "after": "v2"} {
		if got, err := c.Get(ctx, key).Result(); err != nil || got != want {
			t.Errorf("GET %s on the new primary = %q, %v; want %q", key, got, err, want)
		}
	}
	if got, err := c.ZScore(ctx, "board", "anchor1").Result(); err != nil || got != 12 {
		t.Errorf("ZSCORE board anchor1 on the new primary = %v, %v; want 12 (5 before, 7 after)", got, err)
	}
	if got, err := rdb.Get(ctx, "after").Result(); err != nil || got != "v2" {
		t.Errorf("GET after through the client = %q, %v", got, err)
	}
}
