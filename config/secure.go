package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Secret is a password or token. Its String, GoString, MarshalText,
// MarshalJSON and LogValue hide it, so that printing a Config (%v, %+v,
// slog, JSON) never shows it; Value returns it.
type Secret string

const redacted = "[redacted]"

// Value returns the secret itself.
func (s Secret) Value() string { return string(s) }

// String returns "[redacted]", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString is String (for %#v).
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// MarshalText hides the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON hides the secret.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", s.String())), nil }

// LogValue hides the secret from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// TLS configures TLS on the connections to Redis (redis.tls) or to the
// Kafka brokers (kafka.tls).
type TLS struct {
	Enabled bool
	// CAFile is a PEM bundle of the CAs that sign the servers'
	// certificates; empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key (PEM),
	// for servers that require one (mutual TLS); both or neither.
	CertFile string
	KeyFile  string
	// ServerName is the name the server's certificate must carry; empty:
	// the host dialed.
	ServerName string
	// InsecureSkipVerify accepts any server certificate: the connection is
	// encrypted but not authenticated (anyone in the path can read it).
	// Discouraged; rankd warns at startup.
	InsecureSkipVerify bool

	config *tls.Config // built by the loader when Enabled
}

// ClientConfig returns a new tls.Config of t (files read at load time), or
// nil when TLS is not enabled.
func (t TLS) ClientConfig() *tls.Config {
	if t.config == nil {
		return nil
	}
	return t.config.Clone()
}

// buildTLS reads t's files and returns its client config.
func buildTLS(t TLS) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // documented, warned about
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", t.CAFile)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file %s, key_file %s: %w", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// SASL configures SASL authentication with the Kafka brokers (kafka.sasl).
type SASL struct {
	// Mechanism is "" (no SASL), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string
	Username  string // RANKD_KAFKA_SASL_USERNAME overrides
	// Password comes from RANKD_KAFKA_SASL_PASSWORD or, without it, from
	// PasswordFile (read at load time, and again for every new connection,
	// so that a rotated file is picked up).
	Password     Secret
	PasswordFile string
}

// SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Credentials returns the username and the current password: read from
// PasswordFile when the password comes from a file, else Password.
func (s SASL) Credentials() (user, pass string, err error) {
	if s.PasswordFile != "" {
		p, err := ReadSecretFile(s.PasswordFile)
		return s.Username, p, err
	}
	return s.Username, s.Password.Value(), nil
}

// Credentials returns the ACL username and the current password: read
// from PasswordFile when the password comes from a file, else Password.
func (r Redis) Credentials() (user, pass string, err error) {
	if r.PasswordFile != "" {
		p, err := ReadSecretFile(r.PasswordFile)
		return r.Username, p, err
	}
	return r.Username, r.Password.Value(), nil
}

// maxSecretFile bounds the size of a secret file.
const maxSecretFile = 64 << 10

// ReadSecretFile reads a password or token from path: the whole file
// without its trailing line break(s). An empty secret is an error. The
// error never contains the file's content.
func ReadSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s: larger than %d bytes: not a secret file", path, maxSecretFile)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// SecretSource says where a secret comes from, for `rankd config check`:
// "none", the environment variable, or "file PATH". Never the secret.
func SecretSource(s Secret, file, env string) string {
	switch {
	case file != "":
		return "file " + file
	case s != "":
		return env
	}
	return "none"
}

// MinTokenLen is the shortest accepted http.token.
const MinTokenLen = 16

// defaultHTTP returns the defaults of the http section.
func defaultHTTP() HTTP {
	return HTTP{
		Listen:            ":8080",
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		MaxConns:          DefaultMaxConns,
	}
}

// httpFields are the keys of the http section.
func (l *loader) httpFields(h *HTTP) map[string]field {
	return map[string]field{
		"listen":              l.str(&h.Listen),
		"metrics_listen":      l.str(&h.MetricsListen),
		"token":               l.inlineSecret(EnvHTTPToken, "http.token_file"),
		"token_file":          l.str(&h.TokenFile),
		"read_header_timeout": l.duration(&h.ReadHeaderTimeout),
		"read_timeout":        l.duration(&h.ReadTimeout),
		"write_timeout":       l.duration(&h.WriteTimeout),
		"idle_timeout":        l.duration(&h.IdleTimeout),
		"max_header_bytes":    l.integer(&h.MaxHeaderBytes),
		"max_conns":           l.integer(&h.MaxConns),
	}
}

// tlsSection decodes a tls mapping.
func (l *loader) tlsSection(t *TLS) field {
	return func(n *yaml.Node, p string) {
		l.mapping(n, p, map[string]field{
			"enabled":              l.boolean(&t.Enabled),
			"ca_file":              l.str(&t.CAFile),
			"cert_file":            l.str(&t.CertFile),
			"key_file":             l.str(&t.KeyFile),
			"server_name":          l.str(&t.ServerName),
			"insecure_skip_verify": l.boolean(&t.InsecureSkipVerify),
		})
	}
}

// sentinelSection decodes redis.sentinel.
func (l *loader) sentinelSection(s *Sentinel) field {
	return func(n *yaml.Node, p string) {
		s.declared = true
		l.mapping(n, p, map[string]field{
			"master_name":   l.str(&s.MasterName),
			"addrs":         l.strs(&s.Addrs),
			"username":      l.str(&s.Username),
			"password":      l.inlineSecret(EnvRedisSentinelPassword, "redis.sentinel.password_file"),
			"password_file": l.str(&s.PasswordFile),
		})
	}
}

// saslSection decodes kafka.sasl.
func (l *loader) saslSection(s *SASL) field {
	return func(n *yaml.Node, p string) {
		l.mapping(n, p, map[string]field{
			"mechanism":     l.str(&s.Mechanism),
			"username":      l.str(&s.Username),
			"password":      l.inlineSecret(EnvKafkaSASLPassword, "kafka.sasl.password_file"),
			"password_file": l.str(&s.PasswordFile),
		})
	}
}

// inlineSecret refuses a secret written in the config file (files get
// copied, committed, pasted into tickets and printed): the error names the
// line and the alternatives, never the value. An empty value is accepted.
func (l *loader) inlineSecret(env, fileKey string) field {
	return func(n *yaml.Node, p string) {
		if n.Kind == yaml.ScalarNode && scalarText(n) == "" {
			return
		}
		l.errorAt(n, p, "a secret in the config file is refused: set %s in the environment, or %s to a file holding it", env, fileKey)
	}
}

// applySecureEnv applies the environment variables of the security
// settings (RANKD_REDIS_PASSWORD is applied by applyEnv).
func (l *loader) applySecureEnv(c *Config, lookup func(string) (string, bool)) {
	set := func(dst *string, env string) {
		if v, ok := lookup(env); ok && v != "" {
			*dst = v
		}
	}
	set(&c.Redis.Username, EnvRedisUsername)
	set(&c.Redis.Sentinel.Username, EnvRedisSentinelUsername)
	set(&c.Kafka.SASL.Username, EnvKafkaSASLUsername)
	set(&c.HTTP.MetricsListen, EnvHTTPMetricsListen)
	if v, ok := lookup(EnvKafkaSASLPassword); ok && v != "" {
		c.Kafka.SASL.Password = Secret(v)
	}
	if v, ok := lookup(EnvHTTPToken); ok && v != "" {
		c.HTTP.Token = Secret(v)
	}
	if v, ok := lookup(EnvRedisSentinelPassword); ok && v != "" {
		c.Redis.Sentinel.Password = Secret(v)
	}
}

// resolvePath makes a relative path relative to the config file's
// directory.
func (l *loader) resolvePath(p *string) {
	if *p != "" && !filepath.IsAbs(*p) {
		*p = filepath.Join(filepath.Dir(l.file), *p)
	}
}

// validateSecure checks the security settings, reads the secret files
// (an environment variable wins over a file) and builds the TLS configs.
func (l *loader) validateSecure(c *Config) {
	r, k, h := &c.Redis, &c.Kafka, &c.HTTP
	for _, p := range []*string{&r.PasswordFile, &r.Sentinel.PasswordFile, &r.TLS.CAFile, &r.TLS.CertFile, &r.TLS.KeyFile,
		&k.SASL.PasswordFile, &k.TLS.CAFile, &k.TLS.CertFile, &k.TLS.KeyFile, &h.TokenFile} {
		l.resolvePath(p)
	}

	// A password refused (inline) or unreadable is reported once.
	before := len(l.errs)
	r.Password = l.secret(r.Password, &r.PasswordFile, "redis.password_file")
	if r.Username != "" && r.Password == "" && len(l.errs) == before && !l.has("redis.password") {
		l.errorf("redis.username", "user %q has no password: set %s or redis.password_file", r.Username, EnvRedisPassword)
	}
	l.validateSentinelSecret(&r.Sentinel)
	l.validateTLS(&r.TLS, "redis.tls")

	s := &k.SASL
	before = len(l.errs)
	s.Password = l.secret(s.Password, &s.PasswordFile, "kafka.sasl.password_file")
	saslReported := len(l.errs) != before || l.has("kafka.sasl.password")
	switch m := strings.ToUpper(s.Mechanism); m {
	case "":
		for _, f := range []struct{ key, val string }{{"username", s.Username}, {"password_file", s.PasswordFile}} {
			if f.val != "" {
				l.errorf("kafka.sasl."+f.key, "set without kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
			}
		}
		if s.Password != "" && s.PasswordFile == "" {
			l.errorf("kafka.sasl", "%s is set but kafka.sasl.mechanism is not", EnvKafkaSASLPassword)
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		s.Mechanism = m
		if s.Username == "" {
			l.errorf("kafka.sasl.username", "SASL %s needs a username (kafka.sasl.username or %s)", m, EnvKafkaSASLUsername)
		}
		if s.Password == "" && !saslReported {
			l.errorf("kafka.sasl", "SASL %s needs a password: set %s or kafka.sasl.password_file", m, EnvKafkaSASLPassword)
		}
	default:
		l.errorf("kafka.sasl.mechanism", "unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.Mechanism)
	}
	l.validateTLS(&k.TLS, "kafka.tls")

	h.Token = l.secret(h.Token, &h.TokenFile, "http.token_file")
	if h.Token != "" && len(h.Token) < MinTokenLen {
		p := "http.token_file"
		if h.TokenFile == "" {
			p = "http"
		}
		l.errorf(p, "the token is %d characters long: want at least %d (e.g. openssl rand -hex 32)", len(h.Token), MinTokenLen)
	}
	if h.MetricsListen != "" && h.MetricsListen == h.Listen {
		l.errorf("http.metrics_listen", "the same address as http.listen (%s): leave it empty to serve /metrics there", h.Listen)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"read_header_timeout", h.ReadHeaderTimeout}, {"read_timeout", h.ReadTimeout},
		{"write_timeout", h.WriteTimeout}, {"idle_timeout", h.IdleTimeout}} {
		if d.v <= 0 {
			l.errorf("http."+d.key, "must be positive, got %v", d.v)
		}
	}
	if h.MaxHeaderBytes < 1024 {
		l.errorf("http.max_header_bytes", "must be at least 1024, got %d", h.MaxHeaderBytes)
	}
}

// validateSentinelSecret reads the sentinels' password and checks their
// credentials: a username needs a password, and credentials need a
// sentinel section.
func (l *loader) validateSentinelSecret(s *Sentinel) {
	before := len(l.errs)
	s.Password = l.secret(s.Password, &s.PasswordFile, "redis.sentinel.password_file")
	reported := len(l.errs) != before || l.has("redis.sentinel.password")
	if !s.Enabled() {
		if s.Password != "" {
			l.errorf("redis", "%s is set but redis.sentinel is not", EnvRedisSentinelPassword)
		}
		if s.Username != "" {
			l.errorf("redis", "%s is set but redis.sentinel is not", EnvRedisSentinelUsername)
		}
		return
	}
	if s.Username != "" && s.Password == "" && !reported {
		l.errorf("redis.sentinel.username", "user %q has no password: set %s or redis.sentinel.password_file", s.Username, EnvRedisSentinelPassword)
	}
}

// secret resolves a secret: the value from the environment (env) if set,
// which clears *file; else the content of *file if set; else "".
func (l *loader) secret(env Secret, file *string, fileKey string) Secret {
	if env != "" {
		*file = ""
		return env
	}
	if *file == "" {
		return ""
	}
	s, err := ReadSecretFile(*file)
	if err != nil {
		l.errorf(fileKey, "%v", err)
		return ""
	}
	return Secret(s)
}

// validateTLS checks a tls section and builds its client config.
func (l *loader) validateTLS(t *TLS, path string) {
	if !t.Enabled {
		for _, f := range []struct {
			key string
			set bool
		}{{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
			{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
			if f.set {
				l.errorf(path+"."+f.key, "set but %s.enabled is not true", path)
			}
		}
		return
	}
	bad := false
	if (t.CertFile == "") != (t.KeyFile == "") {
		l.errorf(path+".cert_file", "cert_file and key_file go together (the client certificate and its key)")
		bad = true
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		l.errorf(path+".insecure_skip_verify", "with ca_file, which it would ignore: choose one (ca_file)")
		bad = true
	}
	if bad {
		return
	}
	c, err := buildTLS(*t)
	if err != nil {
		key := "ca_file"
		if t.CertFile != "" && !strings.HasPrefix(err.Error(), "ca_file") {
			key = "cert_file"
		}
		l.errorf(path+"."+key, "%v", err)
		return
	}
	t.config = c
}

// KafkaMinSessionTimeout is Kafka's default group.min.session.timeout.ms:
// a broker left at its default refuses a JoinGroup with a shorter session
// timeout (INVALID_SESSION_TIMEOUT), so the group is never joined.
const KafkaMinSessionTimeout = 6 * time.Second

// Warnings returns the settings that work but weaken security or may not
// work with every broker, for the log at startup and `rankd config check`;
// each starts with "warning: ".
func (c *Config) Warnings() []string {
	var w []string
	if c.Kafka.SessionTimeout > 0 && c.Kafka.SessionTimeout < KafkaMinSessionTimeout {
		w = append(w, fmt.Sprintf("warning: kafka.session_timeout %v is below %v, Kafka's default group.min.session.timeout.ms: "+
			"such a broker refuses the join (INVALID_SESSION_TIMEOUT) and rankd never consumes; lower the broker's minimum or raise the timeout",
			c.Kafka.SessionTimeout, KafkaMinSessionTimeout))
	}
	if c.Redis.TLS.Enabled && c.Redis.TLS.InsecureSkipVerify {
		w = append(w, "warning: redis.tls.insecure_skip_verify: the Redis server's certificate is not checked")
	}
	if c.Kafka.TLS.Enabled && c.Kafka.TLS.InsecureSkipVerify {
		w = append(w, "warning: kafka.tls.insecure_skip_verify: the brokers' certificates are not checked")
	}
	if c.API.ConcurrentWrites != 0 {
		w = append(w, "warning: api.concurrent_writes has no effect since rankd serves HTTP with fasthttp, which writes each response "+
			"in its connection's goroutine (the API still yields to ingestion); remove the setting")
	}
	if c.Kafka.SASL.Mechanism == SASLPlain && !c.Kafka.TLS.Enabled {
		w = append(w, "warning: kafka.sasl.mechanism PLAIN without kafka.tls: the password crosses the network in clear")
	}
	return w
}

// describeTLS is the `config check` line of a tls section.
func describeTLS(t TLS) string {
	if !t.Enabled {
		return "tls off"
	}
	parts := []string{"tls on"}
	if t.CAFile != "" {
		parts = append(parts, "ca "+t.CAFile)
	} else {
		parts = append(parts, "system CAs")
	}
	if t.CertFile != "" {
		parts = append(parts, "client cert "+t.CertFile)
	}
	if t.ServerName != "" {
		parts = append(parts, "server name "+t.ServerName)
	}
	if t.InsecureSkipVerify {
		parts = append(parts, "NOT VERIFIED")
	}
	return strings.Join(parts, ", ")
}

// SecuritySummary returns the security settings as lines for `rankd
// config check`: where each secret comes from, never a secret.
func (c *Config) SecuritySummary() []string {
	r, k, h := c.Redis, c.Kafka, c.HTTP
	redis := "redis " + describeTLS(r.TLS)
	if r.Username != "" {
		redis += ", user " + r.Username
	}
	redis += ", password: " + SecretSource(r.Password, r.PasswordFile, EnvRedisPassword)
	if s := r.Sentinel; s.Enabled() {
		redis += "; sentinels"
		if s.Username != "" {
			redis += " user " + s.Username + ","
		}
		redis += " password: " + SecretSource(s.Password, s.PasswordFile, EnvRedisSentinelPassword)
	}
	kafka := "kafka " + describeTLS(k.TLS)
	if k.SASL.Mechanism != "" {
		kafka += fmt.Sprintf(", sasl %s user %s, password: %s", k.SASL.Mechanism, k.SASL.Username,
			SecretSource(k.SASL.Password, k.SASL.PasswordFile, EnvKafkaSASLPassword))
	} else {
		kafka += ", no sasl"
	}
	http := "http token: " + SecretSource(h.Token, h.TokenFile, EnvHTTPToken)
	if h.MetricsListen != "" {
		http += ", /metrics on " + h.MetricsListen
	}
	http += fmt.Sprintf(", timeouts read-header %s read %s write %s idle %s, max header %d bytes",
		h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, h.IdleTimeout, h.MaxHeaderBytes)
	return []string{redis, kafka, http}
}
