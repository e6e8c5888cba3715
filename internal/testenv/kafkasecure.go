package testenv

import (
	"crypto/tls"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// SASLUser is a SASL user of a broker from NewSecureKafka.
type SASLUser struct {
	Mechanism string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	User      string
	Pass      string
}

// SecureKafkaOptions configures NewSecureKafka.
type SecureKafkaOptions struct {
	KafkaOptions
	// TLS is the broker's server config (see PKI.ServerTLS); nil: plain
	// TCP.
	TLS *tls.Config
	// Users turn SASL on: every client must authenticate as one of them
	// (they are superusers: no ACLs). Empty: no SASL.
	Users []SASLUser
}

// NewSecureKafka is NewKafka with TLS and/or SASL: kfake in process on a
// free loopback port, closed at t's cleanup. The broker's helpers that
// connect to it (CreateTopic, ReadLog) speak plain unauthenticated Kafka and
// do not work with it: seed topics with KafkaOptions.SeedTopics, and read
// and write with a client configured for its TLS and SASL.
func NewSecureKafka(t testing.TB, opts SecureKafkaOptions) *Broker {
	t.Helper()
	b := &Broker{opts: opts.KafkaOptions, dedicated: true}
	if opts.TLS != nil {
		b.extra = append(b.extra, kfake.TLS(opts.TLS))
	}
	if len(opts.Users) > 0 {
		b.extra = append(b.extra, kfake.EnableSASL())
		for _, u := range opts.Users {
			b.extra = append(b.extra, kfake.Superuser(u.Mechanism, u.User, u.Pass))
		}
	}
	if err := b.startKfake(0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b
}
