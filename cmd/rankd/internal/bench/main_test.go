package bench

import (
	"os"
	"testing"

	"github.com/rankd/rankd/cmd/rankd/internal/loadgen"
	"github.com/rankd/rankd/cmd/rankd/internal/servers"

	"github.com/rankd/rankd/internal/testenv"
)

// TestMain runs the test binary as the broker or the load generator when
// StartBroker or loadgen.Start re-runs it.
func TestMain(m *testing.M) {
	if code, ok := servers.Child(); ok {
		os.Exit(code)
	}
	if code, ok := loadgen.Child(); ok {
		os.Exit(code)
	}
	testenv.Main(m)
}
