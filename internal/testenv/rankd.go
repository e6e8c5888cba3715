package testenv

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BuildRankd builds the rankd command into t's temp dir, with -race when
// the test binary has it, and returns its path. It needs the go command in
// PATH (missing: a skip, or a failure under CI=true).
func BuildRankd(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		Unavailable(t, "the go command is not in PATH: it is needed to build rankd")
	}
	bin := filepath.Join(t.TempDir(), "rankd")
	args := []string{"build", "-o", bin}
	if RaceEnabled {
		args = append(args, "-race")
	}
	start := time.Now()
	out, err := exec.Command(goBin, append(args, "github.com/rankd/rankd/cmd/rankd")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built rankd (race %v) in %v", RaceEnabled, time.Since(start).Round(time.Millisecond))
	return bin
}
