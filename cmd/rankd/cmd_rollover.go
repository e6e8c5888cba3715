package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/assembly"
	"github.com/spf13/pflag"
)

const rolloverHelp = `
Prefill the rolling boards now, as "rankd run" does on its timer: for every
rolling board (or --board), every dims and every period from the last rolled
one up to the period containing --at (default: now + rollover.lead of the
config, so the next period is ready before its boundary). It is idempotent
and safe while rankd runs: a Redis lock lets one process roll a board at a
time. Non-rolling boards need no rollover.`

// rolloverSpec is `rankd rollover`.
var rolloverSpec = cli.Spec{Use: "rollover --config FILE [--board NAME] [--at TIME]", Short: "prefill the rolling boards now (operators, cron)", Long: rolloverHelp, Flags: rolloverFlags}

func rolloverFlags(fs *pflag.FlagSet) cli.RunFunc {
	cfgFlag := fs.String("config", "", "config `file` (default $RANKD_CONFIG)")
	board := fs.String("board", "", "roll only this rolling board (default: all of them)")
	atFlag := fs.String("at", "", "RFC 3339 `time` whose period to roll up to (default: now + rollover.lead)")
	var lf cli.LogFlags
	lf.Register(fs, "text", "warn")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		cfg, log, path, err := cli.Setup(*cfgFlag, &lf, stderr)
		if err != nil {
			return err
		}
		at := time.Now().Add(cfg.Rollover.Lead)
		if *atFlag != "" {
			if at, err = time.Parse(time.RFC3339, *atFlag); err != nil {
				return cli.Usagef("--at %q: want RFC 3339, e.g. 2026-11-22T00:00:00+08:00", *atFlag)
			}
		}
		boards, err := cfg.RollingBoards(*board)
		if err != nil {
			return cli.Usagef("--board %q: %v", *board, err)
		}
		if len(boards) == 0 {
			fmt.Fprintf(stdout, "%s has no rolling boards: nothing to do\n", path)
			return nil
		}
		rdb := assembly.NewRedis(cfg.Redis)
		defer rdb.Close()
		store, err := assembly.NewStore(cfg, rdb, log)
		if err != nil {
			return err
		}
		for _, b := range boards {
			p := b.Calendar().At(at)
			start := time.Now()
			if err := store.Rollover(ctx, b.Name, at); err != nil {
				return fmt.Errorf("board %s: %w", b.Name, err)
			}
			fmt.Fprintf(stdout, "%s: rolled up to period %s (%s .. %s) in %s\n", b.Name, p.ID,
				p.Start.In(b.Location).Format(time.RFC3339), p.End.In(b.Location).Format(time.RFC3339),
				time.Since(start).Round(time.Millisecond))
		}
		return nil
	}
}
