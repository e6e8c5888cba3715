package servers

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/rankd/rankd/internal/proc"
)

const (
	// brokerEnv makes a binary whose main calls Child run the broker (see
	// the package doc).
	brokerEnv = "RANKD_SERVERS_KBROKER"

	brokerReadyTimeout = 30 * time.Second
	brokerStopGrace    = 10 * time.Second

	// DefaultPartitions is the partition count of a broker's topics when
	// BrokerOptions.Partitions is 0.
	DefaultPartitions = 6
)

// ChildHook adapts the cluster of a broker child, once it listens: the
// tests' kfake group fixes (testenv). The returned stop runs before the
// cluster closes.
type ChildHook func(*kfake.Cluster) (stop func())

// Child runs the broker and returns its exit code when this process was
// started by StartBroker to be it (ok true); otherwise it returns at once
// with ok false. The main of every binary that calls StartBroker (rankd,
// and test binaries through testenv.Main) calls it first: StartBroker
// re-runs the binary. hook, if not nil, adapts the cluster of a broker
// started with BrokerOptions.Hook.
func Child(hook ChildHook) (code int, ok bool) {
	if os.Getenv(brokerEnv) != "1" {
		return 0, false
	}
	return BrokerMain(os.Args[1:], hook), true
}

// BrokerOptions configures StartBroker.
type BrokerOptions struct {
	// Addr is the address to listen on; "": a free loopback port. Restart
	// keeps the address.
	Addr string
	// DataDir keeps messages and committed offsets across Restart, even
	// after Kill; "": memory only.
	DataDir string
	// Topics are created at first start, with Partitions partitions each.
	Topics []string
	// Partitions of the topics and of auto-created ones; 0 means
	// DefaultPartitions.
	Partitions int
	// Hook runs the ChildHook that the binary's main gave Child (rankd's
	// gives none).
	Hook bool
}

// Broker is a single-node kfake broker in a child process.
type Broker struct {
	exe  string
	args []string // without -addr

	mu   sync.Mutex
	addr string // "127.0.0.1:0" until the first start
	proc *proc.Process
	out  *proc.TailBuffer // stdout and stderr, for error messages
}

// StartBroker starts the broker in a child process (this executable again,
// see the package doc) and returns once it accepts connections.
func StartBroker(ctx context.Context, opts BrokerOptions) (*Broker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting the broker: finding this executable: %w", err)
	}
	if opts.Partitions <= 0 {
		opts.Partitions = DefaultPartitions
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	args := []string{"-partitions", strconv.Itoa(opts.Partitions)}
	if opts.DataDir != "" {
		args = append(args, "-data-dir", opts.DataDir)
	}
	if len(opts.Topics) > 0 {
		args = append(args, "-topics", strings.Join(opts.Topics, ","))
	}
	if opts.Hook {
		args = append(args, "-hook")
	}
	b := &Broker{exe: exe, args: args, addr: opts.Addr}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Addr returns the broker's bootstrap address; it stays the same across
// restarts.
func (b *Broker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// PID returns the broker's process id, or 0 when it is not running.
func (b *Broker) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return runningPID(b.proc)
}

// Close stops the broker (SIGTERM, then SIGKILL after a grace) and waits
// for it to exit.
func (b *Broker) Close() { b.Stop(syscall.SIGTERM) }

// Stop sends sig to the broker (SIGKILL: as a crash would) and waits for
// it to exit.
func (b *Broker) Stop(sig syscall.Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc != nil {
		b.proc.Stop(sig, brokerStopGrace)
	}
}

// Restart stops the broker if it runs (SIGTERM) and starts it again on
// the same address with the same data dir, so that messages and committed
// offsets survive. It returns once the broker accepts connections.
func (b *Broker) Restart() error {
	b.Stop(syscall.SIGTERM)
	return b.start(context.Background())
}

// start runs the child and waits for its "listening" line.
func (b *Broker) start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc != nil && !b.proc.Exited() {
		return nil
	}
	b.out = &proc.TailBuffer{}
	ready := &readyWriter{tail: b.out, addr: make(chan string, 1)}
	cmd := exec.Command(b.exe, append([]string{"-addr", b.addr}, b.args...)...)
	cmd.Env = append(os.Environ(), brokerEnv+"=1")
	cmd.Stdout, cmd.Stderr = ready, b.out
	p, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting the broker: %w", err)
	}
	select {
	case addr := <-ready.addr:
		b.addr, b.proc = addr, p
		return nil
	case <-p.Done():
		return fmt.Errorf("the broker exited before listening: %v\n%s", p.Err(), b.out)
	case <-ctx.Done():
		p.Stop(syscall.SIGKILL, brokerStopGrace)
		return ctx.Err()
	case <-time.After(brokerReadyTimeout):
		p.Stop(syscall.SIGKILL, brokerStopGrace)
		return fmt.Errorf("the broker is not listening after %v\n%s", brokerReadyTimeout, b.out)
	}
}

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

// BrokerMain is the broker as a program, with its command line args: kfake
// on -addr until SIGTERM, SIGINT or the parent's death, adapted by hook
// with -hook. It prints "listening <host:port>" once it accepts
// connections. With -data-dir, messages and committed offsets survive a
// restart, even after SIGKILL. It returns the exit code. Child runs it, and
// so does the kbroker command (internal/testenv/kbroker).
func BrokerMain(args []string, hook ChildHook) int {
	fs := flag.NewFlagSet("kbroker", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "`host:port` to listen on (port 0: a free one)")
	dataDir := fs.String("data-dir", "", "directory keeping messages and committed offsets across restarts (empty: memory only)")
	topics := fs.String("topics", "", "comma-separated topics to create at first start")
	partitions := fs.Int("partitions", DefaultPartitions, "partitions of created and auto-created topics")
	minSession := fs.Duration("min-session-timeout", 100*time.Millisecond, "smallest group session timeout accepted")
	withHook := fs.Bool("hook", false, "adapt the cluster with the binary's ChildHook")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, *addr) }),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
		kfake.GroupMinSessionTimeout(*minSession),
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
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
	if *withHook {
		if hook == nil {
			fmt.Fprintln(os.Stderr, "kbroker:", errors.New("-hook: this binary's main gave Child no hook"))
			return 1
		}
		defer hook(c)()
	}
	fmt.Printf("listening %s\n", c.ListenAddrs()[0])
	<-ctx.Done()
	return 0
}
