package testenv

import (
	"context"
	"syscall"
	"testing"

	"github.com/rankd/rankd/internal/servers"
)

// BrokerProcessOptions configures StartBrokerProcess.
type BrokerProcessOptions struct {
	// DataDir keeps messages and committed offsets across Kill and Restart.
	// Empty means a temp dir of the test.
	DataDir string

	// Topics are created at first start.
	Topics []string

	// Partitions is the partition count of Topics and of auto-created
	// topics. Zero means 6.
	Partitions int

	// KfakeDeadMembers: see KafkaOptions.KfakeDeadMembers.
	KfakeDeadMembers bool
}

// BrokerProcess is a Kafka-protocol broker running as a child process
// (servers.Broker: the test binary again, see Main), so that a test can
// kill it and start it again on the same address with its data, as a
// broker crash would go.
type BrokerProcess struct {
	b       *servers.Broker
	dataDir string
}

// StartBrokerProcess starts the broker on a free loopback port and stops
// it at t's cleanup. The test binary's TestMain must call Main, which runs
// the binary as the broker when StartBrokerProcess starts it again.
func StartBrokerProcess(t testing.TB, opts BrokerProcessOptions) *BrokerProcess {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Partitions <= 0 {
		opts.Partitions = defaultPartitions
	}
	b, err := servers.StartBroker(context.Background(), servers.BrokerOptions{
		DataDir: opts.DataDir, Topics: opts.Topics, Partitions: opts.Partitions, Hook: !opts.KfakeDeadMembers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &BrokerProcess{b: b, dataDir: opts.DataDir}
}

// Addrs returns the broker's bootstrap address; it stays the same across
// restarts.
func (bp *BrokerProcess) Addrs() []string { return []string{bp.b.Addr()} }

// DataDir returns the directory holding the broker's data.
func (bp *BrokerProcess) DataDir() string { return bp.dataDir }

// PID returns the broker's process id, or 0 when it is not running.
func (bp *BrokerProcess) PID() int { return bp.b.PID() }

// Kill kills the broker with SIGKILL, as a crash would, and waits for it to
// exit.
func (bp *BrokerProcess) Kill() { bp.b.Stop(syscall.SIGKILL) }

// Stop shuts the broker down with SIGTERM and waits for it to exit.
func (bp *BrokerProcess) Stop() { bp.b.Stop(syscall.SIGTERM) }

// Restart stops the broker if it runs (SIGTERM) and starts it again on the
// same address with the same data dir, so that messages and committed
// offsets survive. It returns once the broker accepts connections.
func (bp *BrokerProcess) Restart() error { return bp.b.Restart() }
