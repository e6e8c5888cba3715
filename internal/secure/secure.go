// Package secure turns the security settings of a config.Config into
// clients: go-redis options with an ACL user, a password and TLS; a
// kafka-go Dialer and Transport with TLS and SASL (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512); a bearer-token check for HTTP handlers. It also tells a
// misconfiguration (wrong password, untrusted certificate, TLS on one side
// only) from an outage, so that rankd can stop at start with a clear error
// instead of retrying forever.
//
// Secrets never appear in its errors: the errors of go-redis and kafka-go
// it wraps do not echo them (tested), and its own name the settings, not
// their values.
package secure

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/rankd/rankd/config"
)

// ApplyRedis sets the username, password and TLS of r on opts. A password
// from a file is read again for every new connection (a rotated file is
// picked up without a restart). With redis.sentinel it also sets the
// sentinels' username and password (read at load time: go-redis takes
// them as fixed strings); the TLS config applies to the sentinels and to
// the data nodes alike.
func ApplyRedis(r config.Redis, opts *redis.UniversalOptions) {
	opts.TLSConfig = r.TLS.ClientConfig()
	if r.Sentinel.Enabled() {
		opts.SentinelUsername, opts.SentinelPassword = r.Sentinel.Username, r.Sentinel.Password.Value()
	}
	if r.PasswordFile != "" {
		opts.CredentialsProviderContext = func(context.Context) (string, string, error) {
			user, pass, err := r.Credentials()
			if err != nil {
				return "", "", fmt.Errorf("redis.password_file: %w", err)
			}
			return user, pass, nil
		}
		return
	}
	opts.Username, opts.Password = r.Username, r.Password.Value()
}

// KafkaDialer returns the kafka-go Dialer of k's TLS and SASL settings, or
// nil when k uses neither (kafka-go's defaults: plain TCP).
func KafkaDialer(k config.Kafka) *kafka.Dialer {
	if !k.TLS.Enabled && k.SASL.Mechanism == "" {
		return nil
	}
	d := &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: k.TLS.ClientConfig()}
	if k.SASL.Mechanism != "" {
		d.SASLMechanism = Mechanism(k.SASL)
	}
	return d
}

// KafkaTransport returns a new kafka-go Transport with d's TLS and SASL
// (d may be nil). Each client should get its own: kafka-go's
// DefaultTransport caches metadata for everyone.
func KafkaTransport(d *kafka.Dialer) *kafka.Transport {
	if d == nil {
		return &kafka.Transport{}
	}
	return &kafka.Transport{TLS: d.TLS, SASL: d.SASLMechanism, ClientID: d.ClientID, DialTimeout: d.Timeout}
}

// Mechanism returns the SASL mechanism of s. The credentials are read
// when a connection authenticates: a password file is read again each
// time.
func Mechanism(s config.SASL) sasl.Mechanism {
	return mechanism{name: s.Mechanism, creds: s.Credentials}
}

type mechanism struct {
	name  string
	creds func() (user, pass string, err error)
}

func (m mechanism) Name() string { return m.name }

func (m mechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	user, pass, err := m.creds()
	if err != nil {
		return nil, nil, fmt.Errorf("kafka.sasl.password_file: %w", err)
	}
	var mech sasl.Mechanism
	switch m.name {
	case config.SASLPlain:
		mech = plain.Mechanism{Username: user, Password: pass}
	case config.SASLScramSHA256, config.SASLScramSHA512:
		algo := scram.SHA256
		if m.name == config.SASLScramSHA512 {
			algo = scram.SHA512
		}
		if mech, err = scram.Mechanism(algo, user, pass); err != nil {
			// The SASLprep error names the offending character class only.
			return nil, nil, fmt.Errorf("SASL %s: invalid username or password: %w", m.name, err)
		}
	default:
		return nil, nil, fmt.Errorf("unknown SASL mechanism %q", m.name)
	}
	return mech.Start(ctx)
}

// Bearer wraps h: a request must carry "Authorization: Bearer <token>"
// (the scheme in any case; the token compared in constant time), else it
// is answered 401 with a JSON error and WWW-Authenticate. An empty token
// returns h.
func Bearer(token config.Secret, h http.Handler) http.Handler {
	ok := TokenCheck(token)
	if ok == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rankd"`)
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"missing or invalid bearer token","code":"unauthorized"}`+"\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TokenCheck returns the check of an Authorization header's value: whether
// it is "Bearer <token>". An empty token returns nil: no check.
func TokenCheck(token config.Secret) func(authorization string) bool {
	if token == "" {
		return nil
	}
	want := sha256.Sum256([]byte(token.Value()))
	return func(auth string) bool {
		ok := len(auth) > len("Bearer ") && strings.EqualFold(auth[:len("Bearer ")], "Bearer ")
		got := ""
		if ok {
			got = strings.TrimSpace(auth[len("Bearer "):])
		}
		// Hashing first makes the comparison constant-time in the length
		// of the token too.
		sum := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1 && ok
	}
}

// NoBody wraps h: a request with a body (the API and /metrics read none)
// is answered 413 before h runs.
func NoBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = io.WriteString(w, `{"error":"request bodies are not accepted","code":"body_not_allowed"}`+"\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// MisconfigError is a failure that retrying will not fix: wrong
// credentials, an untrusted or unexpected certificate, TLS on one side
// only.
type MisconfigError struct {
	Service string // "redis" or "kafka"
	Hint    string // what to check, naming the settings
	Err     error
}

func (e *MisconfigError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Service, e.Hint, e.Err)
}

func (e *MisconfigError) Unwrap() error { return e.Err }

// Classify returns a *MisconfigError for err when it is a
// misconfiguration of service ("redis" or "kafka"), else nil (an outage or
// nothing known).
func Classify(service string, err error) *MisconfigError {
	if err == nil {
		return nil
	}
	me := func(hint string) *MisconfigError { return &MisconfigError{Service: service, Hint: hint, Err: err} }
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		alert     tls.AlertError
		op        *net.OpError
	)
	switch {
	case errors.As(err, &hostname):
		return me(fmt.Sprintf("the server's certificate is not for this name (check %s.tls.server_name or the address)", service))
	case errors.As(err, &unknownCA), errors.As(err, &invalid), errors.As(err, &verify):
		return me(fmt.Sprintf("the server's certificate is not trusted (check %s.tls.ca_file)", service))
	case errors.As(err, &record):
		return me(fmt.Sprintf("the server does not speak TLS (disable %s.tls or use its TLS port)", service))
	case errors.As(err, &alert), errors.As(err, &op) && op.Op == "remote error":
		return me(fmt.Sprintf("the server refused the TLS handshake: it may require a client certificate it trusts (check %s.tls.cert_file, key_file)", service))
	}
	if service == "redis" {
		// go-redis's failover client wraps the sentinels' answer.
		if msg := err.Error(); strings.HasPrefix(msg, "redis: all sentinels specified in configuration are unreachable: ") &&
			(strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH")) {
			return me(fmt.Sprintf("the sentinels refused authentication (check redis.sentinel.username and %s or redis.sentinel.password_file)", config.EnvRedisSentinelPassword))
		}
		for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
			if redis.HasErrorPrefix(err, p) {
				return me(fmt.Sprintf("authentication failed (check redis.username and %s or redis.password_file)", config.EnvRedisPassword))
			}
		}
		if redis.HasErrorPrefix(err, "ERR") && strings.Contains(err.Error(), "AUTH") {
			return me("the server refused AUTH: it has no password or no such user (check redis.username and the password settings)")
		}
		if strings.Contains(err.Error(), "redis.password_file") {
			return me("reading the password file")
		}
	}
	if service == "kafka" {
		switch {
		case errors.Is(err, kafka.SASLAuthenticationFailed):
			return me(fmt.Sprintf("SASL authentication failed (check kafka.sasl.username and %s or kafka.sasl.password_file)", config.EnvKafkaSASLPassword))
		case errors.Is(err, kafka.UnsupportedSASLMechanism):
			return me("the brokers do not enable this SASL mechanism (check kafka.sasl.mechanism)")
		case errors.Is(err, kafka.IllegalSASLState):
			return me("the brokers expect SASL at another time (check kafka.sasl)")
		case strings.Contains(err.Error(), "kafka.sasl.password_file"), strings.Contains(err.Error(), "invalid username or password"):
			return me("the SASL credentials")
		}
	}
	return nil
}

// closedEarly reports whether err means that the server closed the
// connection: what a TLS server does to a plain client and a SASL broker to
// a client that does not authenticate.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// closedHint is the hint of a connection the server keeps closing.
func closedHint(service string) string {
	if service == "kafka" {
		return "the broker closes the connection: does it require TLS (kafka.tls) or SASL (kafka.sasl)?"
	}
	return "the server closes the connection: does it require TLS (redis.tls)?"
}

// Probe runs check up to 3 times, 1s apart, while its error is a closed
// connection, and returns: nil when it succeeds; a *MisconfigError when it
// fails so (Classify), or keeps failing with a closed connection; else the
// last error (an outage: the caller goes on and its clients retry).
func Probe(ctx context.Context, service string, check func(ctx context.Context) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Second):
			}
		}
		err = check(ctx)
		if err == nil {
			return nil
		}
		var me *MisconfigError
		if errors.As(err, &me) {
			return me
		}
		if me := Classify(service, err); me != nil {
			return me
		}
		if !closedEarly(err) {
			return err
		}
	}
	return &MisconfigError{Service: service, Hint: closedHint(service), Err: err}
}

// CheckRedis checks that rankd can use Redis with cfg's settings: with
// TLS, a TLS handshake with each address (a plain server never answers
// one: it waits for a line), the sentinels' with redis.sentinel, then a
// PING of rdb (see Probe).
func CheckRedis(ctx context.Context, rdb redis.UniversalClient, cfg config.Redis) error {
	return Probe(ctx, "redis", func(ctx context.Context) error {
		if tc := cfg.TLS.ClientConfig(); tc != nil {
			addrs := cfg.Addrs
			switch {
			case cfg.Sentinel.Enabled():
				addrs = cfg.Sentinel.Addrs
			case !cfg.Cluster():
				addrs = []string{cfg.Addr}
			}
			for _, a := range addrs {
				if err := handshake(ctx, "redis", a, tc); err != nil {
					return err
				}
			}
		}
		return rdb.Ping(ctx).Err()
	})
}

// handshakeTimeout bounds a TLS handshake once connected.
const handshakeTimeout = 5 * time.Second

// handshake connects to addr and runs a TLS handshake. An address that
// does not connect is not its business (nil: the caller's client reports
// the outage); a handshake that gets no answer is a misconfiguration.
func handshake(ctx context.Context, service, addr string, tc *tls.Config) error {
	conn, err := (&net.Dialer{Timeout: handshakeTimeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	if tc.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			tc = tc.Clone()
			tc.ServerName = host
		}
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	tconn := tls.Client(conn, tc)
	err = tconn.HandshakeContext(hctx)
	if err == nil {
		_ = tconn.Close()
		return nil
	}
	if Classify(service, err) == nil && hctx.Err() != nil && ctx.Err() == nil {
		return &MisconfigError{Service: service, Err: err,
			Hint: fmt.Sprintf("%s accepts connections but does not answer a TLS handshake within %v: does it speak TLS (%s.tls)?", addr, handshakeTimeout, service)}
	}
	return err
}

// CheckKafka connects to the brokers with d (nil: plain TCP), one after
// the other until one answers a metadata request (see Probe); with TLS, a
// TLS handshake first (a plain broker never answers one).
func CheckKafka(ctx context.Context, d *kafka.Dialer, brokers []string) error {
	if d == nil {
		d = &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true}
	}
	return Probe(ctx, "kafka", func(ctx context.Context) error {
		var err error
		for _, b := range brokers {
			if d.TLS != nil {
				if err = handshake(ctx, "kafka", b, d.TLS); err != nil {
					if Classify("kafka", err) != nil || errors.As(err, new(*MisconfigError)) {
						return err
					}
					continue
				}
			}
			var conn *kafka.Conn
			if conn, err = d.DialContext(ctx, "tcp", b); err != nil {
				if Classify("kafka", err) != nil {
					return err
				}
				continue
			}
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Brokers()
			_ = conn.Close()
			if err == nil || Classify("kafka", err) != nil {
				return err
			}
		}
		return err
	})
}
