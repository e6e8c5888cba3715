package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
)

const versionHelp = `
Print rankd's module version, the VCS revision it was built from (with
", modified" when the working tree had uncommitted changes), the commit
time and the Go version, from the build information in the binary:

  rankd v1.4.0 (revision 6f62ca2d1e4b3c2a19f8e7d6c5b4a39281706f5e, 2026-11-21T13:40:00Z, go1.26.0)

A binary built from a checkout with "go build" has the version "devel";
"go install module@version" stamps the module version. "rankd --version"
is the same.`

// versionSpec is `rankd version`.
var versionSpec = spec{use: "version", short: "print the version and the VCS revision rankd was built from", long: versionHelp, flags: versionFlags}

func versionFlags(fs *pflag.FlagSet) runFunc {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		bi, ok := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionString(bi, ok))
		return nil
	}
}

// buildVersion is the version line of this binary (rankd --version).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	return versionString(bi, ok)
}

// versionString is the line "rankd VERSION (revision REV[, modified][,
// TIME], GOVERSION)" of the build information bi (ok: it was available).
func versionString(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "rankd devel (revision unknown, no build information)"
	}
	version := bi.Main.Version
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	parts := []string{"revision unknown"}
	if rev := settings["vcs.revision"]; rev != "" {
		parts[0] = "revision " + rev
	}
	if settings["vcs.modified"] == "true" {
		parts = append(parts, "modified")
	}
	if t := settings["vcs.time"]; t != "" {
		parts = append(parts, t)
	}
	parts = append(parts, bi.GoVersion)
	return fmt.Sprintf("rankd %s (%s)", version, strings.Join(parts, ", "))
}
