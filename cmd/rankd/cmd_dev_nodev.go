//go:build nodev

package main

import (
	"context"
	"io"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/spf13/pflag"
)

// devSpec in a build without dev tooling (-tags nodev, the image): hidden,
// and explaining itself when asked for.
var devSpec = cli.Spec{Use: "dev", Hidden: true, Raw: true, Flags: func(*pflag.FlagSet) cli.RunFunc {
	return func(context.Context, []string, io.Writer, io.Writer) error {
		return cli.Usagef("not in this build: rankd was built with -tags nodev, without the embedded Kafka broker and Redis; " +
			"a default build has it (go run ./cmd/rankd dev in a checkout)")
	}
}}
