package config

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rankd/rankd/ranking"
)

// Print writes the resolved config as `rankd config check` shows it:
// settings, where every secret comes from (never the secret) and the
// warnings, every board with its current period at at, the routes. keys
// gives a board's Redis key pattern (the store knows the key layout).
func (cfg *Config) Print(w io.Writer, at time.Time, keys func(*ranking.Board) string) {
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
	fmt.Fprintf(tw, ", prefix %s, dedupe TTL %s, %d updates per call\n", r.Prefix, dur(r.DedupeTTL), r.CallUpdates)
	fmt.Fprintf(tw, "http\t%s\n", cfg.HTTP.Listen)
	fmt.Fprintf(tw, "rollover\tlead %s, every %s\n", dur(cfg.Rollover.Lead), dur(cfg.Rollover.Interval))
	label := "security"
	for _, l := range append(cfg.SecuritySummary(), cfg.Warnings()...) {
		fmt.Fprintf(tw, "%s\t%s\n", label, l)
		label = ""
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nboards (current periods at %s):\n", at.Format(time.RFC3339))
	for _, b := range cfg.Boards() {
		fmt.Fprintln(w)
		printBoard(w, b, at, keys(b))
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
func printBoard(w io.Writer, b *ranking.Board, at time.Time, keys string) {
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
	fmt.Fprintf(tw, "  keys\t%s\n", keys)
	cur := b.Calendar().At(at)
	if b.Window != ranking.WindowTotal {
		fmt.Fprintf(tw, "  current\t%s (%s .. %s)\n", cur.ID,
			cur.Start.In(loc).Format("2006-01-02 15:04"), cur.End.In(loc).Format("2006-01-02 15:04 -07:00"))
	} else {
		fmt.Fprintf(tw, "  current\t%s\n", cur.ID)
	}
	_ = tw.Flush()
}
