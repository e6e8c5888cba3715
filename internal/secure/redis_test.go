package secure_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// minimalYAML is a valid config without security settings; tests append
// their redis and kafka sections' extra keys through the env and sections.
const boardsYAML = `
boards:
  - {name: total_coins, window: total}
routes:
  - {topic: gift, member: anchor_id, score: coins, boards: [total_coins]}
`

// loadConfig loads a config of the given redis and kafka sections (YAML,
// indented by two spaces) in dir, as rankd does: environment overrides
// included.
func loadConfig(t *testing.T, dir, kafka, redis string) *config.Config {
	t.Helper()
	src := "kafka:\n  brokers: [127.0.0.1:1]\n" + kafka + "redis:\n" + redis + boardsYAML
	path := filepath.Join(dir, "rankd.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config:\n%s\n%v", src, err)
	}
	return cfg
}

// clearSecretEnv empties the environment variables of the secrets, so that
// the tests read only what they set.
func clearSecretEnv(t *testing.T) {
	for _, k := range []string{"RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS", config.EnvRedisSentinelAddrs, config.EnvRedisSentinelUsername,
		config.EnvRedisSentinelPassword, config.EnvRedisUsername, config.EnvRedisPassword,
		"RANKD_KAFKA_BROKERS", config.EnvKafkaSASLUsername, config.EnvKafkaSASLPassword, config.EnvHTTPToken} {
		t.Setenv(k, "")
	}
}

// newClient builds the store's client as cmd/rankd does: the options of
// the config's redis section.
func newClient(cfg config.Redis) redis.UniversalClient {
	opts := &redis.UniversalOptions{MaxRetries: -1}
	switch {
	case cfg.Sentinel.Enabled():
		opts.MasterName, opts.Addrs = cfg.Sentinel.MasterName, cfg.Sentinel.Addrs
	case cfg.Cluster():
		opts.Addrs, opts.IsClusterMode = cfg.Addrs, true
	default:
		opts.Addrs = []string{cfg.Addr}
	}
	secure.ApplyRedis(cfg, opts)
	return redis.NewUniversalClient(opts)
}

func tlsSection(caFile, certFile, keyFile string) string {
	s := "  tls:\n    enabled: true\n    ca_file: " + caFile + "\n"
	if certFile != "" {
		s += "    cert_file: " + certFile + "\n    key_file: " + keyFile + "\n"
	}
	return s
}

// checkNoSecret fails if text holds one of the secrets.
func checkNoSecret(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s shows a secret: %s", what, text)
		}
	}
}

// probe runs CheckRedis on cfg's client with a 20s bound, and reports how
// long it took (printed, not asserted).
func probe(t *testing.T, cfg config.Redis) error {
	t.Helper()
	rdb := newClient(cfg)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err := secure.CheckRedis(ctx, rdb, cfg)
	t.Logf("CheckRedis: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("CheckRedis hung until its deadline: %v", err)
	}
	return err
}

// wantMisconfig checks that err is a *MisconfigError whose text holds hint
// and none of the secrets.
func wantMisconfig(t *testing.T, err error, hint string, secrets ...string) {
	t.Helper()
	var me *secure.MisconfigError
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T), want a *secure.MisconfigError", err, err)
	}
	if !strings.Contains(err.Error(), hint) {
		t.Errorf("error %q does not say %q", err, hint)
	}
	checkNoSecret(t, "the error", err.Error(), secrets...)
}

const (
	userPass  = "Tr0ub4dor-and-3-horses"
	wrongPass = "correct-horse-battery-staple"
)

// TestRedisTLSAndACL: a TLS-only redis-server that requires client
// certificates and has the default user off; rankd's client, as the config
// builds it (ACL user, password from the environment, CA, client
// certificate), works; each wrong setting fails at once with an error
// naming the setting, never the password.
func TestRedisTLSAndACL(t *testing.T) {
	clearSecretEnv(t)
	pki := testenv.NewPKI(t)
	srv := testenv.NewTLSRedis(t, testenv.TLSRedisOptions{PKI: pki, ClientAuth: true,
		Users: []string{"default off", "rankd on >" + userPass + " ~rankd* &* +@all -@dangerous"}})
	dir := t.TempDir()
	addr := "  addr: " + srv.Addr() + "\n"
	good := addr + "  username: rankd\n" + tlsSection(pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile)

	t.Run("ok", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		cfg := loadConfig(t, dir, "", good)
		if err := probe(t, cfg.Redis); err != nil {
			t.Fatal(err)
		}
		rdb := newClient(cfg.Redis)
		defer rdb.Close()
		ctx := t.Context()
		who, err := rdb.Do(ctx, "ACL", "WHOAMI").Text()
		if err != nil || who != "rankd" {
			t.Fatalf("ACL WHOAMI = %q, %v; want rankd", who, err)
		}
		if err := rdb.Set(ctx, "rankd:probe", "v1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := rdb.Get(ctx, "rankd:probe").Result(); err != nil || v != "v1" {
			t.Fatalf("GET = %q, %v", v, err)
		}
		// The ACL holds: a key outside ~rankd* is refused.
		if err := rdb.Set(ctx, "other", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Fatalf("SET other: %v, want NOPERM", err)
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, wrongPass)
		cfg := loadConfig(t, dir, "", good)
		wantMisconfig(t, probe(t, cfg.Redis), "authentication failed (check redis.username and RANKD_REDIS_PASSWORD", wrongPass, userPass)
	})

	t.Run("untrusted CA", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		cfg := loadConfig(t, dir, "", addr+"  username: rankd\n"+tlsSection(pki.OtherCAFile, pki.ClientCertFile, pki.ClientKeyFile))
		wantMisconfig(t, probe(t, cfg.Redis), "the server's certificate is not trusted (check redis.tls.ca_file)", userPass)
	})

	t.Run("wrong server name", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		cfg := loadConfig(t, dir, "", good+"    server_name: redis.example.com\n")
		wantMisconfig(t, probe(t, cfg.Redis), "not for this name (check redis.tls.server_name", userPass)
	})

	t.Run("no client certificate", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		cfg := loadConfig(t, dir, "", addr+"  username: rankd\n"+tlsSection(pki.CAFile, "", ""))
		wantMisconfig(t, probe(t, cfg.Redis), "refused the TLS handshake", userPass)
	})

	t.Run("client certificate of another CA", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		cfg := loadConfig(t, dir, "", addr+"  username: rankd\n"+tlsSection(pki.CAFile, pki.OtherClientCertFile, pki.OtherClientKeyFile))
		wantMisconfig(t, probe(t, cfg.Redis), "refused the TLS handshake", userPass)
	})

	t.Run("plain TCP to a TLS server", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		cfg := loadConfig(t, dir, "", addr+"  username: rankd\n")
		wantMisconfig(t, probe(t, cfg.Redis), "does it require TLS (redis.tls)?", userPass)
	})

	t.Run("TLS to a plain server", func(t *testing.T) {
		plain := testenv.Redis(t)
		cfg := loadConfig(t, dir, "", "  addr: "+plain.Addr()+"\n"+tlsSection(pki.CAFile, "", ""))
		wantMisconfig(t, probe(t, cfg.Redis), "does not answer a TLS handshake within 5s: does it speak TLS (redis.tls)?")
	})

	// go-redis ignores "AUTH called without any password configured":
	// a password for a server without one works (the server is open).
	t.Run("password for a server without one", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		plain := testenv.Redis(t)
		cfg := loadConfig(t, dir, "", "  addr: "+plain.Addr()+"\n")
		if err := probe(t, cfg.Redis); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("server down is not a misconfiguration", func(t *testing.T) {
		t.Setenv(config.EnvRedisPassword, userPass)
		cfg := loadConfig(t, dir, "", "  addr: 127.0.0.1:1\n  username: rankd\n"+tlsSection(pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile))
		err := probe(t, cfg.Redis)
		var me *secure.MisconfigError
		if err == nil || errors.As(err, &me) {
			t.Fatalf("error %v: want an outage error, not nil or a misconfiguration", err)
		}
	})
}

// TestRedisPasswordFileRotation: with redis.password_file the password is
// read again for every new connection: after the password changes on the
// server and in the file, new connections log in without a restart.
func TestRedisPasswordFileRotation(t *testing.T) {
	clearSecretEnv(t)
	pki := testenv.NewPKI(t)
	srv := testenv.NewTLSRedis(t, testenv.TLSRedisOptions{PKI: pki,
		Users: []string{"default off", "rankd on >" + userPass + " ~* &* +@all"}})
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "redis-password")
	if err := os.WriteFile(pwFile, []byte(userPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, dir, "", "  addr: "+srv.Addr()+"\n  username: rankd\n  password_file: redis-password\n"+tlsSection(pki.CAFile, "", ""))
	if cfg.Redis.Password.Value() != userPass || cfg.Redis.PasswordFile != pwFile {
		t.Fatalf("password file not read as expected (file %q)", cfg.Redis.PasswordFile)
	}
	rdb := newClient(cfg.Redis)
	defer rdb.Close()
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	admin := srv.AdminClient(t)
	const newPass = "rotated-0f-the-month"
	if err := admin.Do(ctx, "ACL", "SETUSER", "rankd", "resetpass", ">"+newPass).Err(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwFile, []byte(newPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	killed, err := admin.Do(ctx, "CLIENT", "KILL", "USER", "rankd").Int()
	if err != nil || killed < 1 {
		t.Fatalf("CLIENT KILL USER rankd: %d, %v", killed, err)
	}
	// The pool's connection is dead: the first command may fail on it
	// (MaxRetries -1); the next dials and logs in with the new password.
	_ = rdb.Ping(ctx).Err()
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "1" {
		t.Fatalf("after rotation: GET = %q, %v", v, err)
	}
	// And a client still holding the old password is refused.
	old := cfg.Redis
	old.PasswordFile, old.Password = "", config.Secret(userPass)
	wantMisconfig(t, probe(t, old), "authentication failed", userPass, newPass)
}

// TestRedisTLSCluster: a Redis Cluster of TLS-only masters (cluster bus
// over TLS) with the default user off; the cluster client of the config
// (addrs, ACL user, TLS) reaches every node, and a wrong password fails at
// once.
func TestRedisTLSCluster(t *testing.T) {
	clearSecretEnv(t)
	pki := testenv.NewPKI(t)
	cl := testenv.NewTLSCluster(t, testenv.TLSRedisOptions{PKI: pki, ClientAuth: true,
		Users: []string{"default off", "rankd on >" + userPass + " ~rankd* &* +@all -@dangerous"}})
	dir := t.TempDir()
	redisSection := "  addrs: [" + strings.Join(cl.Addrs(), ", ") + "]\n  username: rankd\n" + tlsSection(pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile)

	t.Setenv(config.EnvRedisPassword, userPass)
	cfg := loadConfig(t, dir, "", redisSection)
	if !cfg.Redis.Cluster() {
		t.Fatal("not a cluster config")
	}
	if err := probe(t, cfg.Redis); err != nil {
		t.Fatal(err)
	}
	rdb := newClient(cfg.Redis)
	defer rdb.Close()
	ctx := t.Context()
	const n = 64 // keys spread over the three nodes' slots
	for i := range n {
		if err := rdb.Set(ctx, fmt.Sprintf("rankd:k%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET rankd:k%d: %v", i, err)
		}
	}
	for i := range n {
		if v, err := rdb.Get(ctx, fmt.Sprintf("rankd:k%d", i)).Int(); err != nil || v != i {
			t.Fatalf("GET rankd:k%d = %d, %v", i, v, err)
		}
	}
	// Every master got some keys and sees us as rankd (ForEachMaster
	// runs the function concurrently).
	cc := rdb.(*redis.ClusterClient)
	var masters atomic.Int32
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := c.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		who, err := c.Do(ctx, "ACL", "WHOAMI").Text()
		if err != nil {
			return err
		}
		if keys == 0 || who != "rankd" {
			return fmt.Errorf("node %s: %d keys, user %q", c.Options().Addr, keys, who)
		}
		masters.Add(1)
		return nil
	})
	if err != nil || masters.Load() != 3 {
		t.Fatalf("masters: %d, %v", masters.Load(), err)
	}

	t.Setenv(config.EnvRedisPassword, wrongPass)
	bad := loadConfig(t, dir, "", redisSection)
	wantMisconfig(t, probe(t, bad.Redis), "authentication failed", wrongPass, userPass)
}
