package main

import (
	"context"
	"io"
	"time"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const configHelp = `
"rankd config check FILE" loads FILE as "rankd run" would (the environment
overrides included) and prints the resolved settings, every board (window,
periods, time zone, dims, aggregate, order, tie-break, score layout in bits,
Redis key pattern and current period id) and the routes; or, when the file
is invalid, every error as file:line:column: field: message (exit 2).`

// configSpec is `rankd config`, whose one subcommand is check.
var configSpec = cli.Spec{Use: "config", Short: "config check FILE: print the resolved boards or the errors", Long: configHelp,
	Args: func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return cli.Usagef("unknown subcommand %q (want check)", args[0])
		}
		return nil
	},
	Flags: func(*pflag.FlagSet) cli.RunFunc {
		return func(context.Context, []string, io.Writer, io.Writer) error {
			return cli.Usagef("want a subcommand: check FILE")
		}
	}}

// configCommand is configSpec with its check subcommand.
func configCommand() *cobra.Command {
	c := configSpec.Command()
	c.AddCommand(cli.Spec{Use: "check [FILE] [--at TIME]", Short: "load FILE as rankd run would and print the result or the errors",
		Long: configHelp, Args: atMostOneFile, Flags: configCheckFlags}.Command())
	return c
}

// atMostOneFile accepts one FILE argument or none ($RANKD_CONFIG).
func atMostOneFile(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return cli.Usagef("one FILE at a time (got %d)", len(args))
	}
	return nil
}

func configCheckFlags(fs *pflag.FlagSet) cli.RunFunc {
	atFlag := fs.String("at", "", "RFC 3339 `time` of the current periods shown (default: now)")
	return func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		var path string
		switch len(args) {
		case 0:
			p, err := cli.ConfigPath("")
			if err != nil {
				return cli.Usagef("no config file: give FILE or set RANKD_CONFIG")
			}
			path = p
		default:
			path = args[0]
		}
		at := time.Now()
		if *atFlag != "" {
			t, err := time.Parse(time.RFC3339, *atFlag)
			if err != nil {
				return cli.Usagef("--at %q: want RFC 3339", *atFlag)
			}
			at = t
		}
		cfg, err := cli.LoadConfig(path, stderr)
		if err != nil {
			return err
		}
		cfg.Print(stdout, at, func(b *ranking.Board) string { return store.KeyPatterns(cfg.Redis.Prefix, b) })
		return nil
	}
}
