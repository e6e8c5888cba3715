package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/proc"
	"github.com/rankd/rankd/internal/servers"
	"github.com/redis/go-redis/v9"
)

// AdminUser is the ACL user with every right that NewTLSRedis adds to each
// server, for the tests' own set-up and checks (AdminClient).
const AdminUser = "testenv-admin"

// adminPass is AdminUser's password, random per test binary.
var adminPass = func() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// TLSRedisOptions configures NewTLSRedis and NewTLSCluster.
type TLSRedisOptions struct {
	// PKI signs the server's certificate; required.
	PKI *PKI
	// ClientAuth makes clients present a certificate signed by the PKI's
	// CA (tls-auth-clients yes); without it they need none.
	ClientAuth bool
	// Users are ACL users as for ACL SETUSER, one string each:
	// "rankd on >secret ~* &* +@all"; "default off" disables the default
	// user (then every client must log in). AdminUser is always added.
	Users []string
	// Args are extra redis-server arguments.
	Args []string
}

// TLSRedis is a redis-server run by this package that speaks only TLS
// (--port 0 --tls-port N), with ACL users, for t alone.
type TLSRedis struct {
	srv  *servers.Redis
	addr string
	port int
	bus  int // cluster bus port, 0 outside a cluster
	pki  *PKI
}

// NewTLSRedis starts a TLS-only redis-server on a free loopback port and
// stops it at t's cleanup. It needs redis-server built with TLS (Debian's
// is): without redis-server the test is skipped (failed under CI=true).
func NewTLSRedis(t testing.TB, opts TLSRedisOptions) *TLSRedis {
	t.Helper()
	s, err := startTLSRedis(t.TempDir(), opts, nil)
	require(t, err)
	t.Cleanup(func() { s.shutdown(syscall.SIGTERM) })
	return s
}

func tlsRedisArgs(opts TLSRedisOptions) []string {
	auth := "no"
	if opts.ClientAuth {
		auth = "yes"
	}
	args := append([]string(nil),
		"--port", "0",
		"--tls-cert-file", opts.PKI.ServerCertFile,
		"--tls-key-file", opts.PKI.ServerKeyFile,
		"--tls-ca-cert-file", opts.PKI.CAFile,
		"--tls-auth-clients", auth,
		"--user", AdminUser, "on", ">"+adminPass, "~*", "&*", "+@all",
	)
	for _, u := range opts.Users {
		args = append(append(args, "--user"), strings.Fields(u)...)
	}
	return append(args, opts.Args...)
}

// startTLSRedis starts a server in dir on a free port; more gets the
// chosen port and returns more arguments (the cluster's).
func startTLSRedis(dir string, opts TLSRedisOptions, more func(port int) ([]string, error)) (*TLSRedis, error) {
	if opts.PKI == nil {
		return nil, fmt.Errorf("testenv: TLSRedisOptions.PKI is required")
	}
	srv, err := servers.StartRedis(context.Background(), servers.RedisOptions{Dir: dir, Args: tlsRedisArgs(opts), More: more, TLS: opts.PKI.ClientTLS()})
	if errors.Is(err, servers.ErrNoRedisServer) {
		return nil, errMissing{"redis-server not found in PATH: " + installRedis}
	}
	if err != nil {
		return nil, fmt.Errorf("redis-server (TLS): %w", err)
	}
	return &TLSRedis{srv: srv, addr: srv.Addr(), port: srv.Port(), pki: opts.PKI}, nil
}

// Addr returns the server's host:port (TLS).
func (s *TLSRedis) Addr() string { return s.addr }

// AdminClient returns a client logged in as AdminUser, with the PKI's
// client certificate; closed at t's cleanup.
func (s *TLSRedis) AdminClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.adminOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *TLSRedis) adminOptions() *redis.Options {
	return &redis.Options{Addr: s.addr, Username: AdminUser, Password: adminPass, TLSConfig: s.pki.ClientTLS()}
}

// Stop shuts the server down (SIGTERM) and waits for it to exit.
func (s *TLSRedis) Stop() { s.shutdown(syscall.SIGTERM) }

// Start starts a stopped server again on the same port.
func (s *TLSRedis) Start() error { return s.srv.Start() }

func (s *TLSRedis) shutdown(sig syscall.Signal) { s.srv.Stop(sig) }

// TLSRedisCluster is a Redis Cluster of TLS-only masters (the cluster bus
// over TLS too) run by this package for t alone.
type TLSRedisCluster struct {
	Nodes []*TLSRedis
}

// NewTLSCluster starts three TLS-only masters with the options' users,
// joins them (CLUSTER MEET, slots split in three) and returns once every
// node reports cluster_state ok. They are stopped at t's cleanup.
func NewTLSCluster(t testing.TB, opts TLSRedisOptions) *TLSRedisCluster {
	t.Helper()
	c := &TLSRedisCluster{}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			n.shutdown(syscall.SIGTERM)
		}
	})
	for range clusterNodes {
		dir := t.TempDir()
		var bus int
		n, err := startTLSRedis(dir, opts, func(int) ([]string, error) {
			var err error
			if bus, err = proc.FreePort(); err != nil {
				return nil, err
			}
			return []string{"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000",
				"--tls-cluster", "yes",
				"--cluster-port", strconv.Itoa(bus)}, nil
		})
		require(t, err)
		n.bus = bus
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.create(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Addrs returns the nodes' host:port.
func (c *TLSRedisCluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.addr)
	}
	return a
}

// AdminClient returns a cluster client logged in as AdminUser; closed at
// t's cleanup.
func (c *TLSRedisCluster) AdminClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	o := c.Nodes[0].adminOptions()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func (c *TLSRedisCluster) create() error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	var clients []*redis.Client
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	for _, n := range c.Nodes {
		clients = append(clients, redis.NewClient(n.adminOptions()))
	}
	per := 16384 / len(c.Nodes)
	for i, cl := range clients {
		lo, hi := i*per, (i+1)*per-1
		if i == len(clients)-1 {
			hi = 16383
		}
		if err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("TLS cluster: CLUSTER ADDSLOTSRANGE on %s: %w", c.Nodes[i].addr, err)
		}
		if i > 0 {
			if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", c.Nodes[i].port, c.Nodes[i].bus).Err(); err != nil {
				return fmt.Errorf("TLS cluster: CLUSTER MEET %s: %w", c.Nodes[i].addr, err)
			}
		}
	}
	want := []string{"cluster_state:ok", "cluster_slots_ok:16384", fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes))}
	for i, cl := range clients {
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && containsAll(info, want) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("TLS cluster node %s not ready: %v\n%s", c.Nodes[i].addr, err, info)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
