package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

const versionHelp = `
Print rankd's module version, the VCS revision it was built from (with
", modified" when the working tree had uncommitted changes), the commit
time and the Go version, from the build information in the binary:

  rankd v1.4.0 (revision 6f62ca2d1e4b3c2a19f8e7d6c5b4a39281706f5e, 2026-11-21T13:40:00Z, go1.26.0)

"go build" and "go install" in a git checkout stamp the module's
pseudo-version (v0.0.0-TIME-REVISION, +dirty for a modified tree), and
"go install module@version" the version itself. A build that has the
revision but no module version (Go before 1.24) shows the pseudo-version
made of the commit time and revision; "devel" is left for a build with
neither (go run, -buildvcs=false, a git worktree).

"rankd --version" is the same.`

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
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	version := bi.Main.Version
	if version == "" || version == "(devel)" {
		version = pseudoVersion(settings["vcs.revision"], settings["vcs.time"], settings["vcs.modified"] == "true")
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

// pseudoVersion returns the module pseudo-version of an untagged commit,
// as the go command stamps it (v0.0.0-yyyymmddhhmmss-abcdefabcdef, with
// +dirty for a modified tree), or "devel" without a revision and time.
func pseudoVersion(revision, commitTime string, modified bool) string {
	t, err := time.Parse(time.RFC3339, commitTime)
	if len(revision) < 12 || err != nil {
		return "devel"
	}
	v := "v0.0.0-" + t.UTC().Format("20060102150405") + "-" + revision[:12]
	if modified {
		v += "+dirty"
	}
	return v
}
