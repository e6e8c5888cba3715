package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/version"
)

// specs lists the subcommands in the order of the usage text.
func specs() []cli.Spec {
	return []cli.Spec{
		runSpec,
		devSpec, // cmd_dev.go; cmd_dev_nodev.go with -tags nodev
		produceSpec,
		rolloverSpec,
		configSpec,
		healthcheckSpec,
		replaySpec,
		versionSpec,
		benchSpec, // cmd_bench.go; cmd_bench_nodev.go with -tags nodev
	}
}

const rootHelp = `rankd: exact real-time leaderboards from Kafka events, kept in Redis.

Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.`

// newRoot returns the command tree: help and usage go to stdout, errors to
// stderr (printed by run, not by cobra).
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use: "rankd", Short: "exact real-time leaderboards from Kafka events, kept in Redis", Long: rootHelp,
		SilenceErrors: true, SilenceUsage: true,
		Version: version.String(),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return &cli.UsageError{}
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	cobra.EnableCommandSorting = false // the order of specs
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usagef("%v (see --help)", err) })
	for _, s := range specs() {
		if s.Use == configSpec.Use { // with its subcommand
			root.AddCommand(configCommand())
			continue
		}
		root.AddCommand(s.Command())
	}
	return root
}

// run is the whole command line: it runs the subcommand of args and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, newRoot(stdout, stderr), args, stderr)
}
