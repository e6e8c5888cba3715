package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority for TLS tests, with its files
// in a temp dir: a CA, a server certificate for 127.0.0.1, ::1 and
// localhost (also usable as a client certificate, as Redis cluster nodes
// use theirs), a client certificate signed by the CA, and an unrelated CA
// with a client certificate of its own, for the untrusted cases.
type PKI struct {
	Dir string

	CAFile         string // PEM of the CA
	ServerCertFile string
	ServerKeyFile  string
	ClientCertFile string
	ClientKeyFile  string

	OtherCAFile         string // an unrelated CA: trusting only it fails verification
	OtherClientCertFile string // a client certificate signed by the other CA
	OtherClientKeyFile  string

	CAs        *x509.CertPool
	ServerCert tls.Certificate
	ClientCert tls.Certificate
}

// NewPKI generates a PKI (ECDSA P-256, valid for a day) into t's temp dir.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{Dir: dir}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("testenv: generating certificates: %v", err)
		}
	}
	ca, caKey, err := newCA("rankd test CA")
	must(err)
	other, otherKey, err := newCA("unrelated test CA")
	must(err)
	p.CAFile, p.OtherCAFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other-ca.pem")
	must(writePEM(p.CAFile, "CERTIFICATE", ca.Raw))
	must(writePEM(p.OtherCAFile, "CERTIFICATE", other.Raw))
	p.CAs = x509.NewCertPool()
	p.CAs.AddCert(ca)

	p.ServerCertFile, p.ServerKeyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	p.ServerCert, err = issue(ca, caKey, "localhost", true, p.ServerCertFile, p.ServerKeyFile)
	must(err)
	p.ClientCertFile, p.ClientKeyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	p.ClientCert, err = issue(ca, caKey, "rankd", false, p.ClientCertFile, p.ClientKeyFile)
	must(err)
	p.OtherClientCertFile, p.OtherClientKeyFile = filepath.Join(dir, "other-client.pem"), filepath.Join(dir, "other-client-key.pem")
	_, err = issue(other, otherKey, "intruder", false, p.OtherClientCertFile, p.OtherClientKeyFile)
	must(err)
	return p
}

// ServerTLS returns the servers' config; with clientAuth, clients must
// present a certificate signed by the CA.
func (p *PKI) ServerTLS(clientAuth bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.ServerCert}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.CAs
	}
	return c
}

// ClientTLS returns a client config trusting the CA, with the client
// certificate.
func (p *PKI) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.CAs, Certificates: []tls.Certificate{p.ClientCert}, MinVersion: tls.VersionTLS12}
}

func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// issue signs a leaf certificate and writes it and its key (PKCS #8).
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, server bool, certFile, keyFile string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return tls.Certificate{}, err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", keyDER); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(certFile, keyFile)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
