package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rankd/rankd/config"
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
var configSpec = spec{use: "config", short: "config check FILE: print the resolved boards or the errors", long: configHelp,
	args: func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown subcommand %q (want check)", args[0])
		}
		return nil
	},
	flags: func(*pflag.FlagSet) runFunc {
		return func(context.Context, []string, io.Writer, io.Writer) error {
			return usagef("want a subcommand: check FILE")
		}
	}}

// configCommand is configSpec with its check subcommand.
func configCommand() *cobra.Command {
	c := configSpec.command()
	c.AddCommand(spec{use: "check [FILE] [--at TIME]", short: "load FILE as rankd run would and print the result or the errors",
		long: configHelp, args: atMostOneFile, flags: configCheckFlags}.command())
	return c
}

// atMostOneFile accepts one FILE argument or none ($RANKD_CONFIG).
func atMostOneFile(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usagef("one FILE at a time (got %d)", len(args))
	}
	return nil
}

func configCheckFlags(fs *pflag.FlagSet) runFunc {
	atFlag := fs.String("at", "", "RFC 3339 `time` of the current periods shown (default: now)")
	return func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		var path string
		switch len(args) {
		case 0:
			p, err := configPath("")
			if err != nil {
				return usagef("no config file: give FILE or set RANKD_CONFIG")
			}
			path = p
		default:
			path = args[0]
		}
		at := time.Now()
		if *atFlag != "" {
			t, err := time.Parse(time.RFC3339, *atFlag)
			if err != nil {
				return usagef("--at %q: want RFC 3339", *atFlag)
			}
			at = t
		}
		cfg, err := loadConfig(path, stderr)
		if err != nil {
			return err
		}
		printConfig(stdout, cfg, at)
		return nil
	}
}

// printConfig writes the resolved config: settings, boards, routes.
func printConfig(w io.Writer, cfg *config.Config, at time.Time) {
	k, r := cfg.Kafka, cfg.Redis
	fmt.Fprintf(w, "%s: ok: %d boards, %d routes\n\n", cfg.File, len(cfg.Boards()), len(cfg.Routes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kafka\tbrokers %s, group %s, topics %s, %d workers\n", strings.Join(k.Brokers, ","), k.Group, strings.Join(k.Topics, ","), k.Workers)
	fmt.Fprintf(tw, "\tbatch %d messages / %d bytes / %s linger, dead letters to %s\n", k.Batch.Count, k.Batch.Bytes, dur(k.Batch.Linger), k.DeadLetterTopic)
	fmt.Fprintf(tw, "\tmax message %d bytes, future skew %s, max wait %s\n", k.MaxMessageBytes, dur(k.FutureSkew), dur(k.MaxWait))
	switch {
	case r.Sentinel.Enabled():
		fmt.Fprintf(tw, "redis\tsentinel master %s via %s db %d", r.Sentinel.MasterName, strings.Join(r.Sentinel.Addrs, ","), r.DB)
	case r.Cluster():
		fmt.Fprintf(tw, "redis\tcluster %s", strings.Join(r.Addrs, ","))
	default:
		fmt.Fprintf(tw, "redis\t%s db %d", r.Addr, r.DB)
	}
	fmt.Fprintf(tw, ", prefix %s, dedupe TTL %s\n", r.Prefix, dur(r.DedupeTTL))
	fmt.Fprintf(tw, "http\t%s\n", cfg.HTTP.Listen)
	fmt.Fprintf(tw, "rollover\tlead %s, every %s\n", dur(cfg.Rollover.Lead), dur(cfg.Rollover.Interval))
	printSecurity(tw, cfg) // secure.go
	_ = tw.Flush()

	fmt.Fprintf(w, "\nboards (current periods at %s):\n", at.Format(time.RFC3339))
	for _, b := range cfg.Boards() {
		fmt.Fprintln(w)
		printBoard(w, r.Prefix, b, at)
	}

	fmt.Fprintln(w, "\nroutes:")
	for i, rt := range cfg.Routes {
		fmt.Fprintf(w, "  [%d] %s", i, rt.Topic)
		if rt.When != "" {
			fmt.Fprintf(w, " when %s", rt.When)
		}
		fmt.Fprintf(w, ": member %s", rt.Member)
		switch {
		case len(rt.Sort) > 0:
			for _, name := range slices.Sorted(maps.Keys(rt.Sort)) {
				fmt.Fprintf(w, ", %s %s", name, rt.Sort[name])
			}
		case rt.Score != "":
			fmt.Fprintf(w, ", score %s", rt.Score)
		default:
			fmt.Fprint(w, ", score 1")
		}
		if rt.Base != "" {
			fmt.Fprintf(w, ", base %s", rt.Base)
		}
		fmt.Fprintf(w, " -> %s\n", strings.Join(rt.Boards, ", "))
	}
}

// dur formats a duration briefly: 24h, 7d, 1w, 5m, 200h5m, 20ms.
func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%(7*24*time.Hour) == 0:
		return fmt.Sprintf("%dw", d/(7*24*time.Hour))
	case d%(24*time.Hour) == 0 && d > 24*time.Hour:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// printBoard writes one board's resolved declaration.
func printBoard(w io.Writer, prefix string, b *ranking.Board, at time.Time) {
	loc := b.Location
	if loc == nil {
		loc = time.UTC
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "%s", b.Name)
	if b.Title != "" {
		fmt.Fprintf(w, ": %s", b.Title)
	}
	fmt.Fprintln(w)
	switch b.Window {
	case ranking.WindowTotal:
		fmt.Fprintf(tw, "  window\ttotal (never resets)\n")
	case ranking.WindowPeriodic:
		fmt.Fprintf(tw, "  window\tperiodic, every %s, grace %s, retention %s\n", b.Every, dur(b.Grace), dur(b.Retention))
	case ranking.WindowRolling:
		fmt.Fprintf(tw, "  window\trolling, last %d × %s, grace %s, retention %s\n", b.Periods, b.Every, dur(b.Grace), dur(b.Retention))
	}
	if b.Window != ranking.WindowTotal {
		fmt.Fprintf(tw, "  timezone\t%s (weeks start %s)\n", loc, b.WeekStart)
	}
	dims := "-"
	if len(b.Dims) > 0 {
		dims = strings.Join(b.Dims, ", ")
	}
	fmt.Fprintf(tw, "  dims\t%s\n", dims)
	rank := fmt.Sprintf("%s, %s, tiebreak %s", b.Aggregate, b.Order, b.Tiebreak)
	if b.KeepTop > 0 {
		rank += fmt.Sprintf(", keep top %d", b.KeepTop)
	}
	if b.HasBase {
		rank += ", with base"
	}
	if b.Decimals > 0 {
		rank += fmt.Sprintf(", %d decimals", b.Decimals)
	}
	fmt.Fprintf(tw, "  ranking\t%s\n", rank)
	if c, err := ranking.NewCodec(b); err == nil {
		layout := fmt.Sprintf("%d value bits (max %d) + %d tie bits", c.ValueBits, c.MaxValue(), c.TieBits)
		if b.Tiebreak != ranking.TieNone {
			layout += fmt.Sprintf(", ties in %s", dur(c.TieUnit))
			if b.Window == ranking.WindowTotal {
				layout += fmt.Sprintf(" from %s for %s", c.TieEpoch.Format(time.RFC3339), dur(c.TieHorizon))
			}
		}
		fmt.Fprintf(tw, "  score\t%s\n", layout)
		for _, f := range c.Sort {
			fmt.Fprintf(tw, "  \tsort factor %s: %d bits, %s\n", f.Name, f.Bits, f.Order)
		}
	} else {
		fmt.Fprintf(tw, "  score\t%v\n", err)
	}
	placeholders := make([]string, len(b.Dims))
	for i, d := range b.Dims {
		placeholders[i] = "<" + d + ">"
	}
	tag := store.Tag(b.Name, placeholders)
	cur := b.Calendar().At(at)
	switch b.Window {
	case ranking.WindowTotal:
		fmt.Fprintf(tw, "  keys\t%s\n", store.Key(prefix, tag, store.KindTotal, store.PeriodAll))
	case ranking.WindowPeriodic:
		fmt.Fprintf(tw, "  keys\t%s\n", store.Key(prefix, tag, store.KindPeriod, "<period>"))
	case ranking.WindowRolling:
		fmt.Fprintf(tw, "  keys\t%s (window sums), %s (periods)\n",
			store.Key(prefix, tag, store.KindRolling, "<period>"), store.Key(prefix, tag, store.KindPeriod, "<period>"))
	}
	if b.Window != ranking.WindowTotal {
		fmt.Fprintf(tw, "  current\t%s (%s .. %s)\n", cur.ID,
			cur.Start.In(loc).Format("2006-01-02 15:04"), cur.End.In(loc).Format("2006-01-02 15:04 -07:00"))
	} else {
		fmt.Fprintf(tw, "  current\t%s\n", cur.ID)
	}
	_ = tw.Flush()
}
