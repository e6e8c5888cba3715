package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/assembly"
	"github.com/rankd/rankd/internal/version"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure
	exitUsage   = 2 // bad flags or arguments, an invalid config file
)

// runFunc runs a command once its flags are parsed. It returns nil, a
// *usageError (exit 2) or any other error (exit 1).
type runFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// spec is one subcommand: flags declares its flags on fs (bound to its
// options) and returns what runs once they are parsed.
type spec struct {
	use, short, long string
	args             cobra.PositionalArgs // nil: no arguments
	hidden           bool                 // not listed (a command not in this build)
	raw              bool                 // no flag parsing: every argument goes to run
	flags            func(fs *pflag.FlagSet) runFunc
}

// command returns the cobra command of s.
func (s spec) command() *cobra.Command {
	var run runFunc
	c := &cobra.Command{
		Use: s.use, Short: s.short, Long: strings.TrimSpace(s.long), Hidden: s.hidden, DisableFlagParsing: s.raw,
		DisableFlagsInUseLine: true,
		Args:                  s.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	if c.Args == nil {
		c.Args = noArgs
	}
	run = s.flags(c.Flags())
	return c
}

// specs lists the subcommands in the order of the usage text.
func specs() []spec {
	return []spec{
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
			return &usageError{}
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	cobra.EnableCommandSorting = false // the order of specs
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v (see --help)", err) })
	for _, s := range specs() {
		if s.use == configSpec.use { // with its subcommand
			root.AddCommand(configCommand())
			continue
		}
		root.AddCommand(s.command())
	}
	return root
}

// run is the whole command line: it runs the subcommand of args and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		if ue.err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), ue.err)
		}
		return exitUsage
	case strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "rankd: %v\nRun \"rankd --help\" for the commands.\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		return exitFailure
	}
}

// noArgs refuses positional arguments, as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q (see --help)", args[0])
	}
	return nil
}

// usageError is a bad command line or configuration: exit code 2. A nil
// err means the message was printed already.
type usageError struct{ err error }

func (e *usageError) Error() string {
	if e.err == nil {
		return "usage error"
	}
	return e.err.Error()
}

func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// logFlags are the logging flags shared by the long-running commands.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *pflag.FlagSet, format, level string) {
	fs.StringVar(&l.format, "log-format", format, "`format` of the logs on stderr: json or text (rankd run logs json by default, the other commands text)")
	fs.StringVar(&l.level, "log-level", level, "lowest `level` logged: debug, info, warn or error")
}

// logger returns the logger the flags ask for, writing to w; it is
// go-redis's logger too (assembly.NewLogger): every command that logs
// builds its logger here at startup.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", l.level)
	}
	log, err := assembly.NewLogger(w, l.format, level)
	if err != nil {
		return nil, usagef("--log-format %q: want json or text", l.format)
	}
	return log, nil
}

// configPath returns the --config flag's value, else $RANKD_CONFIG.
func configPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if env := os.Getenv(config.EnvConfig); env != "" {
		return env, nil
	}
	return "", usagef("no config file: give --config FILE or set RANKD_CONFIG")
}

// setup is the common start of the subcommands that read a config: resolve
// the config path (the --config flag, else $RANKD_CONFIG), build the
// logger and load the config. It returns the config path too.
func setup(cfgFlag string, lf *logFlags, stderr io.Writer) (*config.Config, *slog.Logger, string, error) {
	path, err := configPath(cfgFlag)
	if err != nil {
		return nil, nil, "", err
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return nil, nil, "", err
	}
	cfg, err := loadConfig(path, stderr)
	if err != nil {
		return nil, nil, "", err
	}
	return cfg, log, path, nil
}

// loadConfig loads the config file; its errors, one per line with
// file:line:column, go to stderr and make a usage error (exit 2).
func loadConfig(path string, stderr io.Writer) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, &usageError{}
	}
	return cfg, nil
}
