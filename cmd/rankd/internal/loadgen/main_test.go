package loadgen

import (
	"os"
	"testing"

	"github.com/rankd/rankd/internal/testenv"
)

// TestMain runs the test binary as the load generator when Start re-runs
// it.
func TestMain(m *testing.M) {
	if code, ok := Child(); ok {
		os.Exit(code)
	}
	testenv.Main(m)
}
