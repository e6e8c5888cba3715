// Package servers starts the servers rankd runs against on one machine, as
// child processes: a redis-server from PATH (StartRedis) and a
// Kafka-protocol broker, franz-go's kfake (StartBroker). It is the one way
// rankd starts them: `rankd bench` and `rankd dev` use it, and so do the
// tests, through internal/testenv, which adds what is theirs (shared
// servers, containers, clusters, sentinels, TLS, skipping when
// redis-server is missing).
//
// The broker runs in a child process so that its CPU is measured apart
// from the consumer's and a test can kill it and start it again on the
// same address with its data. The child is this same executable started
// again with the environment variable RANKD_SERVERS_KBROKER=1, whose main
// calls Child first: Child runs the broker instead of the program. rankd's
// main does, and so does testenv.Main in the TestMain of every test
// package; no Go toolchain is needed to start one.
//
// A Redis or a broker can be stopped (SIGTERM, or SIGKILL as a crash) and
// started again on the same port. Children get a parent-death signal on
// Linux: they are killed when the process that started them dies, even by
// SIGKILL (internal/proc).
package servers
