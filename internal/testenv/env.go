package testenv

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/rankd/rankd/internal/servers"
	"github.com/rankd/rankd/internal/testenv/kgroup"
)

// Main runs the tests of a package and then stops every shared server and
// broker that the helpers started, removes their temp dirs and exits with the
// tests' status. Call it from TestMain. When StartBrokerProcess (or
// servers.StartBroker) starts the test binary again to be a broker, Main
// runs the broker instead of the tests (servers.Child).
func Main(m *testing.M) {
	// The hook: kfake's groups as Kafka runs them, unless KfakeDeadMembers.
	if code, ok := servers.Child(kgroup.Hook); ok {
		os.Exit(code)
	}
	code := m.Run()
	runCleanups()
	os.Exit(code)
}

var cleanups struct {
	mu  sync.Mutex
	fns []func()
}

// atExit registers fn to run when Main returns, last registered first.
func atExit(fn func()) {
	cleanups.mu.Lock()
	defer cleanups.mu.Unlock()
	cleanups.fns = append(cleanups.fns, fn)
}

func runCleanups() {
	cleanups.mu.Lock()
	fns := cleanups.fns
	cleanups.fns = nil
	cleanups.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// inCI reports whether CI is set to a true value, in which case a missing
// server fails the test instead of skipping it.
func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Unavailable skips t, or fails it under CI=true, because a server it needs
// cannot be had (the message names what to install).
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("%s (CI=true: not skipping)", msg)
	}
	t.Skip(msg)
}

// errMissing marks a server that cannot be started because a program is not
// installed: the test is skipped (or fails under CI) rather than failed.
type errMissing struct{ msg string }

func (e errMissing) Error() string { return e.msg }

// require fails or skips t according to err: errMissing skips (fails under
// CI), any other error fails.
func require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var m errMissing
	if errors.As(err, &m) {
		Unavailable(t, "%s", m.msg)
		return
	}
	t.Fatal(err)
}

// Slow skips t under -short (go test -short ./... runs in a few minutes),
// except under CI=true, where every test runs.
func Slow(t testing.TB, what string) {
	t.Helper()
	if testing.Short() && !inCI() {
		t.Skip("slow (" + what + "): not with -short")
	}
}

// OptIn skips t unless the environment variable env is value: a
// measurement that takes minutes and asserts only bounds (RANKD_CHAOS=long,
// RANKD_CHAOS=recovery), run by hand; CI does not set it.
func OptIn(t testing.TB, env, value, what string) {
	t.Helper()
	if os.Getenv(env) != value {
		t.Skip(what + ": run with " + env + "=" + value)
	}
}
