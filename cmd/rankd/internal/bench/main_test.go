package bench

import (
	"os"
	"testing"

	"github.com/rankd/rankd/cmd/rankd/internal/loadgen"
	"github.com/rankd/rankd/internal/testenv"
)

// TestMain runs the test binary as the load generator when loadgen.Start
// re-runs it, and as the broker when servers.StartBroker does
// (testenv.Main calls servers.Child).
func TestMain(m *testing.M) {
	if code, ok := loadgen.Child(); ok {
		os.Exit(code)
	}
	testenv.Main(m)
}
