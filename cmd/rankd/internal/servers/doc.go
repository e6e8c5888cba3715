// Package servers starts the servers `rankd bench` measures against, as
// child processes of the running binary: a redis-server from PATH and a
// Kafka-protocol broker (franz-go's kfake).
//
// The broker runs in a child process so that its CPU is measured apart from
// the consumer's. The child is this same executable started again with the
// environment variable RANKD_SERVERS_KBROKER=1: the package's init function
// then runs the broker instead of the program (see StartBroker). Any binary
// that links this package (rankd, and the test binaries of packages that
// import it) can therefore start a broker without a Go toolchain.
//
// Children get a parent-death signal on Linux: they are killed when the
// process that started them dies, even by SIGKILL.
package servers
