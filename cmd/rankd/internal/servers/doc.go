// Package servers starts the servers `rankd bench` measures against, as
// child processes of the running binary: a redis-server from PATH and a
// Kafka-protocol broker (franz-go's kfake).
//
// The broker runs in a child process so that its CPU is measured apart from
// the consumer's. The child is this same executable started again with the
// environment variable RANKD_SERVERS_KBROKER=1, whose main calls Child
// first: Child runs the broker instead of the program (see StartBroker).
// rankd's main and the TestMain of the test packages that start a broker
// do, so they need no Go toolchain to start one.
//
// Children get a parent-death signal on Linux: they are killed when the
// process that started them dies, even by SIGKILL.
package servers
