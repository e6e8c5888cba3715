//go:build nodev

package main

import (
	"context"
	"io"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/spf13/pflag"
)

// benchSpec in a build without dev tooling (-tags nodev, the image): hidden,
// and explaining itself when asked for.
var benchSpec = cli.Spec{Use: "bench", Hidden: true, Raw: true, Flags: func(*pflag.FlagSet) cli.RunFunc {
	return func(context.Context, []string, io.Writer, io.Writer) error {
		return cli.Usagef("not in this build: rankd was built with -tags nodev, without the Kafka broker the benchmark starts; " +
			"a default build has it (go run ./cmd/rankd bench in a checkout)")
	}
}}

// child: a build without dev tooling starts no servers of its own.
func child() (int, bool) { return 0, false }
