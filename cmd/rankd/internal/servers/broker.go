package servers

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rankd/rankd/internal/proc"
	"github.com/twmb/franz-go/pkg/kfake"
)

const (
	// brokerEnv makes a binary linking this package run the broker (see
	// the package doc).
	brokerEnv = "RANKD_SERVERS_KBROKER"

	brokerReadyTimeout = 30 * time.Second
	brokerStopGrace    = 10 * time.Second
)

// Child runs the broker and returns its exit code when this process was
// started by StartBroker to be it (ok true); otherwise it returns at once
// with ok false. The main of every binary that calls StartBroker (rankd,
// and the tests that do) calls it first: StartBroker re-runs the binary.
func Child() (code int, ok bool) {
	if os.Getenv(brokerEnv) != "1" {
		return 0, false
	}
	return brokerMain(os.Args[1:]), true
}

// BrokerOptions configures StartBroker.
type BrokerOptions struct {
	// Topics are created at start, with Partitions partitions each.
	Topics []string
	// Partitions of the topics and of auto-created ones; 0 means 6.
	Partitions int
}

// Broker is a single-node kfake broker in a child process, in memory only.
type Broker struct {
	addr string
	proc *proc.Process
	out  *proc.TailBuffer
}

// StartBroker starts the broker in a child process (this executable again,
// see the package doc) on a free loopback port and returns once it
// accepts connections.
func StartBroker(ctx context.Context, opts BrokerOptions) (*Broker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting the broker: finding this executable: %w", err)
	}
	if opts.Partitions <= 0 {
		opts.Partitions = 6
	}
	args := []string{"-partitions", fmt.Sprint(opts.Partitions)}
	if len(opts.Topics) > 0 {
		args = append(args, "-topics", strings.Join(opts.Topics, ","))
	}
	out := &proc.TailBuffer{}
	ready := &readyWriter{tail: out, addr: make(chan string, 1)}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), brokerEnv+"=1")
	cmd.Stdout, cmd.Stderr = ready, out
	proc, err := proc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting the broker: %w", err)
	}
	select {
	case addr := <-ready.addr:
		return &Broker{addr: addr, proc: proc, out: out}, nil
	case <-proc.Done():
		return nil, fmt.Errorf("the broker exited before listening: %v\n%s", proc.Err(), out)
	case <-ctx.Done():
		proc.Stop(syscall.SIGKILL, brokerStopGrace)
		return nil, ctx.Err()
	case <-time.After(brokerReadyTimeout):
		proc.Stop(syscall.SIGKILL, brokerStopGrace)
		return nil, fmt.Errorf("the broker is not listening after %v\n%s", brokerReadyTimeout, out)
	}
}

// Addr returns the broker's bootstrap address.
func (b *Broker) Addr() string { return b.addr }

// PID returns the broker's process id.
func (b *Broker) PID() int { return b.proc.PID() }

// Close stops the broker (SIGTERM, then SIGKILL after a grace).
func (b *Broker) Close() { b.proc.Stop(syscall.SIGTERM, brokerStopGrace) }

// readyWriter passes the child's stdout on to tail and reports the address
// of its "listening <addr>" line.
type readyWriter struct {
	tail *proc.TailBuffer
	line []byte
	addr chan string
	sent bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	_, _ = w.tail.Write(p)
	if w.sent {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(w.line[:i]))
		w.line = w.line[i+1:]
		if addr, ok := strings.CutPrefix(line, "listening "); ok {
			w.addr <- addr
			w.sent, w.line = true, nil
			return len(p), nil
		}
	}
}

// brokerMain is the child: kfake on a free loopback port until SIGTERM,
// SIGINT or the parent's death.
func brokerMain(args []string) int {
	fs := flag.NewFlagSet("kbroker", flag.ContinueOnError)
	topics := fs.String("topics", "", "comma-separated topics to create")
	partitions := fs.Int("partitions", 6, "partitions per topic")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kbroker:", err)
		return 1
	}
	defer c.Close()
	fmt.Printf("listening %s\n", c.ListenAddrs()[0])
	<-ctx.Done()
	return 0
}
