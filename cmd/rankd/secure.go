package main

import (
	"fmt"
	"io"

	"github.com/rankd/rankd/config"
)

// printSecurity writes the security lines of `rankd config check` (to
// its tabwriter): where every secret comes from (never the secret) and the
// warnings.
func printSecurity(w io.Writer, cfg *config.Config) {
	label := "security"
	for _, l := range append(cfg.SecuritySummary(), cfg.Warnings()...) {
		fmt.Fprintf(w, "%s\t%s\n", label, l)
		label = ""
	}
}
