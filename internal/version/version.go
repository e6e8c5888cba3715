// Package version names the build of the running binary: module version,
// VCS revision, commit time and Go version, from the build information
// the go command stamps into it (`rankd version`, `rankd --version`).
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// String is the version line of this binary.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	return Of(bi, ok)
}

// Of is the line "rankd VERSION (revision REV[, modified][, TIME],
// GOVERSION)" of the build information bi (ok: it was available).
func Of(bi *debug.BuildInfo, ok bool) string {
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
