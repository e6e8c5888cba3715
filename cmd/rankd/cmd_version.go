package main

import (
	"context"
	"fmt"
	"io"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/version"
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
var versionSpec = cli.Spec{Use: "version", Short: "print the version and the VCS revision rankd was built from", Long: versionHelp, Flags: versionFlags}

func versionFlags(fs *pflag.FlagSet) cli.RunFunc {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fmt.Fprintln(stdout, version.String())
		return nil
	}
}
