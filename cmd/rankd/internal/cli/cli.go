// Package cli is the glue between rankd's commands (package main) and
// cobra: a command is a Spec, whose Flags function binds its flags to its
// options and returns what runs once they are parsed; Execute runs a
// command tree and turns its error into the exit code (a UsageError: 2,
// any other: 1); LogFlags and Setup are the start every command that
// logs or reads a config shares.
package cli

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
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // a runtime failure
	ExitUsage   = 2 // bad flags or arguments, an invalid config file
)

// RunFunc runs a command once its flags are parsed. It returns nil, a
// *UsageError (exit 2) or any other error (exit 1).
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Spec is one subcommand: Flags declares its flags on fs (bound to its
// options) and returns what runs once they are parsed.
type Spec struct {
	Use, Short, Long string
	Args             cobra.PositionalArgs // nil: no arguments
	Hidden           bool                 // not listed (a command not in this build)
	Raw              bool                 // no flag parsing: every argument goes to run
	Flags            func(fs *pflag.FlagSet) RunFunc
}

// Command returns the cobra command of s.
func (s Spec) Command() *cobra.Command {
	var run RunFunc
	c := &cobra.Command{
		Use: s.Use, Short: s.Short, Long: strings.TrimSpace(s.Long), Hidden: s.Hidden, DisableFlagParsing: s.Raw,
		DisableFlagsInUseLine: true,
		Args:                  s.Args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	if c.Args == nil {
		c.Args = NoArgs
	}
	run = s.Flags(c.Flags())
	return c
}

// NotInBuild is the Spec of a command that this build leaves out (-tags
// nodev, the image): hidden, and saying why when asked for.
func NotInBuild(use, why string) Spec {
	return Spec{Use: use, Hidden: true, Raw: true, Flags: func(*pflag.FlagSet) RunFunc {
		return func(context.Context, []string, io.Writer, io.Writer) error {
			return Usagef("not in this build: rankd was built with -tags nodev, without %s; "+
				"a default build has it (go run ./cmd/rankd %s in a checkout)", why, use)
		}
	}}
}

// Execute runs the command of args in root and returns the exit code; the
// error, if any, goes to stderr (root must silence cobra's own printing).
func Execute(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var ue *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		if ue.Err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), ue.Err)
		}
		return ExitUsage
	case strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "rankd: %v\nRun \"rankd --help\" for the commands.\n", err)
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		return ExitFailure
	}
}

// NoArgs refuses positional arguments, as a usage error.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected argument %q (see --help)", args[0])
	}
	return nil
}

// UsageError is a bad command line or configuration: exit code 2. A nil
// Err means the message was printed already.
type UsageError struct{ Err error }

func (e *UsageError) Error() string {
	if e.Err == nil {
		return "usage error"
	}
	return e.Err.Error()
}

func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with the formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// LogFlags are the logging flags shared by the long-running commands.
type LogFlags struct {
	Format string
	Level  string
}

// Register declares --log-format and --log-level with these defaults.
func (l *LogFlags) Register(fs *pflag.FlagSet, format, level string) {
	fs.StringVar(&l.Format, "log-format", format, "`format` of the logs on stderr: json or text (rankd run logs json by default, the other commands text)")
	fs.StringVar(&l.Level, "log-level", level, "lowest `level` logged: debug, info, warn or error")
}

// Logger returns the logger the flags ask for, writing to w; it is
// go-redis's logger too (assembly.NewLogger): every command that logs
// builds its logger here at startup.
func (l *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, Usagef("--log-level %q: want debug, info, warn or error", l.Level)
	}
	log, err := assembly.NewLogger(w, l.Format, level)
	if err != nil {
		return nil, Usagef("--log-format %q: want json or text", l.Format)
	}
	return log, nil
}

// ConfigPath returns the --config flag's value, else $RANKD_CONFIG.
func ConfigPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if env := os.Getenv(config.EnvConfig); env != "" {
		return env, nil
	}
	return "", Usagef("no config file: give --config FILE or set RANKD_CONFIG")
}

// Setup is the common start of the subcommands that read a config: resolve
// the config path (the --config flag, else $RANKD_CONFIG), build the
// logger and load the config. It returns the config path too.
func Setup(cfgFlag string, lf *LogFlags, stderr io.Writer) (*config.Config, *slog.Logger, string, error) {
	path, err := ConfigPath(cfgFlag)
	if err != nil {
		return nil, nil, "", err
	}
	log, err := lf.Logger(stderr)
	if err != nil {
		return nil, nil, "", err
	}
	cfg, err := LoadConfig(path, stderr)
	if err != nil {
		return nil, nil, "", err
	}
	return cfg, log, path, nil
}

// LoadConfig loads the config file; its errors, one per line with
// file:line:column, go to stderr and make a usage error (exit 2).
func LoadConfig(path string, stderr io.Writer) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, &UsageError{}
	}
	return cfg, nil
}
