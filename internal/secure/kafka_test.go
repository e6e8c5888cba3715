package secure_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/internal/testenv"
)

// kafkaSection returns the kafka keys (after brokers) of a config.
func kafkaSection(mechanism, user string, tls string) string {
	s := ""
	if mechanism != "" {
		s += "  sasl:\n    mechanism: " + mechanism + "\n    username: " + user + "\n"
	}
	return s + tls
}

// loadKafkaConfig loads a config whose kafka section has the given
// brokers and extra keys.
func loadKafkaConfig(t *testing.T, brokers []string, extra string) *config.Config {
	t.Helper()
	t.Setenv("RANKD_KAFKA_BROKERS", strings.Join(brokers, ","))
	return loadConfig(t, t.TempDir(), extra, "  addr: 127.0.0.1:1\n")
}

// probeKafka runs CheckKafka with a 30s bound.
func probeKafka(t *testing.T, cfg *config.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := secure.CheckKafka(ctx, secure.KafkaDialer(cfg.Kafka), cfg.Kafka.Brokers)
	t.Logf("CheckKafka: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("CheckKafka hung until its deadline: %v", err)
	}
	return err
}

// roundTrip writes n messages with a Writer on the config's Transport and
// reads them back with a group Reader on its Dialer: the two kinds of
// kafka-go clients rankd uses (dead letters; consumer workers).
func roundTrip(t *testing.T, cfg *config.Config, topic, group string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	d := secure.KafkaDialer(cfg.Kafka)
	tr := secure.KafkaTransport(d)
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(cfg.Kafka.Brokers...), Topic: topic, Transport: tr,
		BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	var want []string
	var msgs []kafka.Message
	for i := range n {
		v := fmt.Sprintf("%s-%d", group, i)
		want = append(want, v)
		msgs = append(msgs, kafka.Message{Key: []byte(v), Value: []byte(v)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = w.Close()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: cfg.Kafka.Brokers, GroupID: group, GroupTopics: []string{topic},
		Dialer: d, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	var got []string
	for len(got) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read after %d of %d: %v", len(got), n, err)
		}
		if strings.HasPrefix(string(m.Value), group+"-") {
			got = append(got, string(m.Value))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// TestKafkaSASLAndTLS: a kfake broker with TLS and SASL users of each
// mechanism; for each, the config's Dialer and Transport (TLS, SASL from
// kafka.sasl and RANKD_KAFKA_SASL_PASSWORD) write and read through a
// consumer group; each wrong setting fails at once with an error naming the
// setting, never the password.
func TestKafkaSASLAndTLS(t *testing.T) {
	clearSecretEnv(t)
	pki := testenv.NewPKI(t)
	const topic = "events"
	users := []testenv.SASLUser{
		{Mechanism: "PLAIN", User: "plainuser", Pass: "plain-" + userPass},
		{Mechanism: "SCRAM-SHA-256", User: "scram256", Pass: "s256-" + userPass},
		{Mechanism: "SCRAM-SHA-512", User: "scram512", Pass: "s512-" + userPass},
	}
	b := testenv.NewSecureKafka(t, testenv.SecureKafkaOptions{
		KafkaOptions: testenv.KafkaOptions{SeedTopics: map[string]int{topic: 3}},
		TLS:          pki.ServerTLS(false), Users: users})
	tlsOK := "  tls:\n    enabled: true\n    ca_file: " + pki.CAFile + "\n"

	for _, u := range users {
		t.Run(u.Mechanism, func(t *testing.T) {
			t.Setenv(config.EnvKafkaSASLPassword, u.Pass)
			cfg := loadKafkaConfig(t, b.Addrs(), kafkaSection(strings.ToLower(u.Mechanism), u.User, tlsOK))
			if cfg.Kafka.SASL.Mechanism != u.Mechanism {
				t.Fatalf("mechanism %q", cfg.Kafka.SASL.Mechanism)
			}
			if err := probeKafka(t, cfg); err != nil {
				t.Fatal(err)
			}
			roundTrip(t, cfg, topic, "g-"+strings.ToLower(u.Mechanism), 20)

			t.Setenv(config.EnvKafkaSASLPassword, wrongPass)
			bad := loadKafkaConfig(t, b.Addrs(), kafkaSection(u.Mechanism, u.User, tlsOK))
			wantMisconfig(t, probeKafka(t, bad), "SASL authentication failed (check kafka.sasl.username and RANKD_KAFKA_SASL_PASSWORD", wrongPass, u.Pass)
		})
	}

	u := users[2]
	t.Run("untrusted CA", func(t *testing.T) {
		t.Setenv(config.EnvKafkaSASLPassword, u.Pass)
		cfg := loadKafkaConfig(t, b.Addrs(), kafkaSection(u.Mechanism, u.User, "  tls:\n    enabled: true\n    ca_file: "+pki.OtherCAFile+"\n"))
		wantMisconfig(t, probeKafka(t, cfg), "the server's certificate is not trusted (check kafka.tls.ca_file)", u.Pass)
	})
	t.Run("unknown user", func(t *testing.T) {
		t.Setenv(config.EnvKafkaSASLPassword, u.Pass)
		cfg := loadKafkaConfig(t, b.Addrs(), kafkaSection(u.Mechanism, "nobody", tlsOK))
		wantMisconfig(t, probeKafka(t, cfg), "SASL authentication failed", u.Pass)
	})
	t.Run("mechanism the user does not have", func(t *testing.T) {
		t.Setenv(config.EnvKafkaSASLPassword, u.Pass)
		cfg := loadKafkaConfig(t, b.Addrs(), kafkaSection("PLAIN", u.User, tlsOK))
		wantMisconfig(t, probeKafka(t, cfg), "SASL authentication failed", u.Pass)
	})
	t.Run("no SASL", func(t *testing.T) {
		cfg := loadKafkaConfig(t, b.Addrs(), tlsOK)
		wantMisconfig(t, probeKafka(t, cfg), "does it require TLS (kafka.tls) or SASL (kafka.sasl)?")
	})
	t.Run("no TLS", func(t *testing.T) {
		t.Setenv(config.EnvKafkaSASLPassword, u.Pass)
		cfg := loadKafkaConfig(t, b.Addrs(), kafkaSection(u.Mechanism, u.User, ""))
		wantMisconfig(t, probeKafka(t, cfg), "does it require TLS (kafka.tls) or SASL (kafka.sasl)?", u.Pass)
	})
	t.Run("broker down is not a misconfiguration", func(t *testing.T) {
		t.Setenv(config.EnvKafkaSASLPassword, u.Pass)
		cfg := loadKafkaConfig(t, []string{"127.0.0.1:1"}, kafkaSection(u.Mechanism, u.User, tlsOK))
		err := probeKafka(t, cfg)
		var me *secure.MisconfigError
		if err == nil || errors.As(err, &me) {
			t.Fatalf("error %v: want an outage error, not nil or a misconfiguration", err)
		}
	})
}

// TestKafkaMutualTLS: a broker that requires client certificates (no
// SASL): the config's client certificate is accepted, none or one of
// another CA is refused at once.
func TestKafkaMutualTLS(t *testing.T) {
	clearSecretEnv(t)
	pki := testenv.NewPKI(t)
	const topic = "events"
	b := testenv.NewSecureKafka(t, testenv.SecureKafkaOptions{
		KafkaOptions: testenv.KafkaOptions{SeedTopics: map[string]int{topic: 2}},
		TLS:          pki.ServerTLS(true)})
	tlsWith := func(cert, key string) string {
		s := "  tls:\n    enabled: true\n    ca_file: " + pki.CAFile + "\n"
		if cert != "" {
			s += "    cert_file: " + cert + "\n    key_file: " + key + "\n"
		}
		return s
	}
	cfg := loadKafkaConfig(t, b.Addrs(), tlsWith(pki.ClientCertFile, pki.ClientKeyFile))
	if err := probeKafka(t, cfg); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, cfg, topic, "g-mtls", 10)

	wantMisconfig(t, probeKafka(t, loadKafkaConfig(t, b.Addrs(), tlsWith("", ""))), "refused the TLS handshake")
	wantMisconfig(t, probeKafka(t, loadKafkaConfig(t, b.Addrs(), tlsWith(pki.OtherClientCertFile, pki.OtherClientKeyFile))), "refused the TLS handshake")
}

// TestKafkaTLSToPlainBroker: TLS configured for a broker that speaks plain
// Kafka fails at once, naming kafka.tls.
func TestKafkaTLSToPlainBroker(t *testing.T) {
	clearSecretEnv(t)
	pki := testenv.NewPKI(t)
	b := testenv.NewKafka(t, testenv.KafkaOptions{})
	cfg := loadKafkaConfig(t, b.Addrs(), "  tls:\n    enabled: true\n    ca_file: "+pki.CAFile+"\n")
	wantMisconfig(t, probeKafka(t, cfg), "kafka.tls")
}

// TestMechanismRereadsPasswordFile: the SASL mechanism reads the password
// file whenever a connection authenticates, so a rotated file is used by
// the next connection without a restart.
func TestMechanismRereadsPasswordFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	for _, pw := range []string{"first-password", "rotated-password"} {
		if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		m := secure.Mechanism(config.SASL{Mechanism: config.SASLPlain, Username: "u", PasswordFile: file})
		_, ir, err := m.Start(t.Context())
		if err != nil || string(ir) != "\x00u\x00"+pw {
			t.Fatalf("PLAIN initial response %q, %v; want the file's password %q", ir, err, pw)
		}
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	_, _, err := secure.Mechanism(config.SASL{Mechanism: config.SASLScramSHA512, Username: "u", PasswordFile: file}).Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "kafka.sasl.password_file: open "+file) {
		t.Fatalf("missing file: %v", err)
	}
	if me := secure.Classify("kafka", err); me == nil {
		t.Fatalf("a missing password file is not classified as a misconfiguration")
	}
}
