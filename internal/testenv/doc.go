// Package testenv starts the real servers that rankd's tests run against:
// Redis (a single server, a 3-master Redis Cluster, or a primary, a replica
// and a sentinel: NewSentinel) and a Kafka-protocol broker.
//
// Everything under internal/testenv is for tests only, and no build of
// rankd links it (cmd/rankd's TestNodev checks): testenv itself; world, a
// broker, a Redis and the example config for end-to-end tests; oracle, the
// reference recomputation of every board; kgroup, kfake's group
// coordinator made to keep Kafka's timeouts; testseed, logged seeds of
// randomized tests; chaos, the fault tests of the rankd binary; kbroker, the
// broker as a command. The processes themselves are started by the shipped
// internal/servers, which `rankd bench` and `rankd dev` use too: testenv
// wraps it with what tests need (shared servers, containers, skipping or
// failing when a program is missing).
//
// Each helper resolves its server in the same order:
//
//  1. an explicit address from the environment (REDIS_ADDR,
//     REDIS_CLUSTER_ADDRS, KAFKA_BROKERS), used as is;
//  2. a testcontainers-go container when a Docker engine answers
//     (see DockerHealthy);
//  3. a local fallback: redis-server from PATH on a free 127.0.0.1 port, or
//     franz-go's kfake broker in process.
//
// When no server can be had, the test is skipped with a message naming what
// to install, except under CI=true, where it fails: a test that needs a
// server never silently skips in CI.
//
// Shared servers (Redis, Cluster, Kafka) are started once per test binary
// and stopped by Main, which a package calls from its TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Main also runs the test binary as the broker of StartBrokerProcess
// (servers.Child): a package that starts one must call it.
//
// Without Main, child processes still die with the test binary on Linux
// (they are started with a parent-death signal) but their temp dirs stay.
// Tests that share a server isolate themselves with Prefix (Redis keys) and
// Broker.Topic (topics and groups). Dedicated servers (NewRedis, NewCluster,
// NewSentinel, NewKafka, StartBrokerProcess) belong to one test and stop at
// its cleanup.
package testenv
