package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
)

// secureBase is a valid config; the tests add sections after it.
const secureBase = `kafka:
  brokers: [k:9092]
redis:
  addr: r:6379
boards:
  - {name: total_coins, window: total}
routes:
  - {topic: gift, member: anchor_id, score: coins, boards: [total_coins]}
`

// clearSecureEnv empties every environment variable the loader reads.
func clearSecureEnv(t *testing.T) {
	for _, k := range EnvNames() {
		t.Setenv(k, "")
	}
}

// loadIn writes src as rankd.yaml in dir and loads it.
func loadIn(t *testing.T, dir, src string) (*Config, error) {
	t.Helper()
	path := filepath.Join(dir, "rankd.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

// errorLines returns the errors of err, one string each, without the file
// name.
func errorLines(err error) []string {
	var out []string
	for _, e := range unjoin(err) {
		_, rest, _ := strings.Cut(e.Error(), ":")
		out = append(out, rest)
	}
	return out
}

const literal = "hunter2-is-not-a-good-password"

// TestInlineSecretsRefused: a password or token written in the file is
// refused with its line and column and the alternatives; the error never
// shows it.
func TestInlineSecretsRefused(t *testing.T) {
	clearSecureEnv(t)
	src := `kafka:
  brokers: [k:9092]
  sasl:
    mechanism: PLAIN
    username: rankd
    password: ` + literal + `
redis:
  addr: r:6379
  password: "` + literal + `"
http:
  token: ` + literal + `
boards:
  - {name: total_coins, window: total}
routes:
  - {topic: gift, member: anchor_id, score: coins, boards: [total_coins]}
`
	_, err := loadIn(t, t.TempDir(), src)
	if err == nil {
		t.Fatal("inline secrets accepted")
	}
	if strings.Contains(err.Error(), literal) {
		t.Fatalf("the error shows the secret:\n%v", err)
	}
	want := []string{
		"6:15: kafka.sasl.password: a secret in the config file is refused: set RANKD_KAFKA_SASL_PASSWORD in the environment, or kafka.sasl.password_file to a file holding it",
		"9:13: redis.password: a secret in the config file is refused: set RANKD_REDIS_PASSWORD in the environment, or redis.password_file to a file holding it",
		"11:10: http.token: a secret in the config file is refused: set RANKD_HTTP_TOKEN in the environment, or http.token_file to a file holding it",
	}
	if got := errorLines(err); !slices.Equal(got, want) {
		t.Errorf("errors\n got %q\nwant %q", got, want)
	}

	// An empty value holds no secret: accepted.
	if _, err := loadIn(t, t.TempDir(), strings.Replace(secureBase, "  addr: r:6379\n", "  addr: r:6379\n  password: \"\"\n", 1)); err != nil {
		t.Fatalf("empty password refused: %v", err)
	}
}

// TestSecretSources: secrets come from the environment or from files
// (relative to the config file; trailing line break dropped); the
// environment wins over a file; a file that cannot be read or is empty is
// an error at its key.
func TestSecretSources(t *testing.T) {
	clearSecureEnv(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("redis-pw", "r-secret\n")
	write("kafka-pw", "k-secret\r\n")
	write("token", "0123456789abcdef0123\n")
	write("empty", "\n")
	src := strings.Replace(secureBase, "  brokers: [k:9092]\n", "  brokers: [k:9092]\n  sasl: {mechanism: scram-sha-256, username: rankd, password_file: kafka-pw}\n", 1)
	src = strings.Replace(src, "  addr: r:6379\n", "  addr: r:6379\n  username: app\n  password_file: redis-pw\n", 1)
	src += "http:\n  token_file: token\n"
	c, err := loadIn(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.Password.Value() != "r-secret" || c.Redis.PasswordFile != filepath.Join(dir, "redis-pw") || c.Redis.Username != "app" {
		t.Errorf("redis: user %q password file %q", c.Redis.Username, c.Redis.PasswordFile)
	}
	if c.Kafka.SASL.Password.Value() != "k-secret" || c.Kafka.SASL.Mechanism != SASLScramSHA256 {
		t.Errorf("kafka sasl: mechanism %q", c.Kafka.SASL.Mechanism)
	}
	if c.HTTP.Token.Value() != "0123456789abcdef0123" {
		t.Errorf("http token not read from its file")
	}
	if u, p, err := c.Redis.Credentials(); u != "app" || p != "r-secret" || err != nil {
		t.Errorf("redis credentials: %q, %v", u, err)
	}

	// The environment wins, and the file is then not used.
	t.Setenv(EnvRedisPassword, "env-r")
	t.Setenv(EnvKafkaSASLPassword, "env-k")
	t.Setenv(EnvHTTPToken, "env-token-0123456789")
	t.Setenv(EnvRedisUsername, "env-user")
	t.Setenv(EnvKafkaSASLUsername, "env-kuser")
	c, err = loadIn(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.Password.Value() != "env-r" || c.Redis.PasswordFile != "" || c.Redis.Username != "env-user" ||
		c.Kafka.SASL.Password.Value() != "env-k" || c.Kafka.SASL.PasswordFile != "" || c.Kafka.SASL.Username != "env-kuser" ||
		c.HTTP.Token.Value() != "env-token-0123456789" || c.HTTP.TokenFile != "" {
		t.Errorf("environment did not win: %+v %+v %+v", c.Redis, c.Kafka.SASL, c.HTTP)
	}
	summary := strings.Join(c.SecuritySummary(), "\n")
	for _, want := range []string{"password: RANKD_REDIS_PASSWORD", "user env-kuser, password: RANKD_KAFKA_SASL_PASSWORD", "http token: RANKD_HTTP_TOKEN"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	clearSecureEnv(t)

	// Bad files: missing, empty.
	bad := strings.ReplaceAll(src, "password_file: redis-pw", "password_file: missing")
	bad = strings.ReplaceAll(bad, "password_file: kafka-pw", "password_file: empty")
	_, err = loadIn(t, dir, bad)
	want := []string{
		fmt.Sprintf("3:68: kafka.sasl.password_file: %s is empty", filepath.Join(dir, "empty")),
		fmt.Sprintf("7:18: redis.password_file: open %s: no such file or directory", filepath.Join(dir, "missing")),
	}
	if got := errorLines(err); !slices.Equal(got, want) {
		t.Errorf("errors\n got %q\nwant %q", got, want)
	}
}

// TestSecurityValidation: every inconsistent security setting is an error
// at its key.
func TestSecurityValidation(t *testing.T) {
	clearSecureEnv(t)
	pki := testenv.NewPKI(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, kafka, redis, http string
		env                      map[string]string
		want                     string
	}{
		{name: "username without password", redis: "  username: app\n",
			want: `redis.username: user "app" has no password: set RANKD_REDIS_PASSWORD or redis.password_file`},
		{name: "unknown mechanism", kafka: "  sasl: {mechanism: GSSAPI, username: u}\n", env: map[string]string{EnvKafkaSASLPassword: "p"},
			want: `kafka.sasl.mechanism: unknown mechanism "GSSAPI" (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)`},
		{name: "mechanism without username", kafka: "  sasl: {mechanism: PLAIN}\n", env: map[string]string{EnvKafkaSASLPassword: "p"},
			want: `kafka.sasl.username: SASL PLAIN needs a username (kafka.sasl.username or RANKD_KAFKA_SASL_USERNAME)`},
		{name: "username without mechanism", kafka: "  sasl: {username: u}\n",
			want: `kafka.sasl.username: set without kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)`},
		{name: "password env without mechanism", env: map[string]string{EnvKafkaSASLPassword: "p"},
			want: `kafka.sasl: RANKD_KAFKA_SASL_PASSWORD is set but kafka.sasl.mechanism is not`},
		{name: "tls keys without enabled", redis: "  tls: {ca_file: " + pki.CAFile + "}\n",
			want: `redis.tls.ca_file: set but redis.tls.enabled is not true`},
		{name: "cert without key", kafka: "  tls: {enabled: true, cert_file: " + pki.ClientCertFile + "}\n",
			want: `kafka.tls.cert_file: cert_file and key_file go together (the client certificate and its key)`},
		{name: "insecure with a CA", kafka: "  tls: {enabled: true, ca_file: " + pki.CAFile + ", insecure_skip_verify: true}\n",
			want: `kafka.tls.insecure_skip_verify: with ca_file, which it would ignore: choose one (ca_file)`},
		{name: "CA file not PEM", redis: "  tls: {enabled: true, ca_file: " + notPEM + "}\n",
			want: `redis.tls.ca_file: ca_file ` + notPEM + `: no PEM certificate in it`},
		{name: "CA file missing", redis: "  tls: {enabled: true, ca_file: /nonexistent/ca.pem}\n",
			want: `redis.tls.ca_file: ca_file: open /nonexistent/ca.pem: no such file or directory`},
		{name: "key of another certificate", redis: "  tls: {enabled: true, cert_file: " + pki.ClientCertFile + ", key_file: " + pki.ServerKeyFile + "}\n",
			want: `redis.tls.cert_file: cert_file ` + pki.ClientCertFile + `, key_file ` + pki.ServerKeyFile + `: tls: private key does not match public key`},
		{name: "short token", env: map[string]string{EnvHTTPToken: "short"},
			want: `http: the token is 5 characters long: want at least 16 (e.g. openssl rand -hex 32)`},
		{name: "metrics on the API address", http: "  listen: :8080\n  metrics_listen: :8080\n",
			want: `http.metrics_listen: the same address as http.listen (:8080): leave it empty to serve /metrics there`},
		{name: "zero timeout", http: "  write_timeout: 0s\n", want: `http.write_timeout: must be positive, got 0s`},
		{name: "tiny header cap", http: "  max_header_bytes: 100\n", want: `http.max_header_bytes: must be at least 1024, got 100`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			src := strings.Replace(secureBase, "  brokers: [k:9092]\n", "  brokers: [k:9092]\n"+tt.kafka, 1)
			src = strings.Replace(src, "  addr: r:6379\n", "  addr: r:6379\n"+tt.redis, 1)
			if tt.http != "" {
				src += "http:\n" + tt.http
			}
			_, err := loadIn(t, t.TempDir(), src)
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			var msgs []string
			for _, e := range unjoin(err) {
				ce := e.(*Error)
				msgs = append(msgs, ce.Field+": "+ce.Msg)
			}
			if !slices.Equal(msgs, []string{tt.want}) {
				t.Fatalf("errors\n got %q\nwant %q", msgs, tt.want)
			}
		})
	}
}

// TestTLSConfig: an enabled tls section gives a client config with the CA,
// the client certificate and the server name; a disabled one, nil.
func TestTLSConfig(t *testing.T) {
	clearSecureEnv(t)
	pki := testenv.NewPKI(t)
	src := strings.Replace(secureBase, "  addr: r:6379\n", "  addr: r:6379\n  tls:\n    enabled: true\n    ca_file: "+pki.CAFile+
		"\n    cert_file: "+pki.ClientCertFile+"\n    key_file: "+pki.ClientKeyFile+"\n    server_name: redis.internal\n", 1)
	c, err := loadIn(t, t.TempDir(), src)
	if err != nil {
		t.Fatal(err)
	}
	tc := c.Redis.TLS.ClientConfig()
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis.internal" || tc.InsecureSkipVerify || tc.MinVersion == 0 {
		t.Fatalf("redis TLS config %+v", tc)
	}
	if !tc.RootCAs.Equal(pki.CAs) {
		t.Error("RootCAs is not the CA file's pool")
	}
	// A clone: changing it does not change the next.
	tc.ServerName = "changed"
	if c.Redis.TLS.ClientConfig().ServerName != "redis.internal" {
		t.Error("ClientConfig shares its config")
	}
	if c.Kafka.TLS.ClientConfig() != nil {
		t.Error("kafka TLS config without kafka.tls")
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("warnings %q", c.Warnings())
	}

	// Warnings: certificates not checked; PLAIN in clear.
	t.Setenv(EnvKafkaSASLPassword, "p")
	src = strings.Replace(secureBase, "  brokers: [k:9092]\n", "  brokers: [k:9092]\n  sasl: {mechanism: PLAIN, username: u}\n", 1)
	src = strings.Replace(src, "  addr: r:6379\n", "  addr: r:6379\n  tls: {enabled: true, insecure_skip_verify: true}\n", 1)
	c, err = loadIn(t, t.TempDir(), src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"warning: redis.tls.insecure_skip_verify: the Redis server's certificate is not checked",
		"warning: kafka.sasl.mechanism PLAIN without kafka.tls: the password crosses the network in clear",
	}
	if !slices.Equal(c.Warnings(), want) {
		t.Errorf("warnings\n got %q\nwant %q", c.Warnings(), want)
	}
}

// TestHTTPDefaults: the http section's limits default to safe values.
func TestHTTPDefaults(t *testing.T) {
	clearSecureEnv(t)
	c, err := LoadBytes("t.yaml", []byte(secureBase))
	if err != nil {
		t.Fatal(err)
	}
	h := c.HTTP
	if h.ReadHeaderTimeout != 10*time.Second || h.ReadTimeout != 30*time.Second || h.WriteTimeout != 30*time.Second ||
		h.IdleTimeout != 2*time.Minute || h.MaxHeaderBytes != 16<<10 || h.Token != "" || h.MetricsListen != "" {
		t.Fatalf("http defaults %+v", h)
	}
	t.Setenv(EnvHTTPMetricsListen, "127.0.0.1:9100")
	if c, err = LoadBytes("t.yaml", []byte(secureBase)); err != nil || c.HTTP.MetricsListen != "127.0.0.1:9100" {
		t.Fatalf("RANKD_HTTP_METRICS_LISTEN: %v, %q", err, c.HTTP.MetricsListen)
	}
}

// TestSecretNeverPrinted: a Config holding secrets printed every usual way
// (fmt verbs, JSON, slog text and JSON) never shows them.
func TestSecretNeverPrinted(t *testing.T) {
	clearSecureEnv(t)
	secrets := []string{"redis-S3CRET-value", "kafka-S3CRET-value", "http-S3CRET-token-value"}
	t.Setenv(EnvRedisPassword, secrets[0])
	t.Setenv(EnvKafkaSASLPassword, secrets[1])
	t.Setenv(EnvHTTPToken, secrets[2])
	src := strings.Replace(secureBase, "  brokers: [k:9092]\n", "  brokers: [k:9092]\n  sasl: {mechanism: SCRAM-SHA-512, username: u}\n", 1)
	c, err := LoadBytes("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		fmt.Fprintf(&out, verb+"\n", *c)
		fmt.Fprintf(&out, verb+"\n", c.Redis)
		fmt.Fprintf(&out, verb+"\n", c.Kafka.SASL)
		fmt.Fprintf(&out, verb+"\n", c.HTTP)
		fmt.Fprintf(&out, verb+"\n", c.Redis.Password)
	}
	for _, v := range []any{c.Redis, c.Kafka, c.HTTP} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	for _, h := range []slog.Handler{slog.NewTextHandler(&out, nil), slog.NewJSONHandler(&out, nil)} {
		slog.New(h).Info("config", "redis", c.Redis, "sasl", c.Kafka.SASL, "http", c.HTTP, "password", c.Redis.Password)
	}
	out.WriteString(strings.Join(c.SecuritySummary(), "\n"))
	for _, s := range secrets {
		if strings.Contains(out.String(), s) {
			t.Errorf("secret %q printed:\n%s", s, out.String())
		}
	}
	if !strings.Contains(out.String(), "[redacted]") {
		t.Errorf("no [redacted] in the output:\n%s", out.String())
	}
	if c.Redis.Password.Value() != secrets[0] {
		t.Error("Value does not return the secret")
	}
}

// TestSessionTimeoutWarning: a session timeout below Kafka's default
// group.min.session.timeout.ms (6 s) is accepted but warned about, since
// such a broker refuses the join.
func TestSessionTimeoutWarning(t *testing.T) {
	clearSecureEnv(t)
	for _, tt := range []struct {
		timeout string
		want    []string
	}{
		{"", nil}, // the default, 10s
		{"6s", nil},
		{"5999ms", []string{"warning: kafka.session_timeout 5.999s is below 6s, Kafka's default group.min.session.timeout.ms: " +
			"such a broker refuses the join (INVALID_SESSION_TIMEOUT) and rankd never consumes; lower the broker's minimum or raise the timeout"}},
		{"1s", []string{"warning: kafka.session_timeout 1s is below 6s, Kafka's default group.min.session.timeout.ms: " +
			"such a broker refuses the join (INVALID_SESSION_TIMEOUT) and rankd never consumes; lower the broker's minimum or raise the timeout"}},
	} {
		src := secureBase
		if tt.timeout != "" {
			src = strings.Replace(src, "  brokers: [k:9092]\n", "  brokers: [k:9092]\n  session_timeout: "+tt.timeout+"\n  heartbeat_interval: 100ms\n", 1)
		}
		c, err := LoadBytes("t.yaml", []byte(src))
		if err != nil {
			t.Fatalf("session_timeout %q: %v", tt.timeout, err)
		}
		if got := c.Warnings(); !slices.Equal(got, tt.want) {
			t.Errorf("session_timeout %q: warnings\n got %q\nwant %q", tt.timeout, got, tt.want)
		}
	}
}
