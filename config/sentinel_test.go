package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sentinelBase is a valid config that reaches Redis through Sentinel.
const sentinelBase = `kafka:
  brokers: [k:9092]
redis:
  sentinel:
    master_name: mymaster
    addrs: [s1:26379, s2:26379]
boards:
  - {name: total_coins, window: total}
routes:
  - {topic: gift, member: anchor_id, score: coins, boards: [total_coins]}
`

// TestSentinelDecodes: the redis.sentinel section decodes into
// Redis.Sentinel; the file's addresses, the environment's and the
// credentials land where they should.
func TestSentinelDecodes(t *testing.T) {
	clearSecureEnv(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sentinel-pw"), []byte("s-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(sentinelBase, "    addrs: [s1:26379, s2:26379]\n",
		"    addrs: [s1:26379, s2:26379]\n    username: watcher\n    password_file: sentinel-pw\n  db: 2\n", 1)
	c, err := loadIn(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redis
	if !r.Sentinel.Enabled() || r.Cluster() || r.Addr != "" || r.DB != 2 {
		t.Errorf("redis: sentinel %v, cluster %v, addr %q, db %d", r.Sentinel.Enabled(), r.Cluster(), r.Addr, r.DB)
	}
	s := r.Sentinel
	if s.MasterName != "mymaster" || !slices.Equal(s.Addrs, []string{"s1:26379", "s2:26379"}) || s.Username != "watcher" ||
		s.Password.Value() != "s-secret" || s.PasswordFile != filepath.Join(dir, "sentinel-pw") {
		t.Errorf("sentinel = %+v (password %q)", s, s.Password.Value())
	}
	if r.Username != "" || r.Password != "" {
		t.Errorf("the data nodes' credentials took the sentinels': user %q", r.Username)
	}
	summary := c.SecuritySummary()[0]
	if want := "redis tls off, password: none; sentinels user watcher, password: file " + filepath.Join(dir, "sentinel-pw"); summary != want {
		t.Errorf("summary\n got %q\nwant %q", summary, want)
	}

	// The environment: addresses, username and password.
	t.Setenv(EnvRedisSentinelAddrs, "e1:26379, e2:26379,e3:26379")
	t.Setenv(EnvRedisSentinelUsername, "env-watcher")
	t.Setenv(EnvRedisSentinelPassword, "env-s")
	c, err = loadIn(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	s = c.Redis.Sentinel
	if !slices.Equal(s.Addrs, []string{"e1:26379", "e2:26379", "e3:26379"}) || s.Username != "env-watcher" ||
		s.Password.Value() != "env-s" || s.PasswordFile != "" || s.MasterName != "mymaster" {
		t.Errorf("environment did not win: %+v", s)
	}
	if summary := c.SecuritySummary()[0]; !strings.HasSuffix(summary, "; sentinels user env-watcher, password: RANKD_REDIS_SENTINEL_PASSWORD") {
		t.Errorf("summary %q", summary)
	}
	clearSecureEnv(t)

	// RANKD_REDIS_SENTINEL_ADDRS turns a file with redis.addr to Sentinel
	// (the master name still comes from the file).
	plain := strings.Replace(secureBase, "  addr: r:6379\n", "  addr: r:6379\n  sentinel: {master_name: m}\n", 1)
	if _, err := loadIn(t, dir, plain); err == nil || !strings.Contains(err.Error(), "redis.addr: set with redis.sentinel") {
		t.Fatalf("addr with sentinel in the file: err = %v", err)
	}
	t.Setenv(EnvRedisSentinelAddrs, "e1:26379")
	if c, err = loadIn(t, dir, plain); err != nil || c.Redis.Addr != "" || !c.Redis.Sentinel.Enabled() ||
		!slices.Equal(c.Redis.Sentinel.Addrs, []string{"e1:26379"}) || c.Redis.Sentinel.MasterName != "m" {
		t.Fatalf("%s over redis.addr: %+v, %v", EnvRedisSentinelAddrs, c, err)
	}
	clearSecureEnv(t)

	// RANKD_REDIS_ADDR and RANKD_REDIS_ADDRS turn a file with redis.sentinel
	// to a standalone server or a cluster, as they turn one mode to the other.
	t.Setenv(EnvRedisAddr, "r0:6379")
	if c, err = loadIn(t, dir, src); err != nil || c.Redis.Addr != "r0:6379" || c.Redis.Sentinel.Enabled() ||
		c.Redis.Sentinel.MasterName != "" || c.Redis.Sentinel.Password != "" {
		t.Fatalf("%s over redis.sentinel: %+v, %v", EnvRedisAddr, c, err)
	}
	clearSecureEnv(t)
	t.Setenv(EnvRedisAddrs, "r1:7000,r2:7000")
	if c, err = loadIn(t, dir, strings.Replace(src, "  db: 2\n", "", 1)); err != nil || !c.Redis.Cluster() || c.Redis.Sentinel.Enabled() {
		t.Fatalf("%s over redis.sentinel: %+v, %v", EnvRedisAddrs, c, err)
	}
}

// TestSentinelErrors: every inconsistent sentinel setting is an error at
// its line, with the exact message.
func TestSentinelErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		old, new string // replaced in sentinelBase
		env      map[string]string
		want     []string // every error, without the file name
	}{
		{name: "no master name", old: "    master_name: mymaster\n", new: "",
			want: []string{`5:5: redis.sentinel.master_name: no master name (the <name> of the sentinels' "sentinel monitor <name> ...")`}},
		{name: "no addrs", old: "    addrs: [s1:26379, s2:26379]\n", new: "",
			want: []string{`5:5: redis.sentinel.addrs: no sentinel addresses (set redis.sentinel.addrs or RANKD_REDIS_SENTINEL_ADDRS)`}},
		{name: "empty addrs", old: "[s1:26379, s2:26379]", new: "[]",
			want: []string{`6:12: redis.sentinel.addrs: no sentinel addresses (set redis.sentinel.addrs or RANKD_REDIS_SENTINEL_ADDRS)`}},
		{name: "empty section", old: "  sentinel:\n    master_name: mymaster\n    addrs: [s1:26379, s2:26379]\n", new: "  sentinel: {}\n",
			want: []string{
				`4:13: redis.sentinel.master_name: no master name (the <name> of the sentinels' "sentinel monitor <name> ...")`,
				`4:13: redis.sentinel.addrs: no sentinel addresses (set redis.sentinel.addrs or RANKD_REDIS_SENTINEL_ADDRS)`,
			}},
		{name: "addr without port", old: "s2:26379", new: "s2",
			want: []string{`6:23: redis.sentinel.addrs[1]: sentinel "s2" is not host:port`}},
		{name: "with addr", old: "redis:\n", new: "redis:\n  addr: r:6379\n",
			want: []string{`4:9: redis.addr: set with redis.sentinel: leave it out (the sentinels give the primary's address)`}},
		{name: "with addrs", old: "    addrs: [s1:26379, s2:26379]\n", new: "    addrs: [s1:26379, s2:26379]\n  addrs: [r1:7000, r2:7000]\n",
			want: []string{`7:10: redis.addrs: set with redis.sentinel: choose a cluster (addrs) or Sentinel, not both`}},
		{name: "inline password", old: "    addrs: [s1:26379, s2:26379]\n", new: "    addrs: [s1:26379, s2:26379]\n    username: w\n    password: hunter2\n",
			want: []string{`8:15: redis.sentinel.password: a secret in the config file is refused: set RANKD_REDIS_SENTINEL_PASSWORD in the environment, or redis.sentinel.password_file to a file holding it`}},
		{name: "username without password", old: "    addrs: [s1:26379, s2:26379]\n", new: "    addrs: [s1:26379, s2:26379]\n    username: w\n",
			want: []string{`7:15: redis.sentinel.username: user "w" has no password: set RANKD_REDIS_SENTINEL_PASSWORD or redis.sentinel.password_file`}},
		{name: "password file missing", old: "    addrs: [s1:26379, s2:26379]\n", new: "    addrs: [s1:26379, s2:26379]\n    password_file: nope\n",
			want: []string{fmt.Sprintf(`7:20: redis.sentinel.password_file: open %s: no such file or directory`, filepath.Join(dir, "nope"))}},
		{name: "not a mapping", old: "  sentinel:\n    master_name: mymaster\n    addrs: [s1:26379, s2:26379]\n", new: "  sentinel: [s1:26379]\n",
			want: []string{
				`4:13: redis.sentinel: want a mapping, got a list`,
				`4:13: redis.sentinel.master_name: no master name (the <name> of the sentinels' "sentinel monitor <name> ...")`,
				`4:13: redis.sentinel.addrs: no sentinel addresses (set redis.sentinel.addrs or RANKD_REDIS_SENTINEL_ADDRS)`,
			}},
		{name: "unknown key", old: "    master_name:", new: "    master: x\n    master_name:",
			want: []string{`5:5: redis.sentinel.master: unknown key "master" (want addrs, master_name, password, password_file, username)`}},
		{name: "sentinel password without sentinel", old: "  sentinel:\n    master_name: mymaster\n    addrs: [s1:26379, s2:26379]\n", new: "  addr: r:6379\n",
			env:  map[string]string{EnvRedisSentinelPassword: "p"},
			want: []string{`4:3: redis: RANKD_REDIS_SENTINEL_PASSWORD is set but redis.sentinel is not`}},
		{name: "env addr and sentinel addrs", env: map[string]string{EnvRedisAddr: "r:6379", EnvRedisSentinelAddrs: "s:26379"},
			want: []string{` redis: both RANKD_REDIS_ADDR and RANKD_REDIS_SENTINEL_ADDRS are set`}},
		{name: "all three env addresses", env: map[string]string{EnvRedisAddr: "r:6379", EnvRedisAddrs: "r:7000", EnvRedisSentinelAddrs: "s:26379"},
			want: []string{` redis: RANKD_REDIS_ADDR, RANKD_REDIS_ADDRS and RANKD_REDIS_SENTINEL_ADDRS are all set`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearSecureEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if !strings.Contains(sentinelBase, tt.old) {
				t.Fatalf("sentinelBase has no %q", tt.old)
			}
			src := strings.Replace(sentinelBase, tt.old, tt.new, 1)
			_, err := loadIn(t, dir, src)
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			if got := errorLines(err); !slices.Equal(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q\nconfig:\n%s", got, tt.want, src)
			}
		})
	}
}
