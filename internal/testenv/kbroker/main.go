// Command kbroker runs a Kafka-protocol broker (franz-go's kfake) as a
// process of its own, for crash tests and development stacks.
//
// It prints "listening <host:port>" on stdout once it accepts connections
// and shuts down cleanly on SIGTERM or SIGINT. With -data-dir, messages and
// committed offsets survive a restart, even after SIGKILL.
//
//	kbroker -addr 127.0.0.1:9092 -data-dir /tmp/kafka -topics gift,like,comment -partitions 6
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/rankd/rankd/internal/testenv/kgroup"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kbroker:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "`host:port` to listen on (port 0: a free one)")
	dataDir := flag.String("data-dir", "", "directory keeping messages and committed offsets across restarts (empty: memory only)")
	topics := flag.String("topics", "", "comma-separated topics to create at first start")
	partitions := flag.Int("partitions", 6, "partitions of created and auto-created topics")
	minSession := flag.Duration("min-session-timeout", 100*time.Millisecond, "smallest group session timeout accepted")
	deadMembers := flag.Bool("kfake-dead-members", false,
		"keep kfake's defect: a member killed while its join or sync is parked stays in its group for good (default: expired by its session timeout, as Kafka does)")
	flag.Parse()

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
		return err
	}
	defer c.Close()
	if !*deadMembers {
		r := kgroup.ExpireDeadMembers(c)
		defer r.Stop()
	}

	fmt.Printf("listening %s\n", c.ListenAddrs()[0])
	<-ctx.Done()
	return nil
}
