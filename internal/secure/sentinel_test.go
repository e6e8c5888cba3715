package secure_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/internal/testenv"
)

// TestApplyRedisSentinel: with redis.sentinel, ApplyRedis sets the
// sentinels' username and password beside the data nodes' credentials,
// and one TLS config, which go-redis uses for both; go-redis's failover
// options carry them to the sentinels.
func TestApplyRedisSentinel(t *testing.T) {
	clearSecretEnv(t)
	pki := testenv.NewPKI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data-pw"), []byte("data-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvRedisSentinelPassword, "sentinel-secret")
	cfg := loadConfig(t, dir, "", "  sentinel: {master_name: m, addrs: [127.0.0.1:26379], username: watcher}\n"+
		"  username: app\n  password_file: data-pw\n"+tlsSection(pki.CAFile, "", ""))
	opts := &redis.UniversalOptions{MasterName: "m", Addrs: cfg.Redis.Sentinel.Addrs}
	secure.ApplyRedis(cfg.Redis, opts)
	if opts.SentinelUsername != "watcher" || opts.SentinelPassword != "sentinel-secret" {
		t.Errorf("sentinel credentials: user %q, password set %v", opts.SentinelUsername, opts.SentinelPassword != "")
	}
	if opts.TLSConfig == nil || opts.TLSConfig.RootCAs == nil {
		t.Fatal("no TLS config")
	}
	if opts.CredentialsProviderContext == nil {
		t.Fatal("the data nodes' password file is not read per connection")
	}
	user, pass, err := opts.CredentialsProviderContext(t.Context())
	if user != "app" || pass != "data-secret" || err != nil {
		t.Errorf("data node credentials: %q, password matches %v, %v", user, pass == "data-secret", err)
	}
	f := opts.Failover()
	if f.SentinelUsername != "watcher" || f.SentinelPassword != "sentinel-secret" || f.TLSConfig != opts.TLSConfig || f.MasterName != "m" {
		t.Errorf("failover options: sentinel user %q, master %q, same TLS %v", f.SentinelUsername, f.MasterName, f.TLSConfig == opts.TLSConfig)
	}

	// Without redis.sentinel the sentinel fields stay empty.
	clearSecretEnv(t)
	cfg = loadConfig(t, dir, "", "  addr: 127.0.0.1:6379\n")
	opts = &redis.UniversalOptions{}
	secure.ApplyRedis(cfg.Redis, opts)
	if opts.SentinelUsername != "" || opts.SentinelPassword != "" {
		t.Errorf("sentinel credentials without redis.sentinel: %q", opts.SentinelUsername)
	}
}
