package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rankd/rankd/config"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure
	exitUsage   = 2 // bad flags or arguments, an invalid config file
)

// command is one subcommand. Its main returns nil, a *usageError (exit 2)
// or any other error (exit 1); flag.ErrHelp means --help was printed.
type command struct {
	name    string
	summary string
	main    func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands in the order of the usage text.
func commands() []command {
	return []command{
		{"run", "consume events, apply them to the boards, serve the HTTP API", runMain},
		devCommand, // cmd_dev.go; cmd_dev_nodev.go with -tags nodev
		{"produce", "generate the standard workload (or send a file) to Kafka", produceMain},
		{"rollover", "prefill the rolling boards now (operators, cron)", rolloverMain},
		{"config", "config check FILE: print the resolved boards or the errors", configMain},
		{"healthcheck", "GET a URL; exit 0 on a 2xx answer (for distroless images)", healthcheckMain},
		{"replay", "rebuild boards from the topics into a new key generation, then switch to it", replayMain},
		{"version", "print the version and the VCS revision rankd was built from", versionMain},
		benchCommand, // cmd_bench.go; cmd_bench_nodev.go with -tags nodev
	}
}

// run is the whole command line: it dispatches args to a subcommand and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.main(ctx, args[1:], stdout, stderr)
		var ue *usageError
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ue):
			if ue.err != nil {
				fmt.Fprintf(stderr, "rankd %s: %v\n", c.name, ue.err)
			}
			return exitUsage
		default:
			fmt.Fprintf(stderr, "rankd %s: %v\n", c.name, err)
			return exitFailure
		}
	}
	fmt.Fprintf(stderr, "rankd: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `rankd: exact real-time leaderboards from Kafka events, kept in Redis.

Usage:
  rankd <command> [flags]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		if c.summary == "" { // not in this build
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Run "rankd <command> --help" for a command's flags. Flags take one or two
dashes (-rate 5 and --rate=5 are the same) and may follow arguments.
"rankd --version" is "rankd version".

Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.
`)
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

// newFlags returns the flag set of a subcommand whose --help prints
// synopsis, the description and every flag to stderr.
func newFlags(name, synopsis, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rankd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: rankd %s\n\n%s\n", synopsis, strings.TrimSpace(description))
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(stderr, "\nFlags:")
			printFlags(stderr, fs)
		}
	}
	return fs
}

// printFlags is flag.PrintDefaults with GNU-style names (--name).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		kind, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(text, "\n", "\n    \t"))
		if def := f.DefValue; def != "" && def != "0" && def != "0s" && def != "false" {
			if kind == "string" || strings.ContainsAny(def, " ,") {
				def = strconv.Quote(def)
			}
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

// parse parses args, flags and positional arguments in any order (issue
// 11: "config check FILE --at T" failed); after "--" everything is an
// argument. fs.Args() are then the positional arguments. A parse error
// (already printed with the usage by the flag package) is a usage error,
// --help returns flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return &usageError{}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Leave the positional arguments in fs.Args().
	return fs.Parse(append([]string{"--"}, positional...))
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// noArgs fails when positional arguments are left after the flags.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (see --help)", fs.Arg(0))
	}
	return nil
}

// logFlags are the logging flags shared by the long-running commands.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *flag.FlagSet, format, level string) {
	fs.StringVar(&l.format, "log-format", format, "`format` of the logs on stderr: json or text")
	fs.StringVar(&l.level, "log-level", level, "lowest `level` logged: debug, info, warn or error")
}

// logger returns the logger the flags ask for, writing to w, and makes it
// go-redis's logger too (see redisLogger): every command that logs builds
// its logger here at startup.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch strings.ToLower(l.format) {
	case "json":
		log = slog.New(slog.NewJSONHandler(w, opts))
	case "text":
		log = slog.New(slog.NewTextHandler(w, opts))
	default:
		return nil, usagef("--log-format %q: want json or text", l.format)
	}
	setRedisLogger(log)
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

// setup is the common start of the subcommands that read a config: parse
// the flags (no positional arguments), resolve the config path (flag, else
// $RANKD_CONFIG), build the logger and load the config;
// cfgFlag is read after parsing. It returns the config path too.
func setup(fs *flag.FlagSet, args []string, cfgFlag *string, lf *logFlags, stderr io.Writer) (*config.Config, *slog.Logger, string, error) {
	if err := parse(fs, args); err != nil {
		return nil, nil, "", err
	}
	if err := noArgs(fs); err != nil {
		return nil, nil, "", err
	}
	path, err := configPath(*cfgFlag)
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
