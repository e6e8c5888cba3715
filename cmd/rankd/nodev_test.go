package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
)

// devOnly are the modules only `rankd dev` (its embedded Redis and Kafka
// broker) and `rankd bench` (its Kafka broker) need: the production build
// (-tags nodev, as deployments/Dockerfile builds it) must not link them.
var devOnly = []string{"github.com/alicebob/miniredis", "github.com/yuin/gopher-lua", "github.com/twmb/franz-go"}

// TestNodev checks the production build: none of devOnly among its
// dependencies (while the default build has them, with `rankd dev` and
// `rankd bench`), no build links test infrastructure, and `rankd dev` and
// `rankd bench` there say they are not in this build.
func TestNodev(t *testing.T) {
	goBin := requireProgram(t, "go", "the go command builds rankd")
	deps := func(tags ...string) []string {
		t.Helper()
		args := append([]string{"list", "-deps"}, tags...)
		out, err := exec.Command(goBin, append(args, ".")...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	linked := func(pkgs []string) []string {
		var found []string
		for _, p := range pkgs {
			for _, mod := range devOnly {
				if p == mod || strings.HasPrefix(p, mod+"/") {
					found = append(found, p)
				}
			}
		}
		return found
	}
	if found := linked(deps("-tags", "nodev")); len(found) > 0 {
		t.Errorf("go list -deps -tags nodev ./cmd/rankd links dev tooling: %s", strings.Join(found, " "))
	}
	// The check can fail: the default build links all three.
	all := deps()
	found := strings.Join(linked(all), " ")
	for _, mod := range devOnly {
		if !strings.Contains(found, mod) {
			t.Errorf("the default build does not link %s (rankd dev needs it): is the check above still meaningful?", mod)
		}
	}

	// No build links test infrastructure: everything under internal/testenv
	// (servers, oracle, chaos, seeds) is for tests, and so is "testing".
	for _, p := range append(all, deps("-tags", "nodev")...) {
		if p == "testing" || strings.HasPrefix(p, "github.com/rankd/rankd/internal/testenv") {
			t.Errorf("./cmd/rankd links %s, which is for tests only", p)
		}
	}

	bin := filepath.Join(t.TempDir(), "rankd")
	if out, err := exec.Command(goBin, "build", "-tags", "nodev", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nodev: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "dev").CombinedOutput()
	if code := exitCode(err); code != cli.ExitUsage || !regexp.MustCompile(`^rankd dev: not in this build: rankd was built with -tags nodev`).Match(out) {
		t.Errorf("rankd dev in a nodev build: exit %d, output %q; want 2 and why", code, out)
	}
	out, err = exec.Command(bin, "bench").CombinedOutput()
	if code := exitCode(err); code != cli.ExitUsage || !regexp.MustCompile(`^rankd bench: not in this build: rankd was built with -tags nodev`).Match(out) {
		t.Errorf("rankd bench in a nodev build: exit %d, output %q; want 2 and why", code, out)
	}
	out, err = exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\n  run ") || strings.Contains(string(out), "\n  dev ") || strings.Contains(string(out), "\n  bench ") {
		t.Errorf("rankd --help in a nodev build (%v): want run listed and dev and bench not:\n%s", err, out)
	}
}

// exitCode is the exit code of a finished command's error.
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
