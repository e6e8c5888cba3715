package version

import (
	"regexp"
	"runtime/debug"
	"testing"
)

// versionShape is the shape of the line of "rankd version" (cmd/rankd's
// testVersion checks the binary's against it too).
const versionShape = `^rankd (devel|v\d+\.\d+\.\d+\S*) \(revision (unknown|[0-9a-f]{40})(, modified)?(, \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)?, go1\.\d+[^,)]*\)\n$`

// TestVersionString checks the line of "rankd version" for the build
// information of a release, a checkout and a binary without any.
func TestVersionString(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "6f62ca2d1e4b3c2a19f8e7d6c5b4a39281706f5e"
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.0"},
			Settings: settings("vcs.revision", rev, "vcs.time", "2026-11-21T13:40:00Z", "vcs.modified", "false")},
			"rankd v1.4.0 (revision " + rev + ", 2026-11-21T13:40:00Z, go1.26.0)"},
		{"go build in a modified checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: settings("-race", "true", "vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-21T13:40:00Z", "vcs.modified", "true")},
			"rankd v0.0.0-20261121134000-6f62ca2d1e4b+dirty (revision " + rev + ", modified, 2026-11-21T13:40:00Z, go1.26.0)"},
		{"go build in a clean checkout without a module version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-21T13:40:00Z", "vcs.modified", "false")},
			"rankd v0.0.0-20261121134000-6f62ca2d1e4b (revision " + rev + ", 2026-11-21T13:40:00Z, go1.26.0)"},
		{"go build stamping the module version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261121134000-6f62ca2d1e4b+dirty"},
			Settings: settings("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-21T13:40:00Z", "vcs.modified", "true")},
			"rankd v0.0.0-20261121134000-6f62ca2d1e4b+dirty (revision " + rev + ", modified, 2026-11-21T13:40:00Z, go1.26.0)"},
		{"go run or test: no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"rankd devel (revision unknown, go1.26.0)"},
		{"pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.0.0-20261121134000-6f62ca2d1e4b"}},
			"rankd v0.0.0-20261121134000-6f62ca2d1e4b (revision unknown, go1.26.1)"},
		{"no build information", nil, "rankd devel (revision unknown, no build information)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Of(tt.bi, tt.bi != nil)
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if tt.bi != nil && !regexp.MustCompile(versionShape).MatchString(got+"\n") {
				t.Errorf("%s does not have the shape %s", got, versionShape)
			}
		})
	}
}
