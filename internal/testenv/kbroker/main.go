// Command kbroker runs a Kafka-protocol broker (franz-go's kfake) as a
// process of its own, for crash tests and development stacks: the broker
// of internal/servers (servers.BrokerMain) with the group fixes of package
// kgroup, unless -kfake-dead-members.
//
// It prints "listening <host:port>" on stdout once it accepts connections
// and shuts down cleanly on SIGTERM or SIGINT. With -data-dir, messages and
// committed offsets survive a restart, even after SIGKILL.
//
//	kbroker -addr 127.0.0.1:9092 -data-dir /tmp/kafka -topics gift,like,comment -partitions 6
package main

import (
	"os"
	"strings"

	"github.com/rankd/rankd/internal/servers"
	"github.com/rankd/rankd/internal/testenv/kgroup"
)

func main() {
	// -kfake-dead-members keeps kfake's defect: a member killed while its
	// join or sync is parked stays in its group for good; by default it is
	// expired by its session timeout, as Kafka does (kgroup).
	args, hook := []string{"-hook"}, true
	for _, a := range os.Args[1:] {
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "kfake-dead-members" {
			hook = value == "false"
			continue
		}
		args = append(args, a)
	}
	if !hook {
		args = args[1:]
	}
	os.Exit(servers.BrokerMain(args, kgroup.Hook))
}
